/* The AArch64 file-layout GEMV / GEMM of every weight format (after arm-inl.h, in kernels_neon.c
 * and kernels_dotprod.c). */
#ifndef LOWBIT_FILE_ARM_INL_H
#define LOWBIT_FILE_ARM_INL_H

#include <stddef.h>

/* ---- format traits (compile-time constants after inlining) ---------------------------------- */

enum { F_TQ1_0, F_TQ2_0, F_I2_S, F_Q1_0, F_Q2_0, F_PQ2_0, F_PTQ1_0, F_Q8_0 };

AI int fmt_block(int f) { /* weights per block */
    return f == F_TQ1_0 || f == F_TQ2_0 ? 256 : f == F_Q2_0 ? 64 : f == F_Q8_0 ? 32 : 128;
}
AI int fmt_bytes(int f) {
    switch (f) {
    case F_TQ1_0: return (int)sizeof(lowbit_block_tq1_0);
    case F_TQ2_0: return (int)sizeof(lowbit_block_tq2_0);
    case F_I2_S: return (int)sizeof(lowbit_block_i2_s);
    case F_Q1_0: return (int)sizeof(lowbit_block_q1_0);
    case F_Q2_0: return (int)sizeof(lowbit_block_q2_0);
    case F_PQ2_0: return (int)sizeof(lowbit_block_pq2_0);
    case F_PTQ1_0: return (int)sizeof(lowbit_block_ptq1_0);
    default: return (int)sizeof(lowbit_block_q8_0);
    }
}
/* activation group: lowbit_act_group of the format (256 for TQ, 128 for I2_S / PQ2_0 / PTQ1_0) */
AI int fmt_group(int f) {
    return f == F_TQ1_0 || f == F_TQ2_0 ? 256 : f == F_I2_S || f == F_PQ2_0 || f == F_PTQ1_0 ? 128 : 32;
}
AI int fmt_offset(int f) { return f == F_Q8_0 ? 0 : 1; }
AI int fmt_negated(int f) { return f == F_TQ1_0 || f == F_PTQ1_0; } /* unpack gives -code */

/* where field f of block struct B starts, in bytes */
#define AT(B, f) offsetof(lowbit_block_##B, f)

/* Unpack block b (pointing at its first byte) and return its scale (I2_S: 1, the per-tensor
 * scale is applied by the caller). */
AI float unpack(int f, const uint8_t *b, int8x16_t *c) {
    switch (f) {
    case F_TQ1_0:
        unpack_tq1_0(b, c);
        return load_fp16(b + AT(tq1_0, d));
    case F_TQ2_0:
        unpack_tq2_0(b, c);
        return load_fp16(b + AT(tq2_0, d));
    case F_I2_S:
        unpack_i2_s(b, c);
        return 1.0f;
    case F_Q1_0:
        unpack_q1_0(b + AT(q1_0, qs), c);
        return load_fp16(b + AT(q1_0, d));
    case F_Q2_0:
        unpack_q2_64(b + AT(q2_0, qs), c);
        return load_fp16(b + AT(q2_0, d));
    case F_PQ2_0:
        unpack_q2_64(b + AT(pq2_0, qs), c);
        unpack_q2_64(b + AT(pq2_0, qs) + 16, c + 4);
        return load_fp16(b + AT(pq2_0, d));
    case F_PTQ1_0:
        unpack_ptq1_0(b, c);
        return load_fp16(b + AT(ptq1_0, d));
    default: /* Q8_0 */
        c[0] = vld1q_s8((const int8_t *)b + AT(q8_0, qs));
        c[1] = vld1q_s8((const int8_t *)b + AT(q8_0, qs) + 16);
        return load_fp16(b + AT(q8_0, d));
    }
}

/* ---- the row kernel: rows r0..r1 against `batch` activations ------------------------------- */

/* y[bi * ldy + r - ybase] = dot(row r, a[bi]).  GEMV passes ybase = r0 (y is relative to the
 * chunk), GEMM ybase = 0. */
AI void rows_kernel(const int f, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                    const lowbit_act *a, int64_t batch, float *y, int64_t ldy, int64_t ybase) {
    const int BS = fmt_block(f), BB = fmt_bytes(f), G = fmt_group(f);
    const int GPB = BS / G, RPG = G / 16; /* groups per block, registers per group */
    if (batch <= 0 || r0 >= r1) return;   /* a[0] may not exist */
    const int64_t nb = a[0].n / BS;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + r * row_bytes;
        for (int64_t b0 = 0; b0 < batch; b0 += GEMM_TILE) {
            const int nt = (int)(batch - b0 < GEMM_TILE ? batch - b0 : GEMM_TILE);
            float acc[GEMM_TILE] = {0};
            for (int64_t blk = 0; blk < nb; blk++) {
                int8x16_t c[16];
                const float dw = unpack(f, row + blk * BB, c);
                for (int t = 0; t < nt; t++) {
                    const lowbit_act *A = &a[b0 + t];
                    const int8_t *q = A->q + blk * BS;
                    for (int gi = 0; gi < GPB; gi++) {
                        int32x4_t vs = vdupq_n_s32(0);
                        for (int k = 0; k < RPG; k++) {
                            const int8x16_t qa = vld1q_s8(q + 16 * (gi * RPG + k));
                            vs = f == F_Q8_0 ? dot16_wide(vs, c[gi * RPG + k], qa)
                                             : dot16(vs, c[gi * RPG + k], qa);
                        }
                        const int64_t g = blk * GPB + gi;
                        int32_t isum = vaddvq_s32(vs);
                        if (fmt_negated(f)) isum = -isum;
                        isum -= fmt_offset(f) * A->s[g];
                        acc[t] += (float)isum * (dw * A->d[g]);
                    }
                }
            }
            for (int t = 0; t < nt; t++) y[(b0 + t) * ldy + r - ybase] = acc[t];
        }
    }
}

#define DEFINE_KERNELS(name, F)                                                                    \
    void VARIANT(gemv_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1, \
                                          const lowbit_act *a, float *y) {                         \
        rows_kernel(F, w, row_bytes, r0, r1, a, 1, y, 0, r0);                                      \
    }                                                                                              \
    void VARIANT(gemm_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1, \
                                          const lowbit_act *a, int64_t batch, float *y,            \
                                          int64_t ldy) {                                           \
        rows_kernel(F, w, row_bytes, r0, r1, a, batch, y, ldy, 0);                                 \
    }
DEFINE_KERNELS(tq1_0, F_TQ1_0)
DEFINE_KERNELS(tq2_0, F_TQ2_0)
DEFINE_KERNELS(i2_s, F_I2_S)
DEFINE_KERNELS(q1_0, F_Q1_0)
DEFINE_KERNELS(q2_0, F_Q2_0)
DEFINE_KERNELS(pq2_0, F_PQ2_0)
DEFINE_KERNELS(ptq1_0, F_PTQ1_0)
DEFINE_KERNELS(q8_0, F_Q8_0)

#endif /* LOWBIT_FILE_ARM_INL_H */
