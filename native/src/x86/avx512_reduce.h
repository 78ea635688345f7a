/* Transpose-add steps of the AVX-512 kernels' horizontal sums (kernels_avx512vnni.c,
 * q8_avx512vnni.c): lane pairs of x and of y summed and interleaved.  Integer sums: exact in any
 * order.  Include only from files compiled with the AVX-512 flags. */
#ifndef LOWBIT_AVX512_REDUCE_H
#define LOWBIT_AVX512_REDUCE_H

#include <immintrin.h>

static inline __attribute__((always_inline)) __m512i tr32(__m512i x, __m512i y) {
    return _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
}
static inline __attribute__((always_inline)) __m512i tr64(__m512i x, __m512i y) {
    return _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y));
}

#endif /* LOWBIT_AVX512_REDUCE_H */
