/* AVX-512 VNNI kernels of the q8rows layout (packed.h: Q8_0 in 16-row sets, a lane a row, codes
 * stored as w + 128): the GEMV, bit-exact with lowbit_q8rows_gemv_ref (and so with the file
 * layout's gemv_q8_0_ref), and the GEMM, which turns a task's rows back into the file layout and
 * runs the file layout's AVX-512 GEMM on them.
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
#include "../platform.h" /* lowbit_alloc_pages */
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

void gemm_q8_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy);

/* Rows [r0, r1) in the file layout, row r0 first (dst: rows of rb bytes) */
static void decode_rows(const lowbit_matrix *m, int64_t r0, int64_t r1, uint8_t *dst, int64_t rb) {
    const int64_t nb = m->nscales;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t R = r0 / 16; R * 16 < r1; R++) {
        const uint8_t *src = m->codes + R * nb * 512;
        const uint16_t *h = m->scales + R * nb * 16;
        for (int64_t b = 0; b < nb; b++, src += 512, h += 16) {
            __m512i tile[4][2];
            sets16_rows(src, tile);
            for (int l = 0; l < 16; l++) {
                const int64_t r = 16 * R + l;
                if (r < r0 || r >= r1) continue;
                const __m512i t = tile[l / 4][l % 4 / 2];
                const __m256i v = l % 2 ? _mm512_extracti64x4_epi64(t, 1) : _mm512_castsi512_si256(t);
                lowbit_block_q8_0 *blk = (lowbit_block_q8_0 *)(dst + (r - r0) * rb) + b;
                blk->d = h[l];
                _mm256_storeu_si256((__m256i *)blk->qs, _mm256_xor_si256(v, flip));
            }
        }
    }
}

void q8rows_gemm_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    const int64_t rb = m->nscales * (int64_t)sizeof(lowbit_block_q8_0);
    const size_t bytes = (size_t)((r1 - r0) * rb);
    uint8_t *scratch = (uint8_t *)lowbit_alloc_pages(bytes);
    if (!scratch) {
        lowbit_q8rows_gemm_ref(m, r0, r1, a, batch, y, ldy);
        return;
    }
    decode_rows(m, r0, r1, scratch, rb);
    gemm_q8_0_avx512vnni(scratch, rb, 0, r1 - r0, a, batch, y + r0, ldy);
    lowbit_free_pages(scratch, bytes);
}
