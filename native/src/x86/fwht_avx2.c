/* The Walsh-Hadamard kernels with AVX2 + FMA (compiled with -mavx2 -mfma): fwht-inl.h over ymm
 * vectors of 8 floats / 4 doubles. */
#include <immintrin.h>

#include "../fwht_kernels.h"

#ifndef FWHT_LEAF_f32
#define FWHT_LEAF_f32 12 /* a leaf of half of L1 leaves room for the lines streaming in next */
#endif

typedef __m256 vec_f32;
typedef __m256d vec_f64;
#define vld_f32 _mm256_loadu_ps
#define vld_f64 _mm256_loadu_pd
#define vst_f32 _mm256_storeu_ps
#define vst_f64 _mm256_storeu_pd
#define vadd_f32 _mm256_add_ps
#define vadd_f64 _mm256_add_pd
#define vsub_f32 _mm256_sub_ps
#define vsub_f64 _mm256_sub_pd
#define vmul_f32 _mm256_mul_ps
#define vmul_f64 _mm256_mul_pd
#define vset1_f32 _mm256_set1_ps
#define vset1_f64 _mm256_set1_pd

/* Strides 1, 2, 4 inside a vector: y = v * (+1|-1) + partner, the partner from a lane swap. */
static inline __m256 vinreg_f32(__m256 v) {
    v = _mm256_fmadd_ps(v, _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1), _mm256_permute_ps(v, 0xB1));
    v = _mm256_fmadd_ps(v, _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1), _mm256_permute_ps(v, 0x4E));
    v = _mm256_fmadd_ps(v, _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1),
                        _mm256_permute2f128_ps(v, v, 0x01));
    return v;
}
static inline __m256d vinreg_f64(__m256d v) {
    v = _mm256_fmadd_pd(v, _mm256_setr_pd(1, -1, 1, -1), _mm256_permute_pd(v, 0x5));
    v = _mm256_fmadd_pd(v, _mm256_setr_pd(1, 1, -1, -1), _mm256_permute2f128_pd(v, v, 0x01));
    return v;
}

/* The sign check on bit patterns: (bits & ~sign) ^ bits(1.0) is zero exactly for +1 and -1. */
typedef __m256i sign_bits;
static inline sign_bits sign_bits_zero(void) { return _mm256_setzero_si256(); }
static inline sign_bits sign_bits_or(sign_bits a, sign_bits b) { return _mm256_or_si256(a, b); }
static inline int sign_bits_any(sign_bits b) { return !_mm256_testz_si256(b, b); }
static inline sign_bits sign_err_f32(const float *p) {
    const __m256i u = _mm256_loadu_si256((const __m256i *)p);
    return _mm256_xor_si256(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                            _mm256_set1_epi32(0x3f800000));
}
static inline sign_bits sign_err_f64(const double *p) {
    const __m256i u = _mm256_loadu_si256((const __m256i *)p);
    return _mm256_xor_si256(_mm256_and_si256(u, _mm256_set1_epi64x(0x7fffffffffffffffll)),
                            _mm256_set1_epi64x(0x3ff0000000000000ll));
}

#define FWHT_ISA LOWBIT_ISA_AVX2
#define FWHT_FILL fwht_avx2
#include "../fwht-inl.h"
