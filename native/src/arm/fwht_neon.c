/* The Walsh-Hadamard kernels with NEON (the AArch64 baseline): fwht-inl.h over q registers of 4
 * floats / 2 doubles. */
#include <arm_neon.h>

#include "../fwht_kernels.h"

typedef float32x4_t vec_f32;
typedef float64x2_t vec_f64;
#define vld_f32 vld1q_f32
#define vld_f64 vld1q_f64
#define vst_f32 vst1q_f32
#define vst_f64 vst1q_f64
#define vadd_f32 vaddq_f32
#define vadd_f64 vaddq_f64
#define vsub_f32 vsubq_f32
#define vsub_f64 vsubq_f64
#define vmul_f32 vmulq_f32
#define vmul_f64 vmulq_f64
#define vset1_f32 vdupq_n_f32
#define vset1_f64 vdupq_n_f64

/* Strides 1 (vrev64) and 2 (vext by 2) inside a q register: y = partner + v * (+1|-1). */
static inline float32x4_t vinreg_f32(float32x4_t v) {
    static const float s1[4] = {1, -1, 1, -1}, s2[4] = {1, 1, -1, -1};
    v = vfmaq_f32(vrev64q_f32(v), v, vld1q_f32(s1));
    v = vfmaq_f32(vextq_f32(v, v, 2), v, vld1q_f32(s2));
    return v;
}
static inline float64x2_t vinreg_f64(float64x2_t v) {
    static const double s1[2] = {1, -1};
    return vfmaq_f64(vextq_f64(v, v, 1), v, vld1q_f64(s1));
}

/* The sign check on bit patterns: (bits & ~sign) ^ bits(1.0) is zero exactly for +1 and -1. */
typedef uint32x4_t sign_bits;
static inline sign_bits sign_bits_zero(void) { return vdupq_n_u32(0); }
static inline sign_bits sign_bits_or(sign_bits a, sign_bits b) { return vorrq_u32(a, b); }
static inline int sign_bits_any(sign_bits b) { return vmaxvq_u32(b) != 0; }
static inline sign_bits sign_err_f32(const float *p) {
    const uint32x4_t u = vld1q_u32((const uint32_t *)p);
    return veorq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x3f800000u));
}
static inline sign_bits sign_err_f64(const double *p) {
    const uint64x2_t u = vld1q_u64((const uint64_t *)p);
    return vreinterpretq_u32_u64(veorq_u64(vandq_u64(u, vdupq_n_u64(0x7fffffffffffffffull)),
                                           vdupq_n_u64(0x3ff0000000000000ull)));
}

#define FWHT_ISA LOWBIT_ISA_NEON
#define FWHT_FILL fwht_neon
#include "../fwht-inl.h"
