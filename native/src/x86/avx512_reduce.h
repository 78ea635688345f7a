/* Transpose-add steps of the AVX-512 kernels' horizontal sums (packed, q8, group-32 and K-quant
 * kernels): lane pairs of x and of y summed and interleaved.  Integer sums: exact in any
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
/* 128-bit lanes [x0 + x1, y0 + y1, x2 + x3, y2 + y3]: one shuffle, the blends take any pipe */
static inline __attribute__((always_inline)) __m512i tr128(__m512i x, __m512i y) {
    const __m512i b = _mm512_mask_blend_epi32(0xf0f0, y, x); /* [y0 x1 y2 x3] */
    return _mm512_add_epi32(_mm512_mask_blend_epi32(0xf0f0, x, y),
                            _mm512_shuffle_i32x4(b, b, _MM_SHUFFLE(2, 3, 0, 1)));
}
/* 8 vectors -> lanes [lanes 0-7 summed: v0..v7 | lanes 8-15 summed: v0..v7] */
static inline __attribute__((always_inline)) __m512i reduce8(const __m512i *v) {
    const __m512i u0 = tr64(tr32(v[0], v[1]), tr32(v[2], v[3]));
    const __m512i u1 = tr64(tr32(v[4], v[5]), tr32(v[6], v[7]));
    return tr128(u0, u1);
}

#endif /* LOWBIT_AVX512_REDUCE_H */
