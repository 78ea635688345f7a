/* The x86 builders of the Q1_0 lookup GEMVs' activation tables (q1_lut-inl.h on 256 bits,
 * q1_lut512-inl.h and the rows64 GEMV on 512): q1_lut_cache.h's layout, built with AVX-512 VNNI
 * where the includer is compiled for it, else with AVX2. */
#ifndef LOWBIT_Q1_LUT_BUILD_INL_H
#define LOWBIT_Q1_LUT_BUILD_INL_H
#include <immintrin.h>

#include "../q1_lut_cache.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
/* AVX-512 VNNI: T_m + 508 of all 16 entries in one vpdpbusd, two quads a 64-byte store.  The
 * codes shifted to unsigned (q + 128) against the entries' signs: the shift's part, 128 times
 * the signs' sum, is a constant of the entry, taken off in the start value.  A8 codes keep
 * every T_m + 508 in [0, 1016]: 10 bits, split into bytes with shifts and one select.  n is
 * whole Q1_0 blocks, so the quads come in pairs. */
static void q1_lut_build(const lowbit_act *a, uint8_t *tab) {
    const int64_t nq = a->n / 4;
    _Alignas(64) int8_t sg[64];
    _Alignas(64) int32_t c0[16];
    for (int x = 0; x < 16; x++) {
        int sum = 0;
        for (int t = 0; t < 4; t++) {
            sg[4 * x + t] = (int8_t)((x >> t) & 1 ? 1 : -1);
            sum += sg[4 * x + t];
        }
        c0[x] = Q1_LUT_BIAS - 128 * sum;
    }
    const __m512i S = _mm512_load_si512(sg), C = _mm512_load_si512(c0);
    const __m512i flip = _mm512_set1_epi8((char)0x80), m5 = _mm512_set1_epi8(31);
    const __m512i low_bytes = _mm512_set1_epi32(0x00ff00ff);
    /* dword x of the packed pair: the low and high halves of quad A's entry x, then quad B's;
     * the tables want each half's 16 entries side by side, quad A first */
#ifdef __AVX512VBMI__
    _Alignas(64) uint8_t perm[64];
    for (int j = 0; j < 64; j++) perm[j] = (uint8_t)(4 * (j % 16) + j / 16);
    const __m512i P = _mm512_load_si512(perm);
#else
    /* bytes to [lo A | hi A | lo B | hi B] in each 128-bit lane, then those dwords in order */
    const __m512i P = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i D = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#endif
    for (int64_t m = 0; m < nq; m += 2) {
        int32_t qa, qb;
        memcpy(&qa, a->q + 4 * m, 4);
        memcpy(&qb, a->q + 4 * m + 4, 4);
        const __m512i va = _mm512_dpbusd_epi32(C, _mm512_xor_si512(_mm512_set1_epi32(qa), flip), S);
        const __m512i vb = _mm512_dpbusd_epi32(C, _mm512_xor_si512(_mm512_set1_epi32(qb), flip), S);
        const __m512i w = _mm512_or_si512(va, _mm512_slli_epi32(vb, 16));
        /* bytes 0, 2: bits 0-4 of each entry; bytes 1, 3 (w << 3): bits 5-9 */
        const __m512i y = _mm512_and_si512(
            _mm512_ternarylogic_epi32(low_bytes, w, _mm512_slli_epi32(w, 3), 0xca), m5);
#ifdef __AVX512VBMI__
        _mm512_storeu_si512(tab + 32 * m, _mm512_permutexvar_epi8(P, y));
#else
        _mm512_storeu_si512(tab + 32 * m, _mm512_permutexvar_epi32(D, _mm512_shuffle_epi8(y, P)));
#endif
    }
}
#else
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
#endif
#endif /* LOWBIT_Q1_LUT_BUILD_INL_H */
