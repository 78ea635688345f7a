/* The rows64 layout of Q1_0 (packed.h, above struct lowbit_matrix): its scalar references.  A row's
 * file blocks are read back one at a time and dotted as ref/dot.c's dot_ref dots Q1_0 (codes
 * c = 2 * bit, isum = sum(c * q) - s[g]; a block's sum s_b of (float)isum * d[g], the first a
 * product, the rest fused; then acc = fma(dw, s_b, acc)), so a rows64 GEMV equals the
 * file-layout scalar GEMV bit for bit. */
#include "../internal.h"
#include "../platform.h" /* lowbit_fmaf */

void lowbit_rows64_block(const lowbit_matrix *m, int64_t r, int64_t b, lowbit_block_q1_0 *blk) {
    blk->d = m->scales[lowbit_packed_scale_at(m, r, b)];
    for (int k = 0; k < 16; k++) blk->qs[k] = m->codes[lowbit_rows64_code_at(m, r, b, k)];
}

static float row_dot(const lowbit_matrix *m, int64_t r, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < m->nchunks; b++) {
        lowbit_block_q1_0 blk;
        lowbit_rows64_block(m, r, b, &blk);
        float sb = 0.0f;
        for (int g = 0; g < 4; g++) { /* a block holds 4 activation groups of 32 */
            const int64_t gg = 4 * b + g;
            int32_t isum = 0;
            for (int j = 32 * g; j < 32 * g + 32; j++)
                isum += 2 * ((blk.qs[j / 8] >> (j % 8)) & 1) * a->q[128 * b + j];
            isum -= a->s[gg];
            sb = g ? lowbit_fmaf((float)isum, a->d[gg], sb) : (float)isum * a->d[gg];
        }
        acc = lowbit_fmaf(lowbit_fp16_to_fp32(blk.d), sb, acc);
    }
    return acc;
}

void lowbit_rows64_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    for (int64_t r = r0; r < r1 && r < m->rows; r++) y[r] = row_dot(m, r, a);
}

void lowbit_rows64_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    for (int64_t b = 0; b < batch; b++) lowbit_rows64_gemv_ref(m, r0, r1, &a[b], y + b * ldy);
}
