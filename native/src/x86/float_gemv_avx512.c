/* F32 / F16 / BF16 GEMV with AVX-512 (float_gemv-inl.h): the 16 lane sums are one register, the
 * first fold its two halves. */
#include <immintrin.h>

#include "../internal.h"

typedef __m512 vec16;
static inline vec16 vec16_zero(void) { return _mm512_setzero_ps(); }
static inline vec16 vec16_loadx(const float *p) { return _mm512_loadu_ps(p); }
static inline vec16 vec16_fmadd(vec16 w, vec16 x, vec16 acc) { return _mm512_fmadd_ps(w, x, acc); }
static inline float vec16_fold(vec16 a) {
    const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

static inline vec16 load_f32(const float *p) { return _mm512_loadu_ps(p); }
static inline vec16 load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline vec16 load_bf16(const uint16_t *p) { /* BF16: the upper half of a float32 */
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

#include "float_gemv-inl.h"

/* The software prefetch distances of the Intel and the AMD twins (float_gemv-inl.h): the four
 * rows' short runs stream at about half the read bandwidth on hardware prefetch alone.  The
 * _l1pf twins (AMD cores with a 48 KB L1) prefetch as far into L1: there the lines come in time
 * and stay until read, where into L2 the stream waited on L2 (docs/PERFORMANCE.md#zen5). */
#define LOWBIT_PF_FLOAT_INTEL 16384
#define LOWBIT_PF_FLOAT_AMD 32768

DEFINE_GEMV(gemv_f32_avx512, float, load_f32, to_f32)
DEFINE_GEMV(gemv_f16_avx512, uint16_t, load_f16, _cvtsh_ss)
DEFINE_GEMV(gemv_bf16_avx512, uint16_t, load_bf16, lowbit_bf16_to_fp32)
DEFINE_GEMV_PF(gemv_f32_avx512_l2pf, float, load_f32, to_f32, LOWBIT_PF_FLOAT_INTEL)
DEFINE_GEMV_PF(gemv_f16_avx512_l2pf, uint16_t, load_f16, _cvtsh_ss, LOWBIT_PF_FLOAT_INTEL)
DEFINE_GEMV_PF(gemv_bf16_avx512_l2pf, uint16_t, load_bf16, lowbit_bf16_to_fp32,
               LOWBIT_PF_FLOAT_INTEL)
DEFINE_GEMV_PF(gemv_f32_avx512_amdpf, float, load_f32, to_f32, LOWBIT_PF_FLOAT_AMD)
DEFINE_GEMV_PF(gemv_f16_avx512_amdpf, uint16_t, load_f16, _cvtsh_ss, LOWBIT_PF_FLOAT_AMD)
DEFINE_GEMV_PF(gemv_bf16_avx512_amdpf, uint16_t, load_bf16, lowbit_bf16_to_fp32, LOWBIT_PF_FLOAT_AMD)
DEFINE_GEMV_PF_HINT(gemv_f32_avx512_l1pf, float, load_f32, to_f32, LOWBIT_PF_FLOAT_AMD, _MM_HINT_T0)
DEFINE_GEMV_PF_HINT(gemv_f16_avx512_l1pf, uint16_t, load_f16, _cvtsh_ss, LOWBIT_PF_FLOAT_AMD,
                    _MM_HINT_T0)
DEFINE_GEMV_PF_HINT(gemv_bf16_avx512_l1pf, uint16_t, load_bf16, lowbit_bf16_to_fp32,
                    LOWBIT_PF_FLOAT_AMD, _MM_HINT_T0)
