/* F32 / F16 / BF16 GEMV (the tied-embedding LM head) with AVX2 + F16C (float_gemv-inl.h): lanes
 * 0-7 are one register and 8-15 another, so the first fold is one add.  (FMA against a product
 * and a sum: docs/PERFORMANCE.md#float-gemv.) */
#include <immintrin.h>

#include "../internal.h"

typedef struct {
    __m256 lo, hi; /* lanes 0-7, 8-15 */
} vec16;
static inline vec16 vec16_zero(void) { return (vec16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline vec16 vec16_loadx(const float *p) {
    return (vec16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
static inline vec16 vec16_fmadd(vec16 w, vec16 x, vec16 acc) {
    return (vec16){_mm256_fmadd_ps(w.lo, x.lo, acc.lo), _mm256_fmadd_ps(w.hi, x.hi, acc.hi)};
}
/* l + 8 (the two registers), then l + 4, l + 2, l + 1 */
static inline float vec16_fold(vec16 a) {
    const __m256 t8 = _mm256_add_ps(a.lo, a.hi);
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

static inline __m256 load8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 load8_bf16(const uint16_t *p) { /* BF16: the upper half of a float32 */
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline vec16 load_f32(const float *p) { return vec16_loadx(p); }
static inline vec16 load_f16(const uint16_t *p) { return (vec16){load8_f16(p), load8_f16(p + 8)}; }
static inline vec16 load_bf16(const uint16_t *p) {
    return (vec16){load8_bf16(p), load8_bf16(p + 8)};
}

#include "float_gemv-inl.h"

/* The software prefetch distances of the Intel and the AMD twins (float_gemv-inl.h): the four
 * rows' short runs stream at about half the read bandwidth on hardware prefetch alone */
#define LOWBIT_PF_FLOAT_INTEL 16384
#define LOWBIT_PF_FLOAT_AMD 32768

DEFINE_GEMV(gemv_f32_avx2, float, load_f32, to_f32)
DEFINE_GEMV(gemv_f16_avx2, uint16_t, load_f16, _cvtsh_ss)
DEFINE_GEMV(gemv_bf16_avx2, uint16_t, load_bf16, lowbit_bf16_to_fp32)
DEFINE_GEMV_PF(gemv_f32_avx2_l2pf, float, load_f32, to_f32, LOWBIT_PF_FLOAT_INTEL)
DEFINE_GEMV_PF(gemv_f16_avx2_l2pf, uint16_t, load_f16, _cvtsh_ss, LOWBIT_PF_FLOAT_INTEL)
DEFINE_GEMV_PF(gemv_bf16_avx2_l2pf, uint16_t, load_bf16, lowbit_bf16_to_fp32, LOWBIT_PF_FLOAT_INTEL)
DEFINE_GEMV_PF(gemv_f32_avx2_amdpf, float, load_f32, to_f32, LOWBIT_PF_FLOAT_AMD)
DEFINE_GEMV_PF(gemv_f16_avx2_amdpf, uint16_t, load_f16, _cvtsh_ss, LOWBIT_PF_FLOAT_AMD)
DEFINE_GEMV_PF(gemv_bf16_avx2_amdpf, uint16_t, load_bf16, lowbit_bf16_to_fp32, LOWBIT_PF_FLOAT_AMD)
