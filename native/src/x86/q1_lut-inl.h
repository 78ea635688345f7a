/* Q1_0 GEMV by table lookup, 32 rows a tile.  A quad is 4 consecutive weights 4m..4m+3, one
 * nibble of a code byte (low nibble: weights 8k..8k+3, high: 8k+4..8k+7).  For every quad of the
 * activation, T_m[x] = sum_t (bit t of x ? q[4m+t] : -q[4m+t]) is an exact int in [-508, 508];
 * a group's isum (2 sum(bit q) - s) is the sum of its 8 quads' T_m[nibble].  T_m + 508 is split
 * into 5-bit halves (lo = v & 31, hi = v >> 5, both <= 31): two 16-byte tables a quad, so one
 * vpshufb looks a nibble up for 32 rows at once (a byte lane a row), and 8 quads of byte sums
 * stay below 256.  Per group: isum + 4064 = lo + 32 hi (vpmaddubsw of the interleaved byte sums,
 * exact in int16), then the reference's float steps (the block's sum of isum * da, then one fused
 * step by dw a block), so results stay bit-identical.
 * The 32 rows' code bytes are transposed in registers (4 rounds of byte unpacks: each 128-bit
 * lane is a 16 x 16 byte transpose of 16 rows, rows 16.. 31 in the high lanes).  Tables are
 * stored 16 bytes a half and broadcast on load, half the cache room of pre-broadcast ones
 * (docs/PERFORMANCE.md#q1-lut). */
#ifndef LOWBIT_Q1_LUT_INL_H
#define LOWBIT_Q1_LUT_INL_H
#include "q1_lut_build-inl.h"

/* acc[v] lane e (128-bit lane h = e / 4, i = e % 4) accumulates row 16 h + 8 (v / 2) + 2 i + v % 2
 * of the 32 rows at p */
AI void q1_lut_tile(const uint8_t *p, int64_t rb, int64_t nb, const uint8_t *tab,
                    const lowbit_act *a, __m256 acc[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), w132 = _mm256_set1_epi16(0x2001);
    const __m256i bias = _mm256_set1_epi16(8 * Q1_LUT_BIAS), ev = _mm256_set1_epi32(1),
                  od = _mm256_set1_epi32(0x10000);
    const char *pf = (const char *)p + LOWBIT_PF_Q8;
    for (int v = 0; v < 4; v++) acc[v] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int64_t o = (int64_t)sizeof(lowbit_block_q1_0) * b;
        if (LOWBIT_PF_Q8) /* the 32 rows are one run of memory, prefetched as Q8_0's */
            for (const char *lim = (const char *)p + 32 * (o + 18) + LOWBIT_PF_Q8; pf < lim; pf += 64)
                _mm_prefetch(pf, _MM_HINT_T0);
        /* one running row pointer (the row offsets as invariants would be 32 spilled registers) */
        __m256i R[16];
        uint16_t dh16[32]; /* the rows' fp16 scales in acc's order: dw[v] lane k is dh16[8 v + k]
                            * (gcc gathers them with vpinsrw: cheaper here than GPR shifts) */
        const uint8_t *pr = p + o;
        const int64_t r16 = 16 * rb;
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            R[i] = _mm256_loadu2_m128i((const __m128i *)(pr + r16 + AT(q1_0, qs)),
                                       (const __m128i *)(pr + AT(q1_0, qs)));
            const int v = 2 * (i / 8) + i % 2, k = (i % 8) / 2;
            dh16[8 * v + k] = ld16(pr + AT(q1_0, d));
            dh16[8 * v + 4 + k] = ld16(pr + r16 + AT(q1_0, d));
            pr += rb;
            __asm__("" : "+r"(pr));
        }
        /* each round moves (register r, byte j) to (2 (r % 8) + j / 8, 2 (j % 8) + r / 8): a
         * rotation of the 8-bit index (r, j); 4 rounds make register k byte k of rows 0.. 15 */
        for (int round = 0; round < 3; round++) {
            __m256i T[16];
            for (int i = 0; i < 8; i++) {
                T[2 * i] = _mm256_unpacklo_epi8(R[i], R[i + 8]);
                T[2 * i + 1] = _mm256_unpackhi_epi8(R[i], R[i + 8]);
            }
            for (int i = 0; i < 16; i++) R[i] = T[i];
        }
        __m256 dw[4]; /* row i's scale is dw[2 (i / 8 % 2) + i % 2] lane 4 (i / 16) + (i % 8) / 2 */
        for (int v = 0; v < 4; v++)
            dw[v] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dh16 + 8 * v)));
        const uint8_t *tb = tab + 32 * 32 * b;
        __m256 S[4]; /* the block's sum of (float) isum * da, rows of acc[v] */
        for (int v = 0; v < 4; v++) S[v] = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            /* the last round for this group's 4 bytes: 2 g, 2 g + 1 (and + 8) hold them */
            const __m256i X[4] = {_mm256_unpacklo_epi8(R[2 * g], R[2 * g + 8]),
                                  _mm256_unpackhi_epi8(R[2 * g], R[2 * g + 8]),
                                  _mm256_unpacklo_epi8(R[2 * g + 1], R[2 * g + 9]),
                                  _mm256_unpackhi_epi8(R[2 * g + 1], R[2 * g + 9])};
            __m256i A = _mm256_setzero_si256(), B = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                const uint8_t *t = tb + 64 * (4 * g + k); /* quads 2 (4 g + k), + 1 */
                const __m256i xl = _mm256_and_si256(X[k], m4);
                const __m256i xh = _mm256_and_si256(_mm256_srli_epi16(X[k], 4), m4);
#define Q1_TAB(off) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(t + (off))))
                A = _mm256_add_epi8(A, _mm256_shuffle_epi8(Q1_TAB(0), xl));
                B = _mm256_add_epi8(B, _mm256_shuffle_epi8(Q1_TAB(16), xl));
                A = _mm256_add_epi8(A, _mm256_shuffle_epi8(Q1_TAB(32), xh));
                B = _mm256_add_epi8(B, _mm256_shuffle_epi8(Q1_TAB(48), xh));
#undef Q1_TAB
            }
            /* isum = lo + 32 hi - 8 * 508 (int16, rows in byte order), then even / odd rows to int32 */
            const __m256i W0 =
                _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_unpacklo_epi8(A, B), w132), bias);
            const __m256i W1 =
                _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_unpackhi_epi8(A, B), w132), bias);
            const __m256i V[4] = {_mm256_madd_epi16(W0, ev), _mm256_madd_epi16(W0, od),
                                  _mm256_madd_epi16(W1, ev), _mm256_madd_epi16(W1, od)};
            const __m256 da = _mm256_set1_ps(a->d[4 * b + g]);
            for (int v = 0; v < 4; v++)
                S[v] = g ? _mm256_fmadd_ps(_mm256_cvtepi32_ps(V[v]), da, S[v])
                         : _mm256_mul_ps(_mm256_cvtepi32_ps(V[v]), da);
        }
        for (int v = 0; v < 4; v++) acc[v] = _mm256_fmadd_ps(dw[v], S[v], acc[v]);
    }
}

/* Tiles of 32 rows; a last one of 12 or more is the 32 ending at r1 (rows before r0 exist in w),
 * fewer go to the 8-row kernel, as does all of a call under 32 rows or without table memory. */
static void q1_gemv_lut(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    q1_lut_cache *c = r1 >= 32 && r1 - r0 >= 12 ? q1_lut_take(a, q1_lut_build) : NULL;
    if (!c) {
        q1_gemv_8rows(w, rb, r0, r1, a, y);
        return;
    }
    for (int64_t r = r0; r < r1; r += 32) {
        if (r1 - r < 12) {
            q1_gemv_8rows(w, rb, r, r1, a, y + r - r0);
            break;
        }
        const int64_t t = r + 32 <= r1 ? r : r1 - 32;
        __m256 acc[4];
        q1_lut_tile((const uint8_t *)w + t * rb, rb, a->n / 128, q1_lut_tables(c), a,
                    acc);
        float v[4][8], out[32];
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(v[i], acc[i]);
        for (int i = 0; i < 4; i++)
            for (int e = 0; e < 8; e++) out[16 * (e / 4) + 8 * (i / 2) + 2 * (e % 4) + i % 2] = v[i][e];
        memcpy(y + r - r0, out + (r - t), sizeof(float) * (size_t)(32 - (r - t)));
    }
    q1_lut_put(c);
}
#endif /* LOWBIT_Q1_LUT_INL_H */
