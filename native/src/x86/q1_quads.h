/* Q1_0's activation quads (q1_0_avx512-inl.h, file-inl.h): a group's 32 bits of a row read as
 * 4 bytes, bit t of byte k is weight 8k + t, so the quad {t, t + 8, t + 16, t + 24} is bit t of
 * every byte; q'[32 G + 4 t + k] = q[32 G + 8 k + t] puts each quad's activation codes side by
 * side for one broadcast dword.  Reordered once per call, for NC columns, into `stack` when it
 * is large enough (LOWBIT_Q1_STACK bytes), else the heap (NULL: no memory).  With AVX-512 BW,
 * the codes of one bit of every byte, which the quads multiply (the includer sets Q1_VBMI). */
#ifndef LOWBIT_Q1_QUADS_H
#define LOWBIT_Q1_QUADS_H
#include <stdlib.h>

#include "../internal.h"

#define LOWBIT_Q1_STACK 16384

static inline int8_t *q1_quads_of(const lowbit_act *const *aq, int NC, int8_t *stack,
                                  const int8_t *qp[4]) {
    const int64_t n = aq[0]->n;
    int8_t *buf = n * NC <= LOWBIT_Q1_STACK ? stack : (int8_t *)malloc((size_t)(n * NC));
    if (!buf) return NULL;
    for (int j = 0; j < NC; j++) {
        for (int64_t g = 0; g < n; g += 32)
            for (int t = 0; t < 8; t++)
                for (int k = 0; k < 4; k++) buf[j * n + g + 4 * t + k] = aq[j]->q[g + 8 * k + t];
        qp[j] = buf + j * n;
    }
    return buf;
}

#ifdef __AVX512BW__
#include <immintrin.h>

/* The codes (2 where set, 0 elsewhere) of bit t of every byte of x; with VBMI, vpermb looks up
 * 2 * bit t of the byte's low 6 bits in T[t] (bits 6 and 7: bits 4 and 5 of x >> 2, x6) */
static inline __attribute__((always_inline)) __m512i q1_codes(__m512i x, __m512i x6, int t, const __m512i T[8]) {
#if Q1_VBMI
    return _mm512_permutexvar_epi8(t < 6 ? x : x6, T[t]);
#else
    (void)x6, (void)T;
    const __mmask64 k = _mm512_test_epi8_mask(x, _mm512_set1_epi8((char)(1 << t)));
    return _mm512_maskz_mov_epi8(k, _mm512_set1_epi8(2));
#endif
}

/* q1_codes' lookup tables (unused without VBMI) */
static void q1_tables(__m512i T[8]) {
    for (int t = 0; t < 8; t++) {
        uint8_t tab[64];
        for (int x = 0; x < 64; x++) tab[x] = (uint8_t)(2 * ((x >> (t < 6 ? t : t - 2)) & 1));
        T[t] = _mm512_loadu_si512(tab);
    }
}
#endif /* __AVX512BW__ */
#endif
