/* lowbit_attention's loop with NEON (the AArch64 baseline; attention_groups-inl.h): 16 lanes as
 * four q registers, 4 (row, key) scores a step. */
#include <arm_neon.h>

#include "../ops_attention-inl.h"

#define AI static inline __attribute__((always_inline))
typedef struct {
    float32x4_t v[4]; /* lanes 0-3, 4-7, 8-11, 12-15 */
} v16;
#define V16_LANES(expr)                                                                            \
    do {                                                                                           \
        for (int l = 0; l < 4; l++) r.v[l] = (expr);                                               \
    } while (0)
AI v16 v16_zero(void) {
    v16 r;
    V16_LANES(vdupq_n_f32(0.0f));
    return r;
}
AI v16 v16_set1(float x) {
    v16 r;
    V16_LANES(vdupq_n_f32(x));
    return r;
}
AI v16 v16_load(const float *p) {
    v16 r;
    V16_LANES(vld1q_f32(p + 4 * l));
    return r;
}
AI void v16_store(float *p, v16 x) {
    for (int l = 0; l < 4; l++) vst1q_f32(p + 4 * l, x.v[l]);
}
AI v16 v16_add(v16 a, v16 b) {
    v16 r;
    V16_LANES(vaddq_f32(a.v[l], b.v[l]));
    return r;
}
AI v16 v16_sub(v16 a, v16 b) {
    v16 r;
    V16_LANES(vsubq_f32(a.v[l], b.v[l]));
    return r;
}
AI v16 v16_mul(v16 a, v16 b) {
    v16 r;
    V16_LANES(vmulq_f32(a.v[l], b.v[l]));
    return r;
}
AI v16 v16_max(v16 a, v16 b) {
    v16 r;
    V16_LANES(vmaxq_f32(a.v[l], b.v[l]));
    return r;
}
AI int v16_unordered(v16 a) { /* a lane unequal to itself */
    uint32x4_t eq = vceqq_f32(a.v[0], a.v[0]);
    for (int l = 1; l < 4; l++) eq = vandq_u32(eq, vceqq_f32(a.v[l], a.v[l]));
    return vminvq_u32(eq) == 0;
}
AI float v16_hmax(v16 a) {
    return vmaxvq_f32(vmaxq_f32(vmaxq_f32(a.v[0], a.v[1]), vmaxq_f32(a.v[2], a.v[3])));
}
/* attn_exp on 4 lanes: its operations in its order */
AI float32x4_t exp4(float32x4_t x) {
    x = vreinterpretq_f32_u32(vminq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0xC2AE0000u)));
    const int32x4_t k = vcvtq_s32_f32(vsubq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504f)), vdupq_n_f32(0.5f)));
    const float32x4_t kf = vcvtq_f32_s32(k);
    const float32x4_t r = vsubq_f32(vsubq_f32(x, vmulq_f32(kf, vdupq_n_f32(0.693145752f))),
                                    vmulq_f32(kf, vdupq_n_f32(1.42860677e-6f)));
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f / 120));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f / 24));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f / 6));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(0.5f));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f));
    const float32x4_t two_k = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k, vdupq_n_s32(127)), 23));
    return vmulq_f32(p, two_k);
}
AI v16 v16_exp(v16 x) {
    v16 r;
    V16_LANES(exp4(x.v[l]));
    return r;
}
#undef V16_LANES

#define SLOTS 4
typedef float32x4_t sv;
/* fold16's steps on 4 vectors: + 8 and + 4 on registers, + 2 by 64-bit zips, + 1 pairwise; slot x
 * lands in lane x */
AI int slot_lane(int x) { return x; }
AI sv slots_fold(const v16 a[4]) {
    float32x4_t u[4];
    for (int i = 0; i < 4; i++)
        u[i] = vaddq_f32(vaddq_f32(a[i].v[0], a[i].v[2]), vaddq_f32(a[i].v[1], a[i].v[3]));
    float32x4_t w[2]; /* [x 0, x 1, y 0, y 1] */
    for (int i = 0; i < 2; i++) {
        const float64x2_t x = vreinterpretq_f64_f32(u[2 * i]), y = vreinterpretq_f64_f32(u[2 * i + 1]);
        w[i] = vaddq_f32(vreinterpretq_f32_f64(vzip1q_f64(x, y)), vreinterpretq_f32_f64(vzip2q_f64(x, y)));
    }
    return vpaddq_f32(w[0], w[1]);
}
AI sv sv_mul(sv s, float f) { return vmulq_f32(s, vdupq_n_f32(f)); }
AI void sv_store_run(float *dst, sv s, int lane0, int n) {
    if (n == 4) {
        vst1q_f32(dst, s);
        return;
    }
    float t[4];
    vst1q_f32(t, s);
    for (int i = 0; i < n; i++) dst[i] = t[lane0 + i];
}
#undef AI

#define PV_VECS 1
#define ATTN_ENTRY attention_loop_neon
#include "../attention_groups-inl.h"
