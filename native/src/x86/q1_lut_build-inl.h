/* The x86 builder of the Q1_0 lookup GEMVs' activation tables (q1_lut-inl.h on 256 bits,
 * q1_lut512-inl.h on 512): q1_lut_cache.h's layout, built with AVX2. */
#ifndef LOWBIT_Q1_LUT_BUILD_INL_H
#define LOWBIT_Q1_LUT_BUILD_INL_H
#include <immintrin.h>

#include "../q1_lut_cache.h"

/* The tables of every quad in q1_lut_cache.h's layout, into tab */
static void q1_lut_build(const lowbit_act *a, uint8_t *tab) {
    const int64_t nq = a->n / 4;
    const __m256i m5 = _mm256_set1_epi16(31), bias = _mm256_set1_epi16(Q1_LUT_BIAS);
    /* entry x of the 16: the sign of q_t is + when bit t of x is set */
    int16_t sg[4][16];
    for (int t = 0; t < 4; t++)
        for (int x = 0; x < 16; x++) sg[t][x] = (int16_t)((x >> t) & 1 ? 1 : -1);
    __m256i S[4];
    for (int t = 0; t < 4; t++) S[t] = _mm256_loadu_si256((const __m256i *)sg[t]);
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0,
                                           2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t m = 0; m < nq; m++) {
        const int8_t *q = a->q + 4 * m;
        __m256i v = bias;
        for (int t = 0; t < 4; t++)
            v = _mm256_add_epi16(v, _mm256_sign_epi16(_mm256_set1_epi16(q[t]), S[t]));
        /* int16 lanes lo | hi << 8; per 128-bit lane h: lo of x = 8h.. 8h+7, then their hi */
        const __m256i lh = _mm256_or_si256(_mm256_and_si256(v, m5),
                                           _mm256_slli_epi16(_mm256_srli_epi16(v, 5), 8));
        const __m256i pk = _mm256_shuffle_epi8(lh, split);
        _mm256_storeu_si256((__m256i *)(tab + 32 * m), _mm256_permute4x64_epi64(pk, 0xd8));
    }
}
#endif /* LOWBIT_Q1_LUT_BUILD_INL_H */
