/* The dense base-3 packed layouts of TQ1_0 / PTQ1_0 (packed.h, above struct lowbit_matrix: BASE3
 * and BASE3F, one geometry, two byte codes): their scalar reference GEMV / GEMM (pack.c builds them).  The reference takes the same integer group
 * sums (the codes are only reordered) in the same float order as lowbit_packed_gemv_ref and the
 * file-layout reference, so the three agree bit for bit. */
#include "../internal.h"

/* Codes (0..2) of period p of row r in weight order, codes[j] weight 5 p G + j: the period's
 * groups times G of them */
void lowbit_base3_period_codes(const lowbit_matrix *m, int64_t r, int64_t p, uint8_t *codes) {
    static const uint8_t pow3[4] = {1, 3, 9, 27};
    int64_t u0, u1 = lowbit_base3_period_units(m, p, &u0);
    for (int64_t u = u0; u < u1; u++) {
        int64_t off[5];
        lowbit_base3_unit_slices(m, p, u, off);
        const uint8_t *src = m->codes + lowbit_base3_unit_at(m, r, u);
        for (int k = 0; k < 5; k++) {
            if (off[k] < 0) continue;
            for (int j = 0; j < 32; j++) {
                const uint8_t v = src[lowbit_base3_byte(j)];
                const int t4 = v / 84, rest = v - 84 * t4;
                codes[off[k] + j] = (uint8_t)(m->base3f ? lowbit_base3f_trit(v, k)
                                              : k == 4   ? t4
                                                         : rest / pow3[k] % 3);
            }
        }
    }
}

void lowbit_base3_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    const int64_t G = m->group;
    uint8_t codes[LOWBIT_BASE3_PERIOD_CODES];
    for (int64_t r = r0; r < r1 && r < m->rows; r++) {
        float acc = 0.0f;
        for (int64_t p = 0; p < lowbit_base3_periods(m); p++) {
            lowbit_base3_period_codes(m, r, p, codes);
            for (int64_t g = 5 * p; g < lowbit_base3_period_groups_end(m, p); g++) {
                /* one scale block per group */
                const float dw = lowbit_fp16_to_fp32(m->scales[lowbit_base3_scale_at(m, r, g)]);
                const uint8_t *c = codes + (g - 5 * p) * G;
                const int8_t *q = a->q + g * G;
                int32_t isum = 0;
                for (int64_t j = 0; j < G; j++) isum += c[j] * q[j];
                isum -= a->s[g]; /* the +1 code offset */
                acc += (float)isum * (dw * a->d[g]);
            }
        }
        y[r] = acc;
    }
}

void lowbit_base3_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           int64_t batch, float *y, int64_t ldy) {
    for (int64_t b = 0; b < batch; b++) lowbit_base3_gemv_ref(m, r0, r1, &a[b], y + b * ldy);
}

/* BASE3F: the same functions (period_codes reads either byte), listed under that layout */
void lowbit_base3f_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    lowbit_base3_gemv_ref(m, r0, r1, a, y);
}

void lowbit_base3f_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    lowbit_base3_gemm_ref(m, r0, r1, a, batch, y, ldy);
}
