/* Baseline AArch64 Advanced SIMD kernels (no extra -march flags): every quantized GEMV/GEMM with
 * int16 multiply + pairwise widening adds, the A8 activation quantizer and the float GEMVs.
 * The dotprod variant has its own quantized dots and falls back to these for the rest. */
#define LOWBIT_ARM_DOTPROD 0
#include "arm-inl.h"
#include "file_arm-inl.h"
#include "packed_arm-inl.h"

/* ---- A8 activation quantizer: bit-exact with lowbit_quantize_act_ref (every rule) ------------ */

/* max|x| over n (a multiple of 8) values; NaN never wins (vmaxnm returns the number) */
static float amax_neon(const float *x, int64_t n) {
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
void quantize_act_neon(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                                  float *d, int32_t *s) {
    if (group % 16) { /* odd groups only come from direct API calls: not the hot path */
        lowbit_quantize_act_ref(x, n, group, rule, q, d, s);
        return;
    }
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    const int whole = rule == LOWBIT_RULE_P2 || rule == LOWBIT_RULE_S8; /* one scale per vector */
    const float vmax = whole ? amax_neon(x, n) : 0.0f;
    for (int64_t g = 0; g < n / group; g++) {
        const float *xg = x + g * group;
        int8_t *qg = q + g * group;
        const float amax = whole ? vmax : amax_neon(xg, group);
        float dg, id;
        if (whole) {
            lowbit_act_vector_scale(rule, amax, &dg, &id);
        } else if (rule == LOWBIT_RULE_Q8_K) {
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
            id = (rule == LOWBIT_RULE_Q8_0 ? amax != 0.0f : dg != 0.0f) ? 127.0f / amax : 0.0f;
            if (rule == LOWBIT_RULE_Q8_0) dg = lowbit_fp16_to_fp32(lowbit_fp32_to_fp16(dg));
        }
        const float32x4_t vid = vdupq_n_f32(id);
        int32x4_t sum = vdupq_n_s32(0);
        for (int64_t j = 0; j < group; j += 16) {
            int32x4_t v[4];
            for (int i = 0; i < 4; i++) {
                float32x4_t p = vmulq_f32(vld1q_f32(xg + j + 4 * i), vid);
                p = vminq_f32(vmaxnmq_f32(p, lo), hi);
                v[i] = rule == LOWBIT_RULE_A8 || whole ? vcvtaq_s32_f32(p) : vcvtnq_s32_f32(p);
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

/* ---- float GEMV (F32 / F16 / BF16 weights: the tied-embedding LM head) ---------------------------- */

/* In the reference's order (ref/dot.c): the 16 fused lane sums are four registers (lanes 0-3,
 * 4-7, 8-11, 12-15, vfma), folded l + 8 (registers 0 + 2, 1 + 3), l + 4, l + 2, l + 1, then the
 * last cols % 16 products fused in order.  fp16 -> fp32 by FCVTL (baseline AArch64, exact for
 * every finite half incl. subnormals). */
static inline float32x4_t load4_f32(const float *p) { return vld1q_f32(p); }
static inline float32x4_t load4_f16(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
static inline float32x4_t load4_bf16(const uint16_t *p) { /* BF16: a float32's upper half */
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
static inline float f32_value(float v) { return v; }

static inline float fold16_neon(const float32x4_t a[4]) {
    const float32x4_t t4 = vaddq_f32(vaddq_f32(a[0], a[2]), vaddq_f32(a[1], a[3]));
    const float32x2_t t2 = vadd_f32(vget_low_f32(t4), vget_high_f32(t4));
    return vget_lane_f32(t2, 0) + vget_lane_f32(t2, 1);
}

#define DEFINE_FLOAT_GEMV_NEON(name, T, LOAD4, TOF)                                                \
    void name(const T *w, int64_t cols, int64_t r0, int64_t r1, const float *x, float *y) { \
        const int64_t c16 = cols & ~(int64_t)15;                                                   \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const T *row = w + r * cols;                                                           \
            float32x4_t a[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),           \
                                vdupq_n_f32(0.0f)};                                                \
            for (int64_t j = 0; j < c16; j += 16)                                                  \
                for (int i = 0; i < 4; i++)                                                        \
                    a[i] = vfmaq_f32(a[i], LOAD4(row + j + 4 * i), vld1q_f32(x + j + 4 * i)); \
            float s = fold16_neon(a);                                                             \
            for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[j]), x[j], s);                          \
            y[r - r0] = s;                                                                         \
        }                                                                                          \
    }
DEFINE_FLOAT_GEMV_NEON(gemv_f32_neon, float, load4_f32, f32_value)
DEFINE_FLOAT_GEMV_NEON(gemv_f16_neon, uint16_t, load4_f16, lowbit_fp16_to_fp32)
DEFINE_FLOAT_GEMV_NEON(gemv_bf16_neon, uint16_t, load4_bf16, lowbit_bf16_to_fp32)

