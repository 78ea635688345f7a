/* AVX-512 VNNI + VBMI kernels of Q1_0's rows64 layout (packed.h: code bytes in 64-row tiles, a
 * byte lane a row), bit-exact with lowbit_rows64_gemv_ref: the GEMV by table lookup, the GEMM by
 * q1_rows16's dot products on operands two rounds of unpacks make of the tile's bytes.
 *
 * The GEMV is the lookup of q1_lut512-inl.h without its loads, inserts and byte transposes: the
 * layout stores what those produce.  Vector k of a block is byte k of the tile's 64 rows, and 4
 * of them are a group's input to the step both GEMVs share (q1_lut512_group-inl.h: table
 * lookups, byte sums, isum by vpdpbusd, the block's sum of isum * da); then one fused step by dw
 * a block, as the reference.  The lane order of the layout (lowbit_rows64_row) makes its 4 output
 * vectors rows 0..15, .., 48..63. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))
#include "q1_lut_build-inl.h"
#define Q1_VBMI 1
#include "q1_lut512_group-inl.h"
#include "q1_quads.h"

/* Software prefetch distance into L1 in the code run (the scales' run: an eighth of it); tiles
 * follow each other, so it runs on across them (the hardware prefetchers alone fall behind) */
#ifndef LOWBIT_PF_ROWS64
#define LOWBIT_PF_ROWS64 8192
#endif

/* acc[v] lane i: row 16 v + i of the tile whose codes are p and scales sc (nb blocks) */
AI void rows64_tile(const uint8_t *p, const uint16_t *sc, int64_t nb, const uint8_t *tab,
                    const lowbit_act *a, __m512 acc[4]) {
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
        __m512 S[4]; /* the block's sum of (float) isum * da, rows of acc[v] */
        for (int v = 0; v < 4; v++) S[v] = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i X[4] = {_mm512_loadu_si512(pb + 64 * (4 * g)), _mm512_loadu_si512(pb + 64 * (4 * g + 1)),
                                  _mm512_loadu_si512(pb + 64 * (4 * g + 2)), _mm512_loadu_si512(pb + 64 * (4 * g + 3))};
            q1_lut512_group(X, tb + 256 * g, g, a->d[4 * b + g], S);
        }
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[v] = _mm512_fmadd_ps(dw[v], S[v], acc[v]);
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

/* ---- the GEMM: the rows64 code bytes as q1_rows16's dword-a-row operand ----------------------
 *
 * Bytes 4g..4g+3 of a block (group g) are 4 of the tile's vectors.  Two rounds of unpacks (bytes
 * of V[4g], V[4g+1] and of V[4g+2], V[4g+3], then words of those) give 4 vectors X[q] whose
 * dword i of 128-bit lane h is group g of lane 16 h + 4 q + i: q1_rows16's G[g] (q1_0_avx512-inl.h)
 * with no loads from 16 rows and no transpose.  From there the same dot products: bit t of every
 * byte (q1_codes) against the reordered activation quad t (q1_quads.h), vpdpbusd into exact int32
 * lanes, s[g] subtracted, then the reference's float steps.  The scales follow
 * the lanes by one vpermw per two X; results leave in lane order (rows64_row). */

/* Lane l = 4 h + i of X[q] holds lane 16 h + 4 q + i: row[q][l], its row in the tile; idx[p]: the
 * scales' word index of the 32 lanes of X[2 p], X[2 p + 1] (rows 32 p.. 32 p + 31) */
typedef struct {
    uint8_t row[4][16];
    uint16_t idx[2][32];
} r64_lanes;
static void r64_lanes_init(r64_lanes *R) {
    for (int q = 0; q < 4; q++)
        for (int l = 0; l < 16; l++) {
            const int row = lowbit_rows64_row(16 * (l / 4) + 4 * q + l % 4);
            R->row[q][l] = (uint8_t)row;
            R->idx[q / 2][16 * (q % 2) + l] = (uint16_t)(row - 32 * (q / 2));
        }
}

/* Rows of X[2 p], X[2 p + 1] (32 of the tile's; acc[qq][j] lane l: row r64_row[2 p + qq][l])
 * against NC columns with reordered codes qp[j] and their acts aq[j] */
AI void rows64_pair(const int NC, const int p, const uint8_t *codes, const uint16_t *sc, int64_t nb,
                    const int8_t *const *qp, const lowbit_act *const *aq, const __m512i T[8],
                    const __m512i idx, __m512 acc[2][4]) {
    for (int qq = 0; qq < 2; qq++)
        for (int j = 0; j < NC; j++) acc[qq][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb = codes + 1024 * b;
        const __m512i w = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(sc + 64 * b + 32 * p));
        const __m512 dw[2] = {_mm512_cvtph_ps(_mm512_castsi512_si256(w)),
                              _mm512_cvtph_ps(_mm512_extracti64x4_epi64(w, 1))};
        __m512 S[2][4]; /* the block's sum of (float) isum * da */
        for (int qq = 0; qq < 2; qq++)
            for (int j = 0; j < 4; j++) S[qq][j] = _mm512_setzero_ps();
        for (int g = 0; g < 4; g++) {
            const int64_t gg = 4 * b + g;
            const __m512i v0 = _mm512_loadu_si512(pb + 64 * (4 * g)), v1 = _mm512_loadu_si512(pb + 64 * (4 * g + 1));
            const __m512i v2 = _mm512_loadu_si512(pb + 64 * (4 * g + 2)), v3 = _mm512_loadu_si512(pb + 64 * (4 * g + 3));
            const __m512i L = p ? _mm512_unpackhi_epi8(v0, v1) : _mm512_unpacklo_epi8(v0, v1);
            const __m512i M = p ? _mm512_unpackhi_epi8(v2, v3) : _mm512_unpacklo_epi8(v2, v3);
            const __m512i X[2] = {_mm512_unpacklo_epi16(L, M), _mm512_unpackhi_epi16(L, M)};
            const __m512i X6[2] = {_mm512_srli_epi16(X[0], 2), _mm512_srli_epi16(X[1], 2)};
            __m512i s[2][4];
            for (int qq = 0; qq < 2; qq++)
                for (int j = 0; j < NC; j++) s[qq][j] = _mm512_setzero_si512();
            for (int t = 0; t < 8; t++)
                for (int qq = 0; qq < 2; qq++) {
                    const __m512i c = q1_codes(X[qq], X6[qq], t, T);
                    for (int j = 0; j < NC; j++) {
                        int32_t v;
                        memcpy(&v, qp[j] + 32 * gg + 4 * t, 4);
                        s[qq][j] = _mm512_dpbusd_epi32(s[qq][j], c, _mm512_set1_epi32(v));
                    }
                }
            for (int j = 0; j < NC; j++) {
                const __m512i sj = _mm512_set1_epi32(aq[j]->s[gg]);
                const __m512 da = _mm512_set1_ps(aq[j]->d[gg]);
                for (int qq = 0; qq < 2; qq++) { /* the reference's block sum of (float) isum * da */
                    const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[qq][j], sj));
                    S[qq][j] = g ? _mm512_fmadd_ps(f, da, S[qq][j]) : _mm512_mul_ps(f, da);
                }
            }
        }
        for (int qq = 0; qq < 2; qq++)
            for (int j = 0; j < NC; j++) acc[qq][j] = _mm512_fmadd_ps(dw[qq], S[qq][j], acc[qq][j]);
    }
}

/* Columns outermost, 4 at a time (as the file layout's GEMM); per 4 columns, a tile's rows in two
 * passes of 32 (its codes stay in L1 or L2 for the second) */
void rows64_gemm_q1_0_avx512vbmi(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                 const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    r64_lanes R;
    r64_lanes_init(&R);
    const __m512i idx[2] = {_mm512_loadu_si512(R.idx[0]), _mm512_loadu_si512(R.idx[1])};
    const int64_t nb = m->nchunks;
    int8_t stack[LOWBIT_Q1_STACK];
    __m512i T[8];
    q1_tables(T);
    for (int64_t j = 0; j < batch; j += 4) {
        const int64_t nc = batch - j < 4 ? batch - j : 4;
        const lowbit_act *aq[4];
        for (int jj = 0; jj < nc; jj++) aq[jj] = &a[j + jj];
        const int8_t *qp[4];
        int8_t *buf = q1_quads_of(aq, (int)nc, stack, qp);
        if (!buf) { /* no memory for the reordered codes */
            lowbit_rows64_gemm_ref(m, r0, r1, aq[0], nc, y + j * ldy, ldy);
            continue;
        }
        for (int64_t T0 = r0 / LOWBIT_ROWS64; T0 * LOWBIT_ROWS64 < r1; T0++) {
            const int64_t t0 = T0 * LOWBIT_ROWS64;
            for (int p = 0; p < 2; p++) {
                __m512 acc[2][4];
                const uint8_t *codes = m->codes + t0 * nb * 16;
                const uint16_t *sc = m->scales + t0 * nb;
                switch (nc) { /* the NC of a tail's width: no column computed twice */
                case 1: rows64_pair(1, p, codes, sc, nb, qp, aq, T, idx[p], acc); break;
                case 2: rows64_pair(2, p, codes, sc, nb, qp, aq, T, idx[p], acc); break;
                case 3: rows64_pair(3, p, codes, sc, nb, qp, aq, T, idx[p], acc); break;
                default: rows64_pair(4, p, codes, sc, nb, qp, aq, T, idx[p], acc); break;
                }
                for (int qq = 0; qq < 2; qq++)
                    for (int jj = 0; jj < nc; jj++) {
                        float out[16];
                        _mm512_storeu_ps(out, acc[qq][jj]);
                        float *yj = y + (j + jj) * ldy + t0;
                        for (int l = 0; l < 16; l++) {
                            const int64_t row = R.row[2 * p + qq][l];
                            if (t0 + row >= r0 && t0 + row < r1) yj[row] = out[l];
                        }
                    }
            }
        }
        if (buf != stack) free(buf);
    }
}
