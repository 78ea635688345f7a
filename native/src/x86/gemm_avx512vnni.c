/* AVX-512 VNNI GEMM of the packed layout (the prompt path): y[b][r] for a batch of activation
 * columns.
 *
 * Same plan as gemm_avx2.c, one size up.  The codes of each panel of PANEL rows and block of KB
 * weights are transposed once into an L1 scratch so that one zmm holds, for 16 rows, 4 code bytes
 * of each row (lane = row):
 *
 *   S[chunk][j 0..7][row block rb][row i 0..15][bytes 4j..4j+3 of row i's 32-byte chunk]
 *
 * Bit pair k of those bytes is then "a quad": weights 32k + 4j .. 32k + 4j + 3 of the chunk, one
 * vpsrlw + vpandd away, and vpdpbusd(acc, quad, broadcast of a column's 4 activation codes) adds
 * each row's 4 products into its own int32 lane: no horizontal reduction, no int16 bound
 * (|sum| <= 256 * 3 * 127 per group) and one instruction per 64 MACs (AVX2: vpmaddubsw + vpaddw
 * per 32).  The shift and mask stay in the inner loop rather than in the scratch, which then
 * holds a quarter of the bytes (docs/PERFORMANCE.md#vnni-gemm).
 *
 * Bit-exact with lowbit_packed_gemm_ref: the integer group sums are the same sums reordered, and
 * each (row, column) accumulates acc += (float)(isum - s_g) * (d_w * d_a) group by group from 0,
 * product rounded before the add (no FMA: the library is built with -ffp-contract=off). */
#include <immintrin.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))

#ifndef LOWBIT_GEMM512_KB
#define LOWBIT_GEMM512_KB 256 /* weights per K block (>= the largest group, 256; 512 measured equal) */
#endif
#ifndef LOWBIT_GEMM512_CT
#define LOWBIT_GEMM512_CT 4 /* columns per register tile (<= 6: RB * CT + RB + 2 zmm registers);
                              5 measured equal, 6 spills (Q2_0 and I2_S at half speed) */
#endif
#if LOWBIT_GEMM512_CT < 1 || LOWBIT_GEMM512_CT > 6
#error "LOWBIT_GEMM512_CT: 1 to 6"
#endif
enum {
    RB = 4,            /* 16-row blocks per panel: the 64 rows of a GEMM task (api.c) */
    PANEL = 16 * RB,   /* rows per panel */
    KB = LOWBIT_GEMM512_KB,
    CT = LOWBIT_GEMM512_CT,
    CMAX = 64,         /* columns per pass: the float accumulators (16 KB) live on the stack */
    SCRATCH_BYTES = KB / 128 * 8 * RB * 64, /* a block's transposed codes: S[chunk][8][RB][64] */
};

/* ---- unpack: 16 rows (four packed row groups) x one 128-weight chunk -> 8 vectors --------------
 * X[2h], X[2h+1] = row group h's 128 bytes (rows 4h..4h+3, 8 dwords each).  A 16 x 8 dword
 * transpose gives T[j], lane i = dword j of row i, in three rounds that each pair registers: the
 * rows of a group (vpermt2d), two groups (vpermt2d), the two 8-row halves (vshufi64x2). */
AI void unpack_chunk16(const __m512i X[8], uint8_t *dst /* S[chunk][0][rb] */) {
    /* P[h][s] lane 4jj + r = row 4h + r, dword 4s + jj */
    const __m512i i1[2] = {
        _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27),
        _mm512_setr_epi32(4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31)};
    /* Q[gg][s][t] lane 8u + 4gb + r = row 8gg + 4gb + r, dword 4s + 2t + u
     * (from P[2gg + gb][s] lane 4(2t + u) + r) */
    const __m512i i2[2] = {
        _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23),
        _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31)};
    __m512i P[4][2], Q[2][2][2];
    for (int h = 0; h < 4; h++)
        for (int s = 0; s < 2; s++) P[h][s] = _mm512_permutex2var_epi32(X[2 * h], i1[s], X[2 * h + 1]);
    for (int gg = 0; gg < 2; gg++)
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 2; t++)
                Q[gg][s][t] = _mm512_permutex2var_epi32(P[2 * gg][s], i2[t], P[2 * gg + 1][s]);
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++) {
            uint8_t *d = dst + (size_t)(4 * s + 2 * t) * RB * 64;
            _mm512_store_si512((__m512i *)d, _mm512_shuffle_i64x2(Q[0][s][t], Q[1][s][t], 0x44));
            _mm512_store_si512((__m512i *)(d + RB * 64), _mm512_shuffle_i64x2(Q[0][s][t], Q[1][s][t], 0xee));
        }
}

/* Codes of rows [4 rg0, 4 rg0 + PANEL) x chunks [c0, c0 + nc) into S; row groups from rg0 + nrg
 * on (past the matrix or the caller's range) are zeros, never stored. */
static void unpack_panel(const lowbit_matrix *m, int64_t rg0, int64_t nrg, int64_t c0, int64_t nc,
                         uint8_t *S) {
    for (int64_t c = c0; c < c0 + nc; c++)
        for (int rb = 0; rb < RB; rb++) {
            __m512i X[8];
            for (int h = 0; h < 4; h++) {
                const int64_t rg = rg0 + 4 * rb + h;
                const uint8_t *src = m->codes + (rg * m->nchunks + c) * LOWBIT_PACK_ROWS * 32;
                const int in = rg - rg0 < nrg;
                X[2 * h] = in ? _mm512_load_si512(src) : _mm512_setzero_si512();
                X[2 * h + 1] = in ? _mm512_load_si512(src + 64) : _mm512_setzero_si512();
            }
            unpack_chunk16(X, S + ((c - c0) * 8 * RB + rb) * 64);
        }
}

/* Weight scales of the panel's rows for groups [g0, g0 + ng): dw[g][rb][16]; 1 for I2_S (its
 * per-tensor scale is the caller's), 0 for missing row groups. */
static void panel_scales(const lowbit_matrix *m, int64_t G, int64_t rg0, int64_t nrg, int64_t g0,
                         int64_t ng, float *dw) {
    for (int64_t g = 0; g < ng; g++)
        for (int rb = 0; rb < RB; rb++) {
            int64_t h4[4];
            for (int h = 0; h < 4; h++) {
                const int64_t rg = rg0 + 4 * rb + h;
                if (rg - rg0 >= nrg) {
                    h4[h] = 0;
                } else if (!m->qk) {
                    h4[h] = 0x3c003c003c003c00ll; /* fp16 1.0 */
                } else {
                    const int64_t b = (g0 + g) * G / m->qk;
                    memcpy(&h4[h], m->scales + (rg * m->nscales + b) * 4, 8);
                }
            }
            const __m256i h = _mm256_setr_epi64x(h4[0], h4[1], h4[2], h4[3]);
            _mm512_store_ps(dw + (g * RB + rb) * 16, _mm512_cvtph_ps(h));
        }
}

/* ---- the register tile: the panel's RB row blocks x NC <= CT columns, over one K block ------- */

typedef struct {
    const int8_t *q[CT]; /* column codes at the K block's first weight */
    const int32_t *s[CT];
    const float *d[CT];  /* sums and scales at the K block's first group */
} cols_t;

/* is[rb][c] += the quad x[rb] (16 rows each) times column c's 4 codes at q, for every rb.  In asm
 * because gcc 12 adds into a fresh register and copies it back (two vmovdqa per vpdpbusd in the
 * inner loop); here the accumulators are updated in place. */
AI void col_step(const __m512i x[RB], const int8_t *q, __m512i is[RB][CT], int c) {
    __m512i b;
    __asm__("vpbroadcastd %[q], %[b]\n\t"
            "vpdpbusd %[b], %[x0], %[s0]\n\t"
            "vpdpbusd %[b], %[x1], %[s1]\n\t"
            "vpdpbusd %[b], %[x2], %[s2]\n\t"
            "vpdpbusd %[b], %[x3], %[s3]"
            : [s0] "+v"(is[0][c]), [s1] "+v"(is[1][c]), [s2] "+v"(is[2][c]), [s3] "+v"(is[3][c]),
              [b] "=&v"(b)
            : [x0] "v"(x[0]), [x1] "v"(x[1]), [x2] "v"(x[2]), [x3] "v"(x[3]),
              [q] "m"(*(const int32_t *)q));
}

/* is[rb][c] += quad k of S vectors w[rb] (S[chunk][j], this block's chunk) times the columns'
 * codes at q[c] + off, for NC columns: 4 vpsrlw + vpandd, then NC column steps. */
AI void quad_step(const int NC, const uint8_t *w, const int k, const cols_t *C, int64_t off,
                  __m512i is[RB][CT]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512i x[RB];
    for (int rb = 0; rb < RB; rb++)
        x[rb] = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(w + rb * 64), 2 * k), m3);
    for (int c = 0; c < NC; c++) col_step(x, C->q[c] + off, is, c);
}

/* acc[c][PANEL] += (float)(is - s) * (dw * da) for group g, columns c < NC, in group order */
AI void group_end(const int NC, __m512i is[RB][CT], const float *dw, int64_t g, const cols_t *C,
                  float *acc) {
    for (int c = 0; c < NC; c++) {
        const __m512i s = _mm512_set1_epi32(C->s[c][g]);
        const __m512 da = _mm512_set1_ps(C->d[c][g]);
        for (int rb = 0; rb < RB; rb++) {
            const __m512 sc = _mm512_mul_ps(_mm512_load_ps(dw + (g * RB + rb) * 16), da);
            const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(is[rb][c], s)), sc);
            float *a = acc + c * PANEL + rb * 16;
            _mm512_store_ps(a, _mm512_add_ps(_mm512_load_ps(a), p));
        }
    }
}

AI void zero_sums(const int NC, __m512i is[RB][CT]) {
    for (int rb = 0; rb < RB; rb++)
        for (int c = 0; c < NC; c++) is[rb][c] = _mm512_setzero_si512();
}

/* acc[c][PANEL] += the ng groups (G weights each) of the block for columns c < NC.
 * S: the block's transposed codes; dw[g][rb][16]: the weight scales of group g. */
AI void tile(const int G, const int NC, const uint8_t *S, const float *dw, int64_t ng,
             const cols_t *C, float *acc) {
    __m512i is[RB][CT];
    if (G == 32) { /* group 4c + k: bit pair k of chunk c's vectors */
        for (int64_t c = 0; 4 * c < ng; c++) {
            const uint8_t *w = S + c * 8 * RB * 64;
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                if (4 * c + k >= ng) break; /* a last half chunk: 2 groups */
                zero_sums(NC, is);
                for (int j = 0; j < 8; j++) quad_step(NC, w + j * RB * 64, k, C, 128 * c + 32 * k + 4 * j, is);
                group_end(NC, is, dw, 4 * c + k, C, acc);
            }
        }
    } else { /* group g: chunks [g G / 128, (g + 1) G / 128), every bit pair */
        const int CPG = G / 128;
        for (int64_t g = 0; g < ng; g++) {
            zero_sums(NC, is);
            for (int cc = 0; cc < CPG; cc++) {
                const int64_t c = g * CPG + cc;
                for (int j = 0; j < 8; j++)
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++)
                        quad_step(NC, S + (c * 8 + j) * RB * 64, k, C, 128 * c + 32 * k + 4 * j, is);
            }
            group_end(NC, is, dw, g, C, acc);
        }
    }
}

/* NC as a constant for every column count of a tile (the batch's last tile may be narrower) */
AI void tile_any(const int G, int nc, const uint8_t *S, const float *dw, int64_t ng,
                 const cols_t *C, float *acc) {
    switch (nc) {
#define TILE_CASE(n)                                                                               \
    case n: tile(G, n, S, dw, ng, C, acc); break;
    TILE_CASE(1)
    TILE_CASE(2)
    TILE_CASE(3)
    TILE_CASE(4)
#if LOWBIT_GEMM512_CT >= 5
    TILE_CASE(5)
#endif
#if LOWBIT_GEMM512_CT >= 6
    TILE_CASE(6)
#endif
#undef TILE_CASE
    }
}

#include "gemm_panels-inl.h"

void packed_gemm_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                  int64_t batch, float *y, int64_t ldy) {
    packed_gemm_panels(m, r0, r1, a, batch, y, ldy);
}
