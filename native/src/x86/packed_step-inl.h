/* The packed layout's pieces shared by the 256-bit packed GEMV bodies (packed-inl.h,
 * packed32-inl.h): the layout is 4-row groups, 128-weight chunks, codes then scales (internal.h).
 * The arithmetic contract is in avx2-inl.h, the multiply-accumulate step in dot_step-inl.h. */
#ifndef LOWBIT_PACKED_STEP_INL_H
#define LOWBIT_PACKED_STEP_INL_H
#include "avx2-inl.h"

/* log2 of the scale block (64, 128 or 256): the scale of group g is block (g * G) >> sh */
AI int qk_shift(const lowbit_matrix *m) { return m->qk == 64 ? 6 : m->qk == 128 ? 7 : 8; }

/* fp16 scales of the 4 rows of group rg for activation group g */
AI __m128 packed_dw(const lowbit_matrix *m, int64_t rg, int64_t g, int64_t G, int sh) {
    if (!m->qk) return _mm_set1_ps(1.0f);
    const int64_t b = (g * G) >> sh;
    return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(m->scales + (rg * m->nscales + b) * 4)));
}

AI void pf_tile(const uint8_t *tile) { /* a 4-row chunk tile is two cache lines */
    if (LOWBIT_PF_DIST) {
        _mm_prefetch((const char *)(tile + LOWBIT_PF_DIST), _MM_HINT_T0);
        _mm_prefetch((const char *)(tile + LOWBIT_PF_DIST + 64), _MM_HINT_T0);
    }
}

/* fp16 scales of block b of the 8 rows of row groups rg0 (lanes 0..3) and rg1 (4..7) */
AI __m256 scales8(const lowbit_matrix *m, int64_t rg0, int64_t rg1, int64_t b) {
    const uint16_t *s0 = m->scales + (rg0 * m->nscales + b) * 4;
    const uint16_t *s1 = m->scales + (rg1 * m->nscales + b) * 4;
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)s0),
                                              _mm_loadl_epi64((const __m128i *)s1)));
}

#endif /* LOWBIT_PACKED_STEP_INL_H */
