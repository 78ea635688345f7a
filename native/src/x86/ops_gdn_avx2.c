/* The Gated-DeltaNet ops' loops (ops_gdn-inl.h) built with AVX2 + FMA flags (FMA contraction stays
 * off), and the token-by-token delta rule written with intrinsics for d a multiple of 16: the
 * operations of gdn_row in their order, GDN_LANES = 16 lanes as two ymm (lanes 0-7, 8-15), folded
 * in gdn_fold's tree, four rows side by side.  The scalar bits. */
#include <immintrin.h>

#include "../ops_gdn-inl.h"

#define GDN_VEC __m256
#define GDN_SET1 _mm256_set1_ps
#define GDN_ENTRY gdn_avx2
#include "gdn_delta_rule-inl.h"

/* gdn_fold: lanes l + (l + 8) (the two registers), then + 4, + 2, + 1. */
static inline float fold16(__m256 lo, __m256 hi) {
    const __m256 r8 = _mm256_add_ps(lo, hi);
    const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
    const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
    return _mm_cvtss_f32(_mm_add_ss(r2, _mm_shuffle_ps(r2, r2, 1)));
}

/* gdn_row on rows s, s + d, .., s + (R - 1) d; prefetch: the rows PF_ROWS ahead too. */
static inline void rows16(float *restrict s, const float *restrict k, const float *restrict q,
                          __m256 alpha, float beta, const float *restrict v, float scale, int64_t d,
                          float *restrict o, int prefetch) {
    __m256 lo[R], hi[R];
    for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
        const __m256 k0 = _mm256_loadu_ps(k + i), k1 = _mm256_loadu_ps(k + i + 8);
        for (int r = 0; r < R; r++) {
            float *p = s + r * d + i;
            if (prefetch) _mm_prefetch((const char *)(p + PF_ROWS * d), _MM_HINT_T0);
            const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(p), alpha);
            const __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(p + 8), alpha);
            _mm256_storeu_ps(p, x0);
            _mm256_storeu_ps(p + 8, x1);
            lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(x0, k0));
            hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(x1, k1));
        }
    }
    __m256 delta[R];
    for (int r = 0; r < R; r++) {
        delta[r] = _mm256_set1_ps(beta * (v[r] - fold16(lo[r], hi[r])));
        lo[r] = hi[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < d; i += 16) {
        const __m256 k0 = _mm256_loadu_ps(k + i), k1 = _mm256_loadu_ps(k + i + 8);
        const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
        for (int r = 0; r < R; r++) {
            float *p = s + r * d + i;
            const __m256 x0 = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_mul_ps(k0, delta[r]));
            const __m256 x1 = _mm256_add_ps(_mm256_loadu_ps(p + 8), _mm256_mul_ps(k1, delta[r]));
            _mm256_storeu_ps(p, x0);
            _mm256_storeu_ps(p + 8, x1);
            lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(x0, q0));
            hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(x1, q1));
        }
    }
    for (int r = 0; r < R; r++) o[r] = fold16(lo[r], hi[r]) * scale;
}
