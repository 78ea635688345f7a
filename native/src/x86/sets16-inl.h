/* Steps shared by the kernels of the 16-row-set layouts (packed.h: dense base-3, rows16, q8rows), a
 * lane a row: the broadcast activation quad, a group's float step, the store of a set's rows, and the
 * walks of a range and of a pair of ranges over the sets.  Only for files compiled with the
 * AVX-512 flags. */
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

/* One step of a kernel over row sets R[0..NS): its rows in [lim[0], lim[1]) for set 0 and in
 * [lim[2], lim[3]) for set 1 (NS 2) are written, none at or past m->rows; ctx: the kernel's own
 * per-call state (tables, chosen instances). */
typedef void sets16_step_fn(const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                            const int64_t lim[4], const lowbit_act *a, float *y);
/* Rows [r0, r1) of one range (r0 any row), the same ctx */
typedef void sets16_range_fn(const void *ctx, const lowbit_matrix *m, int64_t r0, int64_t r1,
                             const lowbit_act *a, float *y);

/* The walks are always inlined and every caller passes its own static functions: each step and
 * range is a direct call the compiler sees (or inlines). */

/* Rows [r0, r1) a set at a time, through one (NS 1) */
static inline __attribute__((always_inline)) void sets16_range(sets16_step_fn *one,
                                                               const void *ctx,
                                                               const lowbit_matrix *m, int64_t r0,
                                                               int64_t r1, const lowbit_act *a,
                                                               float *y) {
    if (r1 > m->rows) r1 = m->rows;
    const int64_t lim[4] = {r0, r1, r0, r1};
    for (int64_t R = r0 / 16; R * 16 < r1; R++) {
        const int64_t Rs[2] = {R, R};
        one(ctx, m, Rs, lim, a, y);
    }
}

/* The pair role (kernel_table.h): set k of range A beside set k of range B, far apart, through
 * two (NS 2), two runs of memory side by side; then A's rows past B's sets through range.  Ranges
 * that do not start on a set, or A shorter than B, go through range one after the other. */
static inline __attribute__((always_inline)) void sets16_pair(
    sets16_step_fn *two, sets16_range_fn *range, const void *ctx, const lowbit_matrix *m,
    int64_t a0, int64_t a1, int64_t b0, int64_t b1, const lowbit_act *a, float *y) {
    if (a0 % 16 || b0 % 16 || a1 - a0 < b1 - b0) {
        range(ctx, m, a0, a1, a, y);
        range(ctx, m, b0, b1, a, y);
        return;
    }
    const int64_t npair = (b1 - b0 + 15) / 16, lim[4] = {a0, a1, b0, b1};
    for (int64_t k = 0; k < npair; k++) {
        const int64_t Rs[2] = {a0 / 16 + k, b0 / 16 + k};
        two(ctx, m, Rs, lim, a, y);
    }
    if (a0 + 16 * npair < a1) range(ctx, m, a0 + 16 * npair, a1, a, y);
}

#endif
