/* The Walsh-Hadamard kernels with AVX-512 F/DQ (compiled with the avx512 flags): fwht-inl.h over
 * zmm vectors of 16 floats / 8 doubles. */
#include <immintrin.h>

#include "../fwht_kernels.h"

#ifndef FWHT_GMAX
#define FWHT_GMAX 4 /* 32 zmm registers: 16-row mid-pass tiles of one whole-line vector */
#endif
#ifndef FWHT_COLS
#define FWHT_COLS 1 /* one zmm is a whole 64-byte line */
#endif

typedef __m512 vec_f32;
typedef __m512d vec_f64;
#define vld_f32 _mm512_loadu_ps
#define vld_f64 _mm512_loadu_pd
#define vst_f32 _mm512_storeu_ps
#define vst_f64 _mm512_storeu_pd
#define vadd_f32 _mm512_add_ps
#define vadd_f64 _mm512_add_pd
#define vsub_f32 _mm512_sub_ps
#define vsub_f64 _mm512_sub_pd
#define vmul_f32 _mm512_mul_ps
#define vmul_f64 _mm512_mul_pd
#define vset1_f32 _mm512_set1_ps
#define vset1_f64 _mm512_set1_pd

/* Strides 1, 2 (in-lane permutes), 4, 8 (128-bit lane shuffles) inside one zmm. */
static inline __m512 vinreg_f32(__m512 v) {
    v = _mm512_fmadd_ps(v, _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1),
                        _mm512_permute_ps(v, 0xB1));
    v = _mm512_fmadd_ps(v, _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1),
                        _mm512_permute_ps(v, 0x4E));
    v = _mm512_fmadd_ps(v, _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1),
                        _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_fmadd_ps(v, _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1),
                        _mm512_shuffle_f32x4(v, v, 0x4E));
    return v;
}
static inline __m512d vinreg_f64(__m512d v) {
    v = _mm512_fmadd_pd(v, _mm512_setr_pd(1, -1, 1, -1, 1, -1, 1, -1), _mm512_permute_pd(v, 0x55));
    v = _mm512_fmadd_pd(v, _mm512_setr_pd(1, 1, -1, -1, 1, 1, -1, -1),
                        _mm512_shuffle_f64x2(v, v, 0xB1));
    v = _mm512_fmadd_pd(v, _mm512_setr_pd(1, 1, 1, 1, -1, -1, -1, -1),
                        _mm512_shuffle_f64x2(v, v, 0x4E));
    return v;
}

/* The sign check on bit patterns: (bits & ~sign) ^ bits(1.0) is zero exactly for +1 and -1. */
typedef __m512i sign_bits;
static inline sign_bits sign_bits_zero(void) { return _mm512_setzero_si512(); }
static inline sign_bits sign_bits_or(sign_bits a, sign_bits b) { return _mm512_or_si512(a, b); }
static inline int sign_bits_any(sign_bits b) { return _mm512_test_epi32_mask(b, b) != 0; }
static inline sign_bits sign_err_f32(const float *p) {
    return _mm512_xor_si512(_mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi32(0x7fffffff)),
                            _mm512_set1_epi32(0x3f800000));
}
static inline sign_bits sign_err_f64(const double *p) {
    const __m512i absm = _mm512_set1_epi64(0x7fffffffffffffffll);
    return _mm512_xor_si512(_mm512_and_si512(_mm512_loadu_si512(p), absm),
                            _mm512_set1_epi64(0x3ff0000000000000ll));
}

#define FWHT_ISA LOWBIT_ISA_AVX512VNNI
#define FWHT_FILL fwht_avx512
#include "../fwht-inl.h"
