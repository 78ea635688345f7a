/* AVX-512 VNNI + VBMI kernels of Q1_0's rows64 layout (packed.h: code bytes in 64-row tiles, a
 * byte lane a row), bit-exact with lowbit_rows64_gemv_ref: the GEMV by table lookup, and the GEMM,
 * which decodes a task's rows back to the file layout and runs the file layout's GEMM on them.
 *
 * The GEMV is the lookup of q1_lut512-inl.h without its loads, inserts and byte transposes: the
 * layout stores what those produce.  Vector k of a block is byte k of the tile's 64 rows; its low
 * and high nibbles (weights 8k..8k+3, 8k+4..8k+7) look up the quads' tables (q1_lut_cache.h: the
 * 5-bit halves of T_m + 508), four vpermb a byte (the tables hold 4 copies of their 16 bytes, so
 * the index bits 4 and 5 do not matter), byte adds over a group's 4 bytes (8 quads: below 256),
 * then isum = lo + 32 hi - 8 * 508 by vpdpbusd on the interleaved halves and the reference's
 * float step, acc += (float)isum * (dw * da), groups in order (-ffp-contract=off).  The lane
 * order of the layout (lowbit_rows64_row) makes the 4 output vectors rows 0..15, .., 48..63. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))
#include "q1_lut_build-inl.h"

/* the file layout's GEMM (q1_0_avx512vbmi.c) */
lowbit_gemm_sig gemm_q1_0_avx512vbmi;

/* Software prefetch distance into L1 in the code run (the scales' run: an eighth of it); tiles
 * follow each other, so it runs on across them (the hardware prefetchers alone fall behind) */
#ifndef LOWBIT_PF_ROWS64
#define LOWBIT_PF_ROWS64 16384
#endif

/* acc[v] lane i: row 16 v + i of the tile whose codes are p and scales sc (nb blocks) */
AI void rows64_tile(const uint8_t *p, const uint16_t *sc, int64_t nb, const uint8_t *tab,
                    const lowbit_act *a, __m512 acc[4]) {
    const __m512i bias = _mm512_set1_epi32(-8 * Q1_LUT_BIAS);
    const __m512i ev = _mm512_set1_epi32(0x2001), od = _mm512_set1_epi32(0x20010000);
    for (int v = 0; v < 4; v++) acc[v] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb = p + 1024 * b, *tb = tab + 1024 * b;
        if (LOWBIT_PF_ROWS64) {
            for (int i = 0; i < 1024; i += 64)
                _mm_prefetch((const char *)pb + LOWBIT_PF_ROWS64 + i, _MM_HINT_T0);
            for (int i = 0; i < 128; i += 64)
                _mm_prefetch((const char *)(sc + 64 * b) + LOWBIT_PF_ROWS64 / 8 + i, _MM_HINT_T0);
        }
        __m512 dw[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            dw[v] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 64 * b + 16 * v)));
        __m512 P[4][4]; /* (float) isum * (dw * da) of group g, rows of acc[v] */
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m512i A = _mm512_setzero_si512(), B = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i x = _mm512_loadu_si512(pb + 64 * (4 * g + k));
                const __m512i xh = _mm512_srli_epi16(x, 4);
                const uint8_t *t = tb + 64 * (4 * g + k); /* quads 2 (4 g + k), + 1 */
#define Q1_TAB(off) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(t + (off))))
                A = _mm512_add_epi8(A, _mm512_permutexvar_epi8(x, Q1_TAB(0)));
                B = _mm512_add_epi8(B, _mm512_permutexvar_epi8(x, Q1_TAB(16)));
                A = _mm512_add_epi8(A, _mm512_permutexvar_epi8(xh, Q1_TAB(32)));
                B = _mm512_add_epi8(B, _mm512_permutexvar_epi8(xh, Q1_TAB(48)));
#undef Q1_TAB
            }
            /* isum = lo + 32 hi - 8 * 508: vpdpbusd of the interleaved byte sums, one row a
             * dword (even or odd row of each pair), the bias its start */
            const __m512i U0 = _mm512_unpacklo_epi8(A, B), U1 = _mm512_unpackhi_epi8(A, B);
            const __m512i V[4] = {_mm512_dpbusd_epi32(bias, U0, ev), _mm512_dpbusd_epi32(bias, U0, od),
                                  _mm512_dpbusd_epi32(bias, U1, ev), _mm512_dpbusd_epi32(bias, U1, od)};
            const __m512 da = _mm512_set1_ps(a->d[4 * b + g]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) /* the reference's (float) isum * (dw * da) */
                P[g][v] = _mm512_mul_ps(_mm512_cvtepi32_ps(V[v]), _mm512_mul_ps(dw[v], da));
        }
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) /* the spec's order of adds */
            acc[v] = _mm512_add_ps(
                _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[v], P[0][v]), P[1][v]), P[2][v]), P[3][v]);
    }
}

void rows64_gemv_q1_0_avx512vbmi(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                 const lowbit_act *a, float *y) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    q1_lut_cache *c = q1_lut_take(a, q1_lut_build);
    if (!c) { /* no memory for the tables */
        lowbit_rows64_gemv_ref(m, r0, r1, a, y);
        return;
    }
    const int64_t nb = m->nchunks;
    for (int64_t T = r0 / LOWBIT_ROWS64; T * LOWBIT_ROWS64 < r1; T++) {
        const int64_t t0 = T * LOWBIT_ROWS64;
        __m512 acc[4];
        rows64_tile(m->codes + t0 * nb * 16, m->scales + t0 * nb, nb, q1_lut_tables(c), a, acc);
        if (t0 >= r0 && t0 + LOWBIT_ROWS64 <= r1) {
            for (int v = 0; v < 4; v++) _mm512_storeu_ps(y + t0 + 16 * v, acc[v]);
            continue;
        }
        float out[LOWBIT_ROWS64]; /* a tile cut by r0 or r1 */
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(out + 16 * v, acc[v]);
        const int64_t lo = t0 > r0 ? t0 : r0, hi = t0 + LOWBIT_ROWS64 < r1 ? t0 + LOWBIT_ROWS64 : r1;
        memcpy(y + lo, out + (lo - t0), sizeof(float) * (size_t)(hi - lo));
    }
    q1_lut_put(c);
}

/* Rows [T0 * 64, T0 * 64 + n) back to file blocks in dst (rb bytes a row): 4 rounds of byte
 * unpacks take a block's vector k (byte k of every lane) to 128-bit lane h of register i holding
 * the 16 bytes of lane 16 h + i (the inverse of q1_lut512-inl.h's transpose, the same rounds) */
static void rows64_decode(const lowbit_matrix *m, int64_t T0, int64_t n, uint8_t *dst, int64_t rb) {
    const int64_t nb = m->nchunks;
    for (int64_t T = T0; (T - T0) * LOWBIT_ROWS64 < n; T++) {
        const int64_t t0 = T * LOWBIT_ROWS64, base = (T - T0) * LOWBIT_ROWS64;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *pb = m->codes + (t0 * nb + b * LOWBIT_ROWS64) * 16;
            __m512i R[16];
            for (int k = 0; k < 16; k++) R[k] = _mm512_loadu_si512(pb + 64 * k);
            for (int round = 0; round < 4; round++) {
                __m512i U[16];
                for (int i = 0; i < 8; i++) {
                    U[2 * i] = _mm512_unpacklo_epi8(R[i], R[i + 8]);
                    U[2 * i + 1] = _mm512_unpackhi_epi8(R[i], R[i + 8]);
                }
                for (int i = 0; i < 16; i++) R[i] = U[i];
            }
            uint8_t lanes[LOWBIT_ROWS64][16]; /* lanes[e]: the 16 code bytes of lane e */
            for (int i = 0; i < 16; i++) {
                _mm_storeu_si128((__m128i *)lanes[i], _mm512_castsi512_si128(R[i]));
                _mm_storeu_si128((__m128i *)lanes[16 + i], _mm512_extracti32x4_epi32(R[i], 1));
                _mm_storeu_si128((__m128i *)lanes[32 + i], _mm512_extracti32x4_epi32(R[i], 2));
                _mm_storeu_si128((__m128i *)lanes[48 + i], _mm512_extracti32x4_epi32(R[i], 3));
            }
            for (int l = 0; l < LOWBIT_ROWS64 && base + l < n; l++) {
                uint8_t *blk = dst + (base + l) * rb + b * (int64_t)sizeof(lowbit_block_q1_0);
                memcpy(blk + offsetof(lowbit_block_q1_0, d), m->scales + (t0 * nb + b * LOWBIT_ROWS64 + l), 2);
                memcpy(blk + offsetof(lowbit_block_q1_0, qs), lanes[lowbit_rows64_lane(l)], 16);
            }
        }
    }
}

/* The GEMM: a task's tiles decoded into the file layout one at a time (a tile's rows stay in L2
 * for the GEMM that reads them back), the file layout's GEMM on them (its reference if that
 * memory is not there) */
void rows64_gemm_q1_0_avx512vbmi(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                 const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    const int64_t rb = m->nchunks * (int64_t)sizeof(lowbit_block_q1_0);
    uint8_t *rows = (uint8_t *)malloc((size_t)(LOWBIT_ROWS64 * rb));
    if (!rows) {
        lowbit_rows64_gemm_ref(m, r0, r1, a, batch, y, ldy);
        return;
    }
    for (int64_t T = r0 / LOWBIT_ROWS64; T * LOWBIT_ROWS64 < r1; T++) {
        const int64_t base = T * LOWBIT_ROWS64, lo = r0 > base ? r0 : base;
        const int64_t hi = r1 < base + LOWBIT_ROWS64 ? r1 : base + LOWBIT_ROWS64;
        rows64_decode(m, T, hi - base, rows, rb);
        gemm_q1_0_avx512vbmi(rows, rb, lo - base, hi - base, a, batch, y + base, ldy);
    }
    free(rows);
}
