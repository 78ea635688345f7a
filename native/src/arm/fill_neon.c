/* Baseline AArch64 Advanced SIMD kernels (no extra -march flags): every quantized GEMV/GEMM with
 * int16 multiply + pairwise widening adds, the A8 activation quantizer and the float GEMVs.
 * The dotprod variant starts from this table and replaces the quantized dots. */
#define LOWBIT_ARM_DOTPROD 0
#include "kernels_arm.h"

/* ---- A8 activation quantizer: bit-exact with lowbit_quantize_act_ref (every rule) ------------ */

/* max|x| over n (a multiple of 8) values; NaN never wins (vmaxnm returns the number) */
static float amax__neon(const float *x, int64_t n) {
    float32x4_t m0 = vdupq_n_f32(0.0f), m1 = m0;
    for (int64_t j = 0; j < n; j += 8) {
        m0 = vmaxnmq_f32(m0, vabsq_f32(vld1q_f32(x + j)));
        m1 = vmaxnmq_f32(m1, vabsq_f32(vld1q_f32(x + j + 4)));
    }
    return vmaxnmvq_f32(vmaxnmq_f32(m0, m1));
}

/* Same arithmetic as the reference, lane by lane: max|x| is exact in any order (vmaxnm ignores
 * NaN like the reference's compare), the scale and its inverse are computed in scalar exactly as
 * there, the clamp sends NaN to -127 (vmaxnm returns the number), and FCVTAS (vcvtaq) rounds half
 * away from zero like roundf, FCVTNS (vcvtnq) half to even like rintf. */
static void quantize_act_a8__neon(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                                  float *d, int32_t *s) {
    if (group % 16) { /* odd groups only come from direct API calls: not the hot path */
        lowbit_quantize_act_ref(x, n, group, rule, q, d, s);
        return;
    }
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    const int whole = rule == LOWBIT_ACT_P2 || rule == LOWBIT_ACT_S8; /* one scale per vector */
    const float vmax = whole ? amax__neon(x, n) : 0.0f;
    for (int64_t g = 0; g < n / group; g++) {
        const float *xg = x + g * group;
        int8_t *qg = q + g * group;
        const float amax = whole ? vmax : amax__neon(xg, group);
        float dg, id;
        if (whole) {
            lowbit_act_vector_scale(rule, amax, &dg, &id);
        } else if (rule == LOWBIT_ACT_Q8_K) {
            float smax = 0.0f; /* the first element with |x| = amax carries the sign */
            for (int64_t j = 0; amax && j < group; j++)
                if (fabsf(xg[j]) == amax) {
                    smax = xg[j];
                    break;
                }
            id = amax ? -127.0f / smax : 0.0f;
            dg = amax ? 1.0f / id : 0.0f;
        } else {
            dg = amax / 127.0f;
            id = (rule == LOWBIT_ACT_Q8_0 ? amax != 0.0f : dg != 0.0f) ? 127.0f / amax : 0.0f;
            if (rule == LOWBIT_ACT_Q8_0) dg = lowbit_fp16_to_fp32(lowbit_fp32_to_fp16(dg));
        }
        const float32x4_t vid = vdupq_n_f32(id);
        int32x4_t sum = vdupq_n_s32(0);
        for (int64_t j = 0; j < group; j += 16) {
            int32x4_t v[4];
            for (int i = 0; i < 4; i++) {
                float32x4_t p = vmulq_f32(vld1q_f32(xg + j + 4 * i), vid);
                p = vminq_f32(vmaxnmq_f32(p, lo), hi);
                v[i] = rule == LOWBIT_ACT_A8 || whole ? vcvtaq_s32_f32(p) : vcvtnq_s32_f32(p);
                sum = vaddq_s32(sum, v[i]);
            }
            const int16x8_t h0 = vcombine_s16(vmovn_s32(v[0]), vmovn_s32(v[1]));
            const int16x8_t h1 = vcombine_s16(vmovn_s32(v[2]), vmovn_s32(v[3]));
            vst1q_s8(qg + j, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
        }
        d[g] = dg;
        s[g] = vaddvq_s32(sum);
    }
}

/* ---- float GEMV (F32 / F16 weights: the tied-embedding LM head) ---------------------------- */

/* Four independent accumulators hide the FMA latency; the tail runs in scalar.  The summation
 * order differs from the reference's sequential loop, so results agree within rounding only. */
static void gemv_f32__neon(const float *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                          float *y) {
    for (int64_t r = r0; r < r1; r++) {
        const float *row = w + r * cols;
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            a0 = vfmaq_f32(a0, vld1q_f32(row + j), vld1q_f32(x + j));
            a1 = vfmaq_f32(a1, vld1q_f32(row + j + 4), vld1q_f32(x + j + 4));
            a2 = vfmaq_f32(a2, vld1q_f32(row + j + 8), vld1q_f32(x + j + 8));
            a3 = vfmaq_f32(a3, vld1q_f32(row + j + 12), vld1q_f32(x + j + 12));
        }
        for (; j + 4 <= cols; j += 4) a0 = vfmaq_f32(a0, vld1q_f32(row + j), vld1q_f32(x + j));
        float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
        for (; j < cols; j++) acc += row[j] * x[j];
        y[r - r0] = acc;
    }
}

/* fp16 -> fp32 by FCVTL (part of baseline AArch64, exact for every finite half incl. subnormals). */
static void gemv_f16__neon(const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                          float *y) {
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = w + r * cols;
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            const float16x8_t h0 = vreinterpretq_f16_u16(vld1q_u16(row + j));
            const float16x8_t h1 = vreinterpretq_f16_u16(vld1q_u16(row + j + 8));
            a0 = vfmaq_f32(a0, vcvt_f32_f16(vget_low_f16(h0)), vld1q_f32(x + j));
            a1 = vfmaq_f32(a1, vcvt_high_f32_f16(h0), vld1q_f32(x + j + 4));
            a2 = vfmaq_f32(a2, vcvt_f32_f16(vget_low_f16(h1)), vld1q_f32(x + j + 8));
            a3 = vfmaq_f32(a3, vcvt_high_f32_f16(h1), vld1q_f32(x + j + 12));
        }
        for (; j + 4 <= cols; j += 4)
            a0 = vfmaq_f32(a0, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(row + j))),
                           vld1q_f32(x + j));
        float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
        for (; j < cols; j++) acc += lowbit_fp16_to_fp32(row[j]) * x[j];
        y[r - r0] = acc;
    }
}

void lowbit_register_kquant_neon(lowbit_kernels *k); /* kquant_neon.c: Q5_0, Q4_K, Q6_K */

void lowbit_fill_kernels_neon(lowbit_kernels *k) {
    fill_quant_kernels(k);
    lowbit_register_kquant_neon(k);
    k->quantize_act = quantize_act_a8__neon;
    k->gemv_f32 = gemv_f32__neon;
    k->gemv_f16 = gemv_f16__neon;
}
