/* The scalar reference kernels of the packed layout (packed.h).  They reproduce dot.c's
 * specification exactly: the same integer group sums (the codes are only reordered) combined in
 * the same float order, so a packed GEMV equals the file-layout scalar GEMV bit for bit. */
#include "../internal.h"

/* Codes of 128-weight chunk c of row r, in weight order (either 2-bit layout: byte p of the
 * row's 32-byte chunk holds weights p + 32k at bits 2k). */
void lowbit_packed_chunk_codes(const lowbit_matrix *m, int64_t r, int64_t c, uint8_t codes[128]) {
    for (int p = 0; p < 32; p++) {
        const uint8_t v = m->codes[lowbit_packed_code_at(m, r, c, p)];
        for (int k = 0; k < 4; k++) codes[32 * k + p] = (v >> (2 * k)) & 3;
    }
}

static float packed_dot_ref(const lowbit_matrix *m, int64_t r, const lowbit_act *a) {
    const int64_t G = a->group;
    uint8_t codes[128];
    float acc = 0.0f;
    for (int64_t g = 0; g < m->cols / G; g++) {
        const int64_t j0 = g * G; /* 32- and 128-groups sit in one chunk, 256-groups span two */
        /* the scale of the file block holding group g (groups never straddle blocks) */
        float dw = 1.0f;
        if (m->qk) {
            int64_t b = j0 / m->qk;
            dw = lowbit_fp16_to_fp32(m->scales[lowbit_packed_scale_at(m, r, b)]);
        }
        int32_t isum = 0;
        for (int64_t j = j0; j < j0 + G; j++) {
            if (j % 128 == 0 || j == j0) lowbit_packed_chunk_codes(m, r, j / 128, codes);
            isum += codes[j % 128] * a->q[j];
        }
        isum -= a->s[g]; /* every packed code carries the +1 offset */
        acc += (float)isum * (dw * a->d[g]);
    }
    return acc;
}

void lowbit_packed_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    for (int64_t r = r0; r < r1 && r < m->rows; r++) y[r] = packed_dot_ref(m, r, a);
}

void lowbit_packed_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    for (int64_t b = 0; b < batch; b++) lowbit_packed_gemv_ref(m, r0, r1, &a[b], y + b * ldy);
}
