/* The Gated-DeltaNet ops' loops (ops_gdn-inl.h) built with AVX-512 flags (FMA contraction stays
 * off), and the token-by-token delta rule written with intrinsics for d a multiple of 16: the
 * operations of gdn_row in their order, GDN_LANES = 16 lanes in one zmm, folded in gdn_fold's tree,
 * four rows side by side (gcc kept the plain C's partial sums on the stack).  The scalar bits. */
#include <immintrin.h>

#include "../ops_gdn-inl.h"

#define GDN_VEC __m512
#define GDN_SET1 _mm512_set1_ps
#define GDN_ENTRY gdn_avx512
#include "gdn_delta_rule-inl.h"

/* gdn_fold: lanes l + (l + 8), then + 4, + 2, + 1. */
static inline float fold16(__m512 acc) {
    const __m256 r8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
    const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
    return _mm_cvtss_f32(_mm_add_ss(r2, _mm_shuffle_ps(r2, r2, 1)));
}

/* gdn_row on rows s, s + d, .., s + (R - 1) d; prefetch: the rows PF_ROWS ahead too. */
static inline void rows16(float *restrict s, const float *restrict k, const float *restrict q,
                          __m512 alpha, float beta, const float *restrict v, float scale, int64_t d,
                          float *restrict o, int prefetch) {
    __m512 acc[R];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
        const __m512 kb = _mm512_loadu_ps(k + i);
        for (int r = 0; r < R; r++) {
            if (prefetch) _mm_prefetch((const char *)(s + (r + PF_ROWS) * d + i), _MM_HINT_T0);
            const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + r * d + i), alpha);
            _mm512_storeu_ps(s + r * d + i, x);
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(x, kb));
        }
    }
    __m512 delta[R];
    for (int r = 0; r < R; r++) {
        delta[r] = _mm512_set1_ps(beta * (v[r] - fold16(acc[r])));
        acc[r] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < d; i += 16) {
        const __m512 kb = _mm512_loadu_ps(k + i), qb = _mm512_loadu_ps(q + i);
        for (int r = 0; r < R; r++) {
            const __m512 x = _mm512_add_ps(_mm512_loadu_ps(s + r * d + i), _mm512_mul_ps(kb, delta[r]));
            _mm512_storeu_ps(s + r * d + i, x);
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(x, qb));
        }
    }
    for (int r = 0; r < R; r++) o[r] = fold16(acc[r]) * scale;
}
