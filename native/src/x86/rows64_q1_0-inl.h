/* The 256-bit kernels of Q1_0's rows64 layout (packed.h: code bytes in 64-row tiles, a byte lane
 * a row), the body of rows64_q1_0_avx2.c and rows64_q1_0_avxvnni.c, which differ in the
 * multiply-accumulate step only (dot_step-inl.h): the GEMV by table lookup, bit-exact with
 * lowbit_rows64_gemv_ref, and the GEMM, which decodes a task's tiles back to the file layout and
 * runs the file layout's 256-bit GEMM on them (rows64_decode-inl.h).
 *
 * The GEMV is q1_lut-inl.h's lookup without its loads, inserts and byte transposes: the layout
 * stores what they produce.  A block's vector k (64 bytes: byte k of the tile's rows) is two ymm,
 * lanes 0..31 and 32..63; its low and high nibbles (weights 8k..8k+3, 8k+4..8k+7) look up the
 * quads' tables (q1_lut_cache.h: the 5-bit halves of T_m + 508) by vpshufb, the tables broadcast
 * to both 128-bit lanes and loaded once for both ymm; byte adds over a group's 4 bytes (8 quads:
 * below 256), then isum = lo + 32 hi - 8 * 508 (dot_step: vpmaddubsw + vpmaddwd, or vpdpbusd) and
 * the reference's float steps (the block's sum of (float)isum * da, then acc = fma(dw, sum,
 * acc)).  The layout's lane order (lowbit_rows64_row) makes the interleaved sums of ymm half s,
 * output v, rows 16 v + 8 s .. 16 v + 8 s + 7 in order. */
#ifndef LOWBIT_ROWS64_Q1_0_INL_H
#define LOWBIT_ROWS64_Q1_0_INL_H
#include <string.h>

#include "../internal.h"
#include "dot_step-inl.h"
#include "q1_lut_build-inl.h"
#include "rows64_decode-inl.h"

/* the file layout's GEMM of this variant (file-inl.h) */
lowbit_gemm_sig KN(gemm_q1_0);

/* Software prefetch distance into L1 in the code run (the scales' run: an eighth of it); tiles
 * follow each other, so it runs on across them */
#ifndef LOWBIT_PF_ROWS64Y
#define LOWBIT_PF_ROWS64Y 16384
#endif

/* V[2 u + o]: isum + 0 of the rows of the even (o = 0) / odd (o = 1) byte pairs of the byte sums
 * A (lo halves) and B (hi halves) interleaved, low (u = 0) and high (u = 1) unpack */
AI void r64_isums(__m256i A, __m256i B, __m256i V[4]) {
    const __m256i U[2] = {_mm256_unpacklo_epi8(A, B), _mm256_unpackhi_epi8(A, B)};
#if DOT_INT16 /* lo + 32 hi - 4064 exact in int16, then even / odd words to int32 */
    const __m256i w132 = _mm256_set1_epi16(0x2001), bias = _mm256_set1_epi16(8 * Q1_LUT_BIAS);
    const __m256i ev = _mm256_set1_epi32(1), od = _mm256_set1_epi32(0x10000);
    for (int u = 0; u < 2; u++) {
        const __m256i W = _mm256_sub_epi16(dot_mul(U[u], w132), bias);
        V[2 * u] = _mm256_madd_epi16(W, ev);
        V[2 * u + 1] = _mm256_madd_epi16(W, od);
    }
#else /* one vpdpbusd a row set: bytes (1, 32, 0, 0) or (0, 0, 1, 32), the bias its start */
    const __m256i bias = _mm256_set1_epi32(-8 * Q1_LUT_BIAS);
    const __m256i ev = _mm256_set1_epi32(0x2001), od = _mm256_set1_epi32(0x20010000);
    for (int u = 0; u < 2; u++) {
        V[2 * u] = dot_wide(dot_acc(bias, U[u], ev));
        V[2 * u + 1] = dot_wide(dot_acc(bias, U[u], od));
    }
#endif
}

/* acc[v][s]: rows 16 v + 8 s .. + 7 of the tile whose codes are p and scales sc (nb blocks) */
AI void r64_tile(const uint8_t *p, const uint16_t *sc, int64_t nb, const uint8_t *tab,
                 const lowbit_act *a, __m256 acc[4][2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int v = 0; v < 4; v++) acc[v][0] = acc[v][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb = p + 1024 * b, *tb = tab + 1024 * b;
        const uint16_t *sb = sc + 64 * b;
        __m256 S[4][2]; /* the block's sum of (float) isum * da, rows of acc[v][s] */
        for (int v = 0; v < 4; v++) S[v][0] = S[v][1] = _mm256_setzero_ps();
        if (LOWBIT_PF_ROWS64Y) {
            for (int i = 0; i < 1024; i += 64)
                _mm_prefetch((const char *)pb + LOWBIT_PF_ROWS64Y + i, _MM_HINT_T0);
            for (int i = 0; i < 128; i += 64)
                _mm_prefetch((const char *)sb + LOWBIT_PF_ROWS64Y / 8 + i, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i A[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            __m256i B[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const uint8_t *t = tb + 64 * (4 * g + k); /* quads 2 (4 g + k), + 1 */
#define Q1_TAB(off) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(t + (off))))
                const __m256i T0 = Q1_TAB(0), T1 = Q1_TAB(16), T2 = Q1_TAB(32), T3 = Q1_TAB(48);
#undef Q1_TAB
#pragma GCC unroll 2
                for (int s = 0; s < 2; s++) {
                    const __m256i x = _mm256_loadu_si256((const __m256i *)(pb + 64 * (4 * g + k) + 32 * s));
                    const __m256i xl = _mm256_and_si256(x, m4);
                    const __m256i xh = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
                    A[s] = _mm256_add_epi8(A[s], _mm256_shuffle_epi8(T0, xl));
                    B[s] = _mm256_add_epi8(B[s], _mm256_shuffle_epi8(T1, xl));
                    A[s] = _mm256_add_epi8(A[s], _mm256_shuffle_epi8(T2, xh));
                    B[s] = _mm256_add_epi8(B[s], _mm256_shuffle_epi8(T3, xh));
                    /* keeps gcc from reassociating the adds (all shuffles first, then spills) */
                    __asm__("" : "+x"(A[s]), "+x"(B[s]));
                }
            }
            const __m256 da = _mm256_set1_ps(a->d[4 * b + g]);
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                __m256i V[4];
                r64_isums(A[s], B[s], V);
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++) {
                    const __m256 f = _mm256_cvtepi32_ps(V[v]);
                    S[v][s] = g ? _mm256_fmadd_ps(f, da, S[v][s]) : _mm256_mul_ps(f, da);
                }
            }
        }
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            for (int s = 0; s < 2; s++) {
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16 * v + 8 * s)));
                acc[v][s] = _mm256_fmadd_ps(dw, S[v][s], acc[v][s]);
            }
    }
}

void KN(rows64_gemv_q1_0)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
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
        __m256 acc[4][2];
        r64_tile(m->codes + t0 * nb * 16, m->scales + t0 * nb, nb, q1_lut_tables(c), a, acc);
        if (t0 >= r0 && t0 + LOWBIT_ROWS64 <= r1) {
            for (int v = 0; v < 4; v++)
                for (int s = 0; s < 2; s++) _mm256_storeu_ps(y + t0 + 16 * v + 8 * s, acc[v][s]);
            continue;
        }
        float out[LOWBIT_ROWS64]; /* a tile cut by r0 or r1 */
        for (int v = 0; v < 4; v++)
            for (int s = 0; s < 2; s++) _mm256_storeu_ps(out + 16 * v + 8 * s, acc[v][s]);
        const int64_t lo = t0 > r0 ? t0 : r0, hi = t0 + LOWBIT_ROWS64 < r1 ? t0 + LOWBIT_ROWS64 : r1;
        memcpy(y + lo, out + (lo - t0), sizeof(float) * (size_t)(hi - lo));
    }
    q1_lut_put(c);
}

/* The GEMM: rows64_decode-inl.h's decoding GEMM over this variant's file-layout GEMM */
void KN(rows64_gemm_q1_0)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    rows64_gemm_decoded(m, r0, r1, a, batch, y, ldy, KN(gemm_q1_0));
}
#endif /* LOWBIT_ROWS64_Q1_0_INL_H */
