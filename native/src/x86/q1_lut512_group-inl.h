/* One activation group of the Q1_0 lookup GEMVs on 512 bits, 64 rows: the step that the
 * file-layout GEMV (q1_lut512-inl.h, after its byte transposes) and the rows64 one
 * (rows64_q1_0_avx512vbmi.c, on the vectors it stores) share.
 *
 * X[k] byte e is code byte 4 g + k of lane e (weights 32 g + 8 k .. + 7); its low and high nibbles
 * look the quads' tables up (q1_lut_cache.h: the 5-bit halves of T_m + 508), byte adds over the
 * group's 4 bytes (8 quads: below 256), then isum = lo + 32 hi - 8 * 508 by vpdpbusd on the
 * interleaved halves, one row a dword, and the reference's block sum of (float) isum * da (its
 * includers end a block with one fused step by dw).  Q1_VBMI: 1,
 * vpermb (it reads 6 index bits: the tables' 4 copies of their 16 bytes absorb the neighbour
 * nibble's 2); 0, vpshufb on masked nibbles.  The includer defines AI and Q1_VBMI. */
#ifndef LOWBIT_Q1_LUT512_GROUP_INL_H
#define LOWBIT_Q1_LUT512_GROUP_INL_H
#include <immintrin.h>

#include "../q1_lut_cache.h"

/* S[v]: the block's sum of (float) isum * da over its groups so far, rows of output vector v
 * (set by group g = 0, a fused step for the others); t: the group's tables (4 code bytes, 64
 * bytes each: quads 2 (4 g + k) and 2 (4 g + k) + 1, lo and hi halves) */
AI void q1_lut512_group(const __m512i X[4], const uint8_t *t, int g, float da, __m512 S[4]) {
    const __m512i bias = _mm512_set1_epi32(-8 * Q1_LUT_BIAS);
    const __m512i ev = _mm512_set1_epi32(0x2001), od = _mm512_set1_epi32(0x20010000);
    __m512i A = _mm512_setzero_si512(), B = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const uint8_t *tk = t + 64 * k;
#define Q1_TAB(off) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(tk + (off))))
#if Q1_VBMI
        const __m512i xl = X[k], xh = _mm512_srli_epi16(X[k], 4);
#define Q1_LOOK(off, x) _mm512_permutexvar_epi8(x, Q1_TAB(off))
#else
        const __m512i m4 = _mm512_set1_epi8(0x0f), xl = _mm512_and_si512(X[k], m4);
        const __m512i xh = _mm512_and_si512(_mm512_srli_epi16(X[k], 4), m4);
#define Q1_LOOK(off, x) _mm512_shuffle_epi8(Q1_TAB(off), x)
#endif
        A = _mm512_add_epi8(A, Q1_LOOK(0, xl));
        B = _mm512_add_epi8(B, Q1_LOOK(16, xl));
        A = _mm512_add_epi8(A, Q1_LOOK(32, xh));
        B = _mm512_add_epi8(B, Q1_LOOK(48, xh));
#undef Q1_LOOK
#undef Q1_TAB
    }
    /* vpdpbusd of the interleaved byte sums: lo + 32 hi of the even or odd row of each pair, the
     * bias its start */
    const __m512i U0 = _mm512_unpacklo_epi8(A, B), U1 = _mm512_unpackhi_epi8(A, B);
    const __m512i V[4] = {_mm512_dpbusd_epi32(bias, U0, ev), _mm512_dpbusd_epi32(bias, U0, od),
                          _mm512_dpbusd_epi32(bias, U1, ev), _mm512_dpbusd_epi32(bias, U1, od)};
    const __m512 d = _mm512_set1_ps(da);
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++)
        S[v] = g ? _mm512_fmadd_ps(_mm512_cvtepi32_ps(V[v]), d, S[v]) : _mm512_mul_ps(_mm512_cvtepi32_ps(V[v]), d);
}
#endif /* LOWBIT_Q1_LUT512_GROUP_INL_H */
