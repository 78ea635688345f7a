/* The decoder ops on AVX-512: lowbit_attention's loop (x86/attention_groups-inl.h; 16 lanes a
 * zmm, 16 (row, key) scores a step, folded in one register), the gated activations of
 * lowbit_act_mul (silu / gelu times up: ops_common.h's loops under this file's flags) and
 * lowbit_rms_norm's row (rms_norm-inl.h).  All are kernel-list entries (role OP). */
#include <immintrin.h>

#include "../ops_attention-inl.h"
#include "../ops_common.h"

typedef __m512 v16;
#define AI static inline __attribute__((always_inline))
AI v16 v16_zero(void) { return _mm512_setzero_ps(); }
AI v16 v16_set1(float x) { return _mm512_set1_ps(x); }
AI v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
AI void v16_store(float *p, v16 x) { _mm512_storeu_ps(p, x); }
AI v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
AI v16 v16_sub(v16 a, v16 b) { return _mm512_sub_ps(a, b); }
AI v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
AI v16 v16_max(v16 a, v16 b) { return _mm512_max_ps(a, b); }
AI int v16_unordered(v16 a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) != 0; }
AI float v16_hmax(v16 a) { return _mm512_reduce_max_ps(a); }

AI v16 v16_exp(v16 x) {
    x = _mm512_castsi512_ps(_mm512_min_epu32(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xC2AE0000u)));
    const __m512i k = _mm512_cvttps_epi32(
        _mm512_sub_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _mm512_set1_ps(0.5f)));
    const __m512 kf = _mm512_cvtepi32_ps(k);
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(0.693145752f))),
                                   _mm512_mul_ps(kf, _mm512_set1_ps(1.42860677e-6f)));
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    const __m512 two_k = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
    return _mm512_mul_ps(p, two_k);
}

#define SLOTS 16
typedef __m512 sv;
/* fold16's steps on 16 vectors; lane 4 k + m of the result is fold16 of a[k + 4 m] */
AI int slot_lane(int x) { return 4 * (x % 4) + x / 4; }
AI sv slots_fold(const v16 a[16]) {
    __m512 t[8], u[4], w[2];
    for (int i = 0; i < 8; i++) /* lanes l + (l + 8): [a l0..7 | b l0..7] */
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* + 4: [a 0..3 | b 0..3 | c 0..3 | d 0..3] */
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* + 2, within each 128-bit block: [x 0, x 1, y 0, y 1] */
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    /* + 1 */
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
}
AI sv sv_mul(sv s, float f) { return _mm512_mul_ps(s, _mm512_set1_ps(f)); }
AI void sv_store_run(float *dst, sv s, int lane0, int n) {
    const __m512i down = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(lane0));
    _mm512_mask_storeu_ps(dst, (__mmask16)((1u << n) - 1), lane0 ? _mm512_permutexvar_ps(down, s) : s);
}

/* the gated activations: ops_common.h's loops, vectorized under this file's flags */
int64_t silu_mul_avx512(const float *gate, const float *up, int64_t n, float *out);
int64_t silu_mul_avx512(const float *gate, const float *up, int64_t n, float *out) {
    return ops_silu_mul(gate, up, n, out);
}
int64_t gelu_mul_avx512(const float *gate, const float *up, int64_t n, float *out);
int64_t gelu_mul_avx512(const float *gate, const float *up, int64_t n, float *out) {
    return ops_gelu_mul(gate, up, n, out);
}

#define RMS_ENTRY rms_norm_avx512
#include "rms_norm-inl.h"
#undef AI

#define PV_VECS 4
#define ATTN_ENTRY attention_loop_avx512
#include "../attention_groups-inl.h"
