/* AVX-512 VNNI kernels of the q8rows layout (packed.h: Q8_0 in 16-row sets, a lane a row, codes
 * stored as w + 128): the GEMV and the GEMM, bit-exact with lowbit_q8rows_gemv_ref (and so with
 * the file layout's gemv_q8_0_ref).
 *
 * A set's block is 8 vectors, vector j holding codes 4j..4j+3 of the block of each of the 16 rows:
 * one vpdpbusd each against the broadcast activation quad q[32 b + 4j .. + 3] (the codes are the
 * unsigned operand) adds each row's products in its own lane, so a block ends in one add and the
 * float step -- acc += (float)isum * (dw * d[b]), rounded product then add (-ffp-contract=off) --
 * for 16 rows at once, with no transpose.  The dpbusd sum is sum(w * q) + 128 s[b] (s[b] the
 * block's activation code sum, formats.h): seeding the block's accumulator with -128 s[b] leaves
 * the exact int32 sum (|partial sums| <= 32 * 255 * 128 + 128 * 4096, far inside int32). */
#include <immintrin.h>
#include <string.h>

#include "../internal.h"
#include "sets16-inl.h"

#define AI static inline __attribute__((always_inline))

/* The int sums of block b of a set (c: the block's 512 code bytes): two dpbusd chains of 4 */
AI __m512i block_sum(const uint8_t *c, const lowbit_act *a, int64_t b) {
    const int8_t *q = a->q + 32 * b;
    __m512i P = _mm512_set1_epi32(-128 * a->s[b]), Q = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
        P = _mm512_dpbusd_epi32(P, _mm512_load_si512(c + 64 * j), sets16_quad(q + 4 * j));
        Q = _mm512_dpbusd_epi32(Q, _mm512_load_si512(c + 64 * j + 64), sets16_quad(q + 4 * j + 4));
    }
    return _mm512_add_epi32(P, Q);
}

/* acc += (float)isum * (dw * d[b]) for the 16 rows (h: the block's 16 fp16 scales) */
AI __m512 block_step(__m512 acc, __m512i isum, const uint16_t *h, const lowbit_act *a, int64_t b) {
    const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)h)),
                                    _mm512_set1_ps(a->d[b]));
    return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), sc));
}

/* Every block of set R: two at a time, their sums independent, their float steps in order */
static __m512 set_dot(const lowbit_matrix *m, int64_t R, const lowbit_act *a) {
    const int64_t nb = m->nscales;
    const uint8_t *c = m->codes + R * nb * 512;
    const uint16_t *h = m->scales + R * nb * 16;
    __m512 acc = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, c += 1024, h += 32) {
        const __m512i s0 = block_sum(c, a, b), s1 = block_sum(c + 512, a, b + 1);
        acc = block_step(acc, s0, h, a, b);
        acc = block_step(acc, s1, h + 16, a, b + 1);
    }
    if (b < nb) acc = block_step(acc, block_sum(c, a, b), h, a, b);
    return acc;
}

static void set_step(const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                     const int64_t lim[4], const lowbit_act *a, float *y) {
    (void)ctx;
    sets16_store(m, R[0], set_dot(m, R[0], a), lim[0], lim[1], y);
}

void q8rows_gemv_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    sets16_range(set_step, NULL, m, r0, r1, a, y);
}

/* ---- the GEMM ---------------------------------------------------------------------------------- */

/* NT activations (a[0..NT)) against set R: a block's 8 code vectors loaded once for the NT, one
 * dpbusd chain and one float step each (NT independent chains keep the multipliers busy); y[t]
 * points at activation t's output row. */
AI void set_tile(const int NT, const lowbit_matrix *m, int64_t R, const lowbit_act *a,
                 const int64_t lim[2], float *y, int64_t ldy) {
    const int64_t nb = m->nscales;
    const uint8_t *c = m->codes + R * nb * 512;
    const uint16_t *h = m->scales + R * nb * 16;
    __m512 acc[8];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, c += 512, h += 16) {
        __m512i X[8];
        for (int j = 0; j < 8; j++) X[j] = _mm512_load_si512(c + 64 * j);
        const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)h));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            const int8_t *q = a[t].q + 32 * b;
            __m512i P = _mm512_set1_epi32(-128 * a[t].s[b]);
            for (int j = 0; j < 8; j++) P = _mm512_dpbusd_epi32(P, X[j], sets16_quad(q + 4 * j));
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(a[t].d[b]));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(P), sc));
        }
    }
    for (int t = 0; t < NT; t++) sets16_store(m, R, acc[t], lim[0], lim[1], y + t * ldy);
}

/* Rows [r0, r1) against `batch` activations, a set at a time, 8 activations a pass (the last
 * ones one by one): the codes of a set are read from memory once and from cache after */
void q8rows_gemm_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    if (r1 > m->rows) r1 = m->rows;
    const int64_t lim[2] = {r0, r1};
    for (int64_t R = r0 / 16; R * 16 < r1; R++) {
        int64_t t = 0;
        for (; t + 8 <= batch; t += 8) set_tile(8, m, R, a + t, lim, y + t * ldy, ldy);
        for (; t < batch; t++) set_tile(1, m, R, a + t, lim, y + t * ldy, ldy);
    }
}
