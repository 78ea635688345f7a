/* Baseline AArch64 Advanced SIMD GEMV / GEMM for ggml's Q5_0, Q4_K and Q6_K with A8 activations,
 * equal to the scalar reference (ref/kquant.c) bit for bit: the int32 sums of a weight block are
 * exact and the float combination is the reference's own C expression, block by block (so the
 * compiler contracts it the same way in both files).  The dotprod variant keeps these entries;
 * i8mm has its own GEMMs (kquant_i8mm.c), unpacking the same way (kquant_arm-inl.h).
 *
 * Codes fit int8 (Q5_0 0..31, Q4_K 0..15, Q6_K 0..63 or q - 32), so products are vmull_s8 /
 * vmlal_s8 into int16 (at most 2 products a lane before widening: 2 * 63 * 127 < 32767), widened
 * pairwise to int32 and scaled per sub-block there. */
#include "kquant_arm-inl.h" /* and AI */

/* int32x4 of sums of 4 consecutive products of 16 codes c and 16 activations a */
AI int32x4_t dot16(int8x16_t c, int8x16_t a) {
    int16x8_t p = vmull_s8(vget_low_s8(c), vget_low_s8(a));
    p = vmlal_s8(p, vget_high_s8(c), vget_high_s8(a)); /* lane i: c_i a_i + c_{i+8} a_{i+8} */
    return vpaddlq_s16(p);
}

/* ---- Q5_0 --------------------------------------------------------------------------------- */

static float dot_q5_0(const uint8_t *row, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 32; b++) {
        const lowbit_block_q5_0 *blk = (const lowbit_block_q5_0 *)row + b;
        int8x16_t c[2];
        q5_0_codes(blk, c);
        const int8_t *q = a->q + 32 * b;
        int32_t isum = vaddvq_s32(vaddq_s32(dot16(c[0], vld1q_s8(q)), dot16(c[1], vld1q_s8(q + 16))));
        isum -= 16 * a->s[b];
        acc += (float)isum * (lowbit_fp16_to_fp32(blk->d) * a->d[b]);
    }
    return acc;
}

/* ---- Q4_K --------------------------------------------------------------------------------- */

static float dot_q4_k(const uint8_t *row, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q4_k *blk = (const lowbit_block_q4_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        int32x4_t vi = vdupq_n_s32(0), vm = vi;
        for (int k = 0; k < 8; k++) { /* sub-block k: nibbles (k odd: high) of qs[32(k/2) ..] */
            int sc, m;
            lowbit_q4_k_scale_min(blk->scales, k, &sc, &m);
            int8x16_t c[2];
            q4_k_codes(blk, k, c);
            int8x16_t a0 = vld1q_s8(q + 32 * k), a1 = vld1q_s8(q + 32 * k + 16);
            int32x4_t d = vaddq_s32(dot16(c[0], a0), dot16(c[1], a1));
            int32x4_t s = vpaddlq_s16(vaddq_s16(vpaddlq_s8(a0), vpaddlq_s8(a1)));
            vi = vmlaq_n_s32(vi, d, sc);
            vm = vmlaq_n_s32(vm, s, m);
        }
        const int32_t isum = vaddvq_s32(vi), msum = vaddvq_s32(vm);
        acc += (float)isum * (lowbit_fp16_to_fp32(blk->d) * a->d[b]);
        acc -= (float)msum * (lowbit_fp16_to_fp32(blk->dmin) * a->d[b]);
    }
    return acc;
}

/* ---- Q6_K --------------------------------------------------------------------------------- */

static float dot_q6_k(const uint8_t *row, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q6_k *blk = (const lowbit_block_q6_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        int32x4_t vi = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++)
            for (int half = 0; half < 2; half++) { /* l in [16 half, 16 half + 16) */
                int8x16_t c[4];
                q6_k_codes(blk, h, half, c);
                for (int k = 0; k < 4; k++) { /* weights 128h + 32k + 16half .. +16: sub-block e/16 */
                    const int e = 128 * h + 32 * k + 16 * half;
                    vi = vmlaq_n_s32(vi, dot16(c[k], vld1q_s8(q + e)), blk->scales[e / 16]);
                }
            }
        const int32_t isum = vaddvq_s32(vi);
        acc += (float)isum * (lowbit_fp16_to_fp32(blk->d) * a->d[b]);
    }
    return acc;
}

/* ---- GEMV / GEMM (rows outside, activations inside: a row stays in L1 across the batch) ------- */

#define DEFINE_NEON(name)                                                                          \
    void gemv_##name##_neon(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,      \
                                    const lowbit_act *a, float *y) {                               \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r - r0] = dot_##name((const uint8_t *)w + r * row_bytes, a);                        \
    }                                                                                              \
    void gemm_##name##_neon(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,      \
                                    const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {   \
        for (int64_t r = r0; r < r1; r++)                                                          \
            for (int64_t b = 0; b < batch; b++)                                                    \
                y[b * ldy + r] = dot_##name((const uint8_t *)w + r * row_bytes, &a[b]);           \
    }
DEFINE_NEON(q5_0)
DEFINE_NEON(q4_k)
DEFINE_NEON(q6_k)

