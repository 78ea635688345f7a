/* The Gated-DeltaNet ops' loops (ops_gdn-inl.h) built with AVX2 + FMA flags (FMA contraction stays
 * off), and the token-by-token delta rule (gdn_delta_rule-inl.h) on 16 lanes as two ymm: lanes 0-7
 * and 8-15.  The scalar bits. */
#include <immintrin.h>

#include "../ops_gdn-inl.h"

typedef struct {
    __m256 lo, hi;
} v16;

static inline v16 v16_zero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline v16 v16_set1(float x) { return (v16){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
static inline v16 v16_load(const float *p) { return (v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline void v16_store(float *p, v16 x) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_storeu_ps(p + 8, x.hi);
}
static inline v16 v16_add(v16 a, v16 b) {
    return (v16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
static inline v16 v16_mul(v16 a, v16 b) {
    return (v16){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
/* fold16: lanes l + (l + 8) (the two registers), then + 4, + 2, + 1. */
static inline float v16_fold(v16 x) {
    const __m256 r8 = _mm256_add_ps(x.lo, x.hi);
    const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
    const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
    return _mm_cvtss_f32(_mm_add_ss(r2, _mm_shuffle_ps(r2, r2, 1)));
}

#define GDN_ENTRY gdn_avx2
#include "gdn_delta_rule-inl.h"
