/* The AArch64 file-layout GEMV / GEMM of every weight format (after arm-inl.h, in kernels_neon.c,
 * kernels_dotprod.c and kernels_i8mm.c). */
#ifndef LOWBIT_FILE_ARM_INL_H
#define LOWBIT_FILE_ARM_INL_H

#include <stddef.h>

#include "../platform.h" /* lowbit_fmaf */

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
                    float sb = 0.0f; /* Q1_0: the block's sum of (float)isum * d_a[g] */
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
                        if (f != F_Q1_0)
                            acc[t] += (float)isum * (dw * A->d[g]);
                        else
                            sb = gi ? lowbit_fmaf((float)isum, A->d[g], sb) : (float)isum * A->d[g];
                    }
                    if (f == F_Q1_0) acc[t] = lowbit_fmaf(dw, sb, acc[t]);
                }
            }
            for (int t = 0; t < nt; t++) y[(b0 + t) * ldy + r - ybase] = acc[t];
        }
    }
}

#if LOWBIT_ARM_I8MM
/* The GEMM with SMMLA (arm-inl.h, mmla16): rows r, r+1 against activations t, t+1 at once, the two
 * rows' blocks unpacked once per tile and paired.  The float part runs per (row, activation) in
 * the reference's order as in rows_kernel, four lanes at a time (same operations, same roundings).
 * A last lone row or activation is paired with itself and its copy's lanes are not stored. */
AI void rows_kernel_mmla(const int f, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                         const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    const int BS = fmt_block(f), BB = fmt_bytes(f), G = fmt_group(f);
    const int GPB = BS / G, RPG = G / 16, NREG = BS / 16;
    if (batch <= 0 || r0 >= r1) return; /* a[0] may not exist */
    const int64_t nb = a[0].n / BS;
    for (int64_t r = r0; r < r1; r += 2) {
        const int two = r + 1 < r1;
        const uint8_t *row0 = (const uint8_t *)w + r * row_bytes;
        const uint8_t *row1 = two ? row0 + row_bytes : row0;
        for (int64_t b0 = 0; b0 < batch; b0 += GEMM_TILE) {
            const int nt = (int)(batch - b0 < GEMM_TILE ? batch - b0 : GEMM_TILE);
            float32x4_t acc[GEMM_TILE / 2]; /* pair p: (r, 2p), (r, 2p+1), (r+1, 2p), (r+1, 2p+1) */
            for (int p = 0; p < (nt + 1) / 2; p++) acc[p] = vdupq_n_f32(0.0f);
            for (int64_t blk = 0; blk < nb; blk++) {
                int8x16_t c0[16], c1[16], wl[16], wh[16];
                const float dw0 = unpack(f, row0 + blk * BB, c0);
                const float dw1 = unpack(f, row1 + blk * BB, c1);
                for (int k = 0; k < NREG; k++) {
                    wl[k] = pair_lo(c0[k], c1[k]);
                    wh[k] = pair_hi(c0[k], c1[k]);
                }
                const float32x4_t dw = vcombine_f32(vdup_n_f32(dw0), vdup_n_f32(dw1));
                for (int t = 0; t < nt; t += 2) {
                    const lowbit_act *A0 = &a[b0 + t], *A1 = t + 1 < nt ? A0 + 1 : A0;
                    const int8_t *q0 = A0->q + blk * BS, *q1 = A1->q + blk * BS;
                    float32x4_t sb = vdupq_n_f32(0.0f); /* Q1_0: the block's sum */
                    for (int gi = 0; gi < GPB; gi++) {
                        int32x4_t vs = vdupq_n_s32(0);
                        for (int k = gi * RPG; k < (gi + 1) * RPG; k++)
                            vs = mmla16(vs, wl[k], wh[k], vld1q_s8(q0 + 16 * k), vld1q_s8(q1 + 16 * k));
                        const int64_t g = blk * GPB + gi;
                        if (fmt_negated(f)) vs = vnegq_s32(vs);
                        if (fmt_offset(f)) {
                            const int32x2_t s = vset_lane_s32(A1->s[g], vdup_n_s32(A0->s[g]), 1);
                            vs = vsubq_s32(vs, vcombine_s32(s, s));
                        }
                        const float32x2_t d = vset_lane_f32(A1->d[g], vdup_n_f32(A0->d[g]), 1);
                        const float32x4_t dd = vcombine_f32(d, d), fs = vcvtq_f32_s32(vs);
                        if (f != F_Q1_0) /* acc += (float)isum * (d_w * d_a[g]) */
                            acc[t / 2] = vaddq_f32(acc[t / 2], vmulq_f32(fs, vmulq_f32(dw, dd)));
                        else
                            sb = gi ? vfmaq_f32(sb, fs, dd) : vmulq_f32(fs, dd);
                    }
                    if (f == F_Q1_0) acc[t / 2] = vfmaq_f32(acc[t / 2], dw, sb);
                }
            }
            for (int t = 0; t < nt; t++) {
                float l[4];
                vst1q_f32(l, acc[t / 2]);
                y[(b0 + t) * ldy + r] = l[t % 2];
                if (two) y[(b0 + t) * ldy + r + 1] = l[2 + t % 2];
            }
        }
    }
}

/* i8mm: the GEMM only.  Its GEMV is dotprod's (one activation would fill half of SMMLA's
 * products, and the decode step is bound by memory, not by the dot). */
#define DEFINE_KERNELS(name, F)                                                                    \
    void VARIANT(gemm_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,            \
                              const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {         \
        rows_kernel_mmla(F, w, row_bytes, r0, r1, a, batch, y, ldy);                               \
    }
#else
#include "q1_lut_arm-inl.h"

/* Q1_0's GEMV is the table lookup (q1_lut_arm-inl.h), every other one rows_kernel */
#define DEFINE_KERNELS(name, F)                                                                    \
    void VARIANT(gemv_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1, \
                                          const lowbit_act *a, float *y) {                         \
        if (F == F_Q1_0)                                                                           \
            q1_gemv_lut(w, row_bytes, r0, r1, a, y);                                               \
        else                                                                                       \
            rows_kernel(F, w, row_bytes, r0, r1, a, 1, y, 0, r0);                                  \
    }                                                                                              \
    void VARIANT(gemm_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1, \
                                          const lowbit_act *a, int64_t batch, float *y,            \
                                          int64_t ldy) {                                           \
        rows_kernel(F, w, row_bytes, r0, r1, a, batch, y, ldy, 0);                                 \
    }
#endif
DEFINE_KERNELS(tq1_0, F_TQ1_0)
DEFINE_KERNELS(tq2_0, F_TQ2_0)
DEFINE_KERNELS(i2_s, F_I2_S)
DEFINE_KERNELS(q1_0, F_Q1_0)
DEFINE_KERNELS(q2_0, F_Q2_0)
DEFINE_KERNELS(pq2_0, F_PQ2_0)
DEFINE_KERNELS(ptq1_0, F_PTQ1_0)
DEFINE_KERNELS(q8_0, F_Q8_0)

#endif /* LOWBIT_FILE_ARM_INL_H */
