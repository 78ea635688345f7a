/* The Gated-DeltaNet ops' loops (ops_gdn-inl.h) built with AVX-512 flags (FMA contraction stays
 * off), and the token-by-token delta rule (gdn_delta_rule-inl.h) on 16 lanes in one zmm (from the
 * plain C, gcc kept the partial sums on the stack).  The scalar bits. */
#include <immintrin.h>

#include "../ops_gdn-inl.h"

typedef __m512 v16;

static inline v16 v16_zero(void) { return _mm512_setzero_ps(); }
static inline v16 v16_set1(float x) { return _mm512_set1_ps(x); }
static inline v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v16_store(float *p, v16 x) { _mm512_storeu_ps(p, x); }
static inline v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
static inline v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
/* fold16: lanes l + (l + 8), then + 4, + 2, + 1. */
static inline float v16_fold(v16 x) {
    const __m256 r8 = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
    const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
    return _mm_cvtss_f32(_mm_add_ss(r2, _mm_shuffle_ps(r2, r2, 1)));
}

#define GDN_ENTRY gdn_avx512
#include "gdn_delta_rule-inl.h"
