/* Q1_0 GEMV by table lookup on 512 bits, 64 rows a tile: q1_lut-inl.h's scheme (the same tables,
 * q1_lut_cache.h) with a 128-bit lane per 16 rows.  Each 16-byte table half is broadcast to the
 * 4 lanes, one vpshufb looks a nibble up for 64 rows, and the in-lane byte transpose, the 5-bit
 * half sums and the reference's float step are q1_lut-inl.h's, four lanes at once (the group's
 * step shared with the rows64 GEMV: q1_lut512_group-inl.h).  Needs
 * AVX-512 BW; the includer defines AI, ld16, Q1B, Q1D, Q1QS and a 16-row fallback
 * q1_gemv_16rows. */
#ifndef LOWBIT_Q1_LUT512_INL_H
#define LOWBIT_Q1_LUT512_INL_H
#include "q1_lut_build-inl.h"
#include "q1_lut512_group-inl.h"

/* L2 prefetch distance of the 64-row run.  A tile reads 64 rows side by side, each only a few
 * lines long per tile: the hardware prefetchers miss that pattern on matrices far larger than
 * L3, and L1 (T0) prefetching this far ahead would evict the tile and the tables. */
#ifndef LOWBIT_PF_Q1_LUT512
#define LOWBIT_PF_Q1_LUT512 65536
#endif

/* acc[v] lane e (128-bit lane h = e / 4, i = e % 4) accumulates row 16 h + 8 (v / 2) + 2 i + v % 2
 * of the 64 rows at p */
AI void q1_lut_tile64(const uint8_t *p, int64_t rb, int64_t nb, const uint8_t *tab,
                      const lowbit_act *a, __m512 acc[4]) {
    const char *pf = (const char *)p + LOWBIT_PF_Q1_LUT512;
    for (int v = 0; v < 4; v++) acc[v] = _mm512_setzero_ps();
    const int64_t r16 = 16 * rb, r48 = 48 * rb;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t o = Q1B * b;
        if (LOWBIT_PF_Q1_LUT512) /* the 64 rows are one run of memory, prefetched as one */
            for (const char *lim = (const char *)p + 64 * (o + Q1B) + LOWBIT_PF_Q1_LUT512; pf < lim;
                 pf += 64)
                _mm_prefetch(pf, _MM_HINT_T1);
        __m512i R[16]; /* lane h of R[i]: the code bytes of row 16 h + i */
        uint16_t dh16[64]; /* the rows' fp16 scales in acc's order: dw[v] lane e is dh16[16 v + e] */
        const uint8_t *pr = p + o;
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            /* rows i, 16 + i | 32 + i, 48 + i as two 256-bit halves (fewer shuffle-pipe inserts
             * than four 128-bit ones) */
            const __m256i y0 = _mm256_loadu2_m128i((const __m128i *)(pr + r16 + Q1QS),
                                                   (const __m128i *)(pr + Q1QS));
            const __m256i y1 = _mm256_loadu2_m128i((const __m128i *)(pr + r48 + Q1QS),
                                                   (const __m128i *)(pr + 2 * r16 + Q1QS));
            const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1);
            R[i] = x;
            const int v = 2 * (i / 8) + i % 2, k = (i % 8) / 2;
            volatile uint16_t *dv = dh16; /* plain stores: gcc's vpinsrw chains cost more */
            dv[16 * v + k] = (uint16_t)ld16(pr + Q1D);
            dv[16 * v + 4 + k] = (uint16_t)ld16(pr + r16 + Q1D);
            dv[16 * v + 8 + k] = (uint16_t)ld16(pr + 2 * r16 + Q1D);
            dv[16 * v + 12 + k] = (uint16_t)ld16(pr + r48 + Q1D);
            pr += rb;
            __asm__("" : "+r"(pr));
        }
        /* q1_lut-inl.h's rounds: register k ends up byte k of each lane's 16 rows */
        for (int round = 0; round < 3; round++) {
            __m512i T[16];
            for (int i = 0; i < 8; i++) {
                T[2 * i] = _mm512_unpacklo_epi8(R[i], R[i + 8]);
                T[2 * i + 1] = _mm512_unpackhi_epi8(R[i], R[i + 8]);
            }
            for (int i = 0; i < 16; i++) R[i] = T[i];
        }
        __m512 dw[4];
        for (int v = 0; v < 4; v++)
            dw[v] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(dh16 + 16 * v)));
        const uint8_t *tb = tab + 32 * 32 * b;
        __m512 S[4]; /* the block's sum of (float) isum * da, rows of acc[v] */
        for (int v = 0; v < 4; v++) S[v] = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i X[4] = {_mm512_unpacklo_epi8(R[2 * g], R[2 * g + 8]),
                                  _mm512_unpackhi_epi8(R[2 * g], R[2 * g + 8]),
                                  _mm512_unpacklo_epi8(R[2 * g + 1], R[2 * g + 9]),
                                  _mm512_unpackhi_epi8(R[2 * g + 1], R[2 * g + 9])};
            q1_lut512_group(X, tb + 256 * g, g, a->d[4 * b + g], S);
        }
        for (int v = 0; v < 4; v++) acc[v] = _mm512_fmadd_ps(dw[v], S[v], acc[v]);
    }
}

/* Tiles of 64 rows; a last one of 16 or more is the 64 ending at r1 (rows before r0 exist in w),
 * fewer go to the 16-row kernel, as does all of a call under 64 rows or without table memory. */
static void q1_gemv_lut512(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    q1_lut_cache *c = r1 >= 64 && r1 - r0 >= 16 ? q1_lut_take(a, q1_lut_build) : NULL;
    if (!c) {
        q1_gemv_16rows(w, rb, r0, r1, a, y);
        return;
    }
    for (int64_t r = r0; r < r1; r += 64) {
        if (r1 - r < 16) {
            q1_gemv_16rows(w, rb, r, r1, a, y + r - r0);
            break;
        }
        const int64_t t = r + 64 <= r1 ? r : r1 - 64;
        __m512 acc[4];
        q1_lut_tile64((const uint8_t *)w + t * rb, rb, a->n / 128, q1_lut_tables(c), a, acc);
        float v[4][16], out[64];
        for (int i = 0; i < 4; i++) _mm512_storeu_ps(v[i], acc[i]);
        for (int i = 0; i < 4; i++)
            for (int e = 0; e < 16; e++)
                out[16 * (e / 4) + 8 * (i / 2) + 2 * (e % 4) + i % 2] = v[i][e];
        memcpy(y + r - r0, out + (r - t), sizeof(float) * (size_t)(64 - (r - t)));
    }
    q1_lut_put(c);
}
#endif /* LOWBIT_Q1_LUT512_INL_H */
