/* The q8rows layout of Q8_0 matrices (packed.h, above struct lowbit_matrix): its scalar
 * references.  The file layout's specification (ref/dot.c) on the same codes, read where the
 * layout places them: per 32-weight block b, isum = sum of w[j] * q[32 b + j] (w = code ^ 0x80),
 * acc += (float)isum * (dw * d[b]), blocks in order -- bit for bit gemv_q8_0_ref. */
#include "../internal.h"

static float q8rows_dot_ref(const lowbit_matrix *m, int64_t r, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < m->nscales; b++) {
        const uint8_t *c = m->codes + lowbit_q8rows_code_at(m, r, b, 0);
        int32_t isum = 0;
        for (int p = 0; p < 32; p++) isum += (int8_t)(c[p / 4 * 64 + p % 4] ^ 0x80) * a->q[32 * b + p];
        const float dw = lowbit_fp16_to_fp32(m->scales[lowbit_q8rows_scale_at(m, r, b)]);
        acc += (float)isum * (dw * a->d[b]);
    }
    return acc;
}

void lowbit_q8rows_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    for (int64_t r = r0; r < r1 && r < m->rows; r++) y[r] = q8rows_dot_ref(m, r, a);
}

void lowbit_q8rows_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    for (int64_t b = 0; b < batch; b++) lowbit_q8rows_gemv_ref(m, r0, r1, &a[b], y + b * ldy);
}
