/* Steps shared by the GEMVs of the 16-row-set layouts (packed.h: dense base-3 and rows16), a lane a
 * row: the broadcast activation quad, a group's float step and the store of a set's rows.  Only
 * for files compiled with the AVX-512 flags. */
#ifndef LOWBIT_X86_SETS16_INL_H
#define LOWBIT_X86_SETS16_INL_H

#include <immintrin.h>
#include <string.h>

#include "../internal.h"

/* The activation quad at q (4 codes) in every lane */
static inline __attribute__((always_inline)) __m512i sets16_quad(const int8_t *q) {
    int32_t v;
    memcpy(&v, q, 4);
    return _mm512_set1_epi32(v);
}

/* acc += (float)(isum - s[g]) * (dw * d[g]) for the 16 rows of set R (lane = row), rounded product
 * then add (-ffp-contract=off): the references' order */
static inline __attribute__((always_inline)) __m512 sets16_float_step(
    const lowbit_matrix *m, int64_t R, const lowbit_act *a, int64_t g, __m512i isum, __m512 acc) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)(m->scales + (R * m->nscales + g) * 16));
    const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(a->d[g]));
    const __m512i s = _mm512_sub_epi32(isum, _mm512_set1_epi32(a->s[g]));
    return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(s), sc));
}

/* y of the rows of set R that are in [lo, hi) and below m->rows */
static inline __attribute__((always_inline)) void sets16_store(const lowbit_matrix *m, int64_t R,
                                                               __m512 v, int64_t lo, int64_t hi,
                                                               float *y) {
    float out[16];
    _mm512_storeu_ps(out, v);
    if (hi > m->rows) hi = m->rows;
    for (int l = 0; l < 16; l++) {
        const int64_t r = R * 16 + l;
        if (r >= lo && r < hi) y[r] = out[l];
    }
}

#endif
