/* The AVX-512 VNNI GEMV / GEMM of Q1_0 in the file layout (18-byte blocks: fp16 d, then 128 bits,
 * weight j at bit j % 8 of qs[j / 8]), equal to the scalar reference (ref/dot.c) bit for bit.
 *
 * The reference's codes are c = 2 * bit and a 32-weight activation group's isum = sum(c * q) -
 * s[g] (s: the activation code sum, which every A8 quantizer returns): the dot products below
 * add 2 * q where a bit is set, vpdpbusd on exact int32 lanes, and subtract s[g] once per group.
 * The float steps run on 16 rows at once with the reference's roundings: a block's sum of
 * (float)isum * da over its groups in order, then acc = fma(dw, sum, acc).
 *
 * Rows of the file layout read side by side need a horizontal sum per row and group (8 dwords
 * to 1), which costs more shuffles than the dot products themselves; here a lane is a row from
 * the start instead (q1_rows16 below), so no sum crosses lanes.  The GEMV of 64 rows or more is
 * the table lookup of q1_lut512-inl.h, with q1_rows16 for what it leaves; the GEMM is q1_rows16's.
 *
 * The body of q1_0_avx512vnni.c and q1_0_avx512vbmi.c, which differ in how a quad's codes come
 * out of the bits (q1_codes: Q1_VBMI 0, a mask and a masked move; 1, one vpermb lookup) and in the
 * lookup GEMV's lookups (vpshufb / vpermb); KQ(name) is the kernel's name in each. */
#ifndef LOWBIT_Q1_0_AVX512_INL_H
#define LOWBIT_Q1_0_AVX512_INL_H
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>

#include "../internal.h"
#include "q1_quads.h"

#define AI static inline __attribute__((always_inline))

/* the reference (ref/dot.c), where the reordered codes find no memory */
lowbit_gemv_sig gemv_q1_0_ref;
lowbit_gemm_sig gemm_q1_0_ref;

#define Q1B ((int64_t)sizeof(lowbit_block_q1_0))
#define Q1D ((int64_t)offsetof(lowbit_block_q1_0, d))
#define Q1QS ((int64_t)offsetof(lowbit_block_q1_0, qs))

/* L2 prefetch distance of the 8-row run (as the Q8_0 GEMV's: the 8 row streams are one run of
 * memory when the tile is whole) */
#ifndef LOWBIT_PF_Q1_512
#define LOWBIT_PF_Q1_512 32768
#endif

AI uint64_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ---- the GEMV and GEMM: 16 rows a lane each, no reduction ------------------------------------
 *
 * A group's 4 code bytes of a row (32 bits) sit in one dword lane, 16 rows side by side (four
 * 16-byte loads and a 4x4 transpose per 4 rows).  Byte k of a lane holds weights 8k .. 8k + 7 of
 * the group, so bit t of every byte is the quad of weights {t, t + 8, t + 16, t + 24}: vptestmb
 * against bit t gives that quad's codes of all 16 rows as one mask, and vpdpbusd against the
 * activation codes of the same quad (reordered once per call, q1_quads.h) adds it into the rows'
 * lanes.  The float step then runs on 16 rows at once, groups in order. */

/* Row i of the 16 at p: four bases 4 rows apart plus 0, 1, 2 or 3 rows, so that the 16 rows take
 * 6 registers (rb3 = 3 rb) */
AI const uint8_t *rowp(const uint8_t *p, int64_t rb, int64_t rb3, int i) {
    const uint8_t *base = p + (i / 4) * 4 * rb;
    return (i & 3) == 3 ? base + rb3 : base + (i & 3) * rb;
}

/* fp16 scales of block b of the 16 rows at p (gathered in general-purpose registers: the vector
 * shuffle pipe is the busy one) */
AI __m512 q1_scales16(const uint8_t *p, int64_t rb, int64_t rb3, int64_t b) {
    uint64_t h[4] = {0, 0, 0, 0};
    for (int i = 0; i < 16; i++) h[i / 4] |= ld16(rowp(p, rb, rb3, i) + Q1B * b + Q1D) << (16 * (i % 4));
    return _mm512_cvtph_ps(_mm256_set_epi64x((long long)h[3], (long long)h[2], (long long)h[1],
                                             (long long)h[0]));
}

/* The 16 rows at p (the run [p, p + 16 rb)) against NC columns with reordered codes qp[j] and
 * their acts aq[j]: acc[j] lane i = the reference's dot of row i and column j. */
AI void q1_rows16(const int NC, const uint8_t *p, int64_t rb, int64_t nb, const int8_t *const *qp,
                  const lowbit_act *const *aq, const __m512i T[8], __m512 acc[4]) {
    const char *run = (const char *)p;
    const int64_t rb3 = 3 * rb;
    const char *pf = run + LOWBIT_PF_Q1_512;
    for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        if (LOWBIT_PF_Q1_512)
            for (const char *lim = run + 16 * Q1B * (b + 1) + LOWBIT_PF_Q1_512; pf < lim; pf += 64)
                _mm_prefetch(pf, _MM_HINT_T1);
        /* R[i] 128-bit lane l: the 16 code bytes of row 4 l + i; G[g] lane r: group g of row r */
        __m512i R[4];
        for (int i = 0; i < 4; i++) {
            const int64_t o = Q1B * b + Q1QS;
            /* the lane index of an insert must be a constant for clang, not only after unrolling */
            __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(rowp(p, rb, rb3, i) + o)));
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(rowp(p, rb, rb3, 4 + i) + o)), 1);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(rowp(p, rb, rb3, 8 + i) + o)), 2);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(rowp(p, rb, rb3, 12 + i) + o)), 3);
            R[i] = x;
        }
        const __m512i t0 = _mm512_unpacklo_epi32(R[0], R[1]), t1 = _mm512_unpackhi_epi32(R[0], R[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(R[2], R[3]), t3 = _mm512_unpackhi_epi32(R[2], R[3]);
        const __m512i G[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                              _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
        const __m512 dw = q1_scales16(p, rb, rb3, b);
        __m512 S[4]; /* the block's sum of (float) isum * da, column j */
        for (int j = 0; j < 4; j++) S[j] = _mm512_setzero_ps();
        for (int g = 0; g < 4; g++) {
            const int64_t gg = 4 * b + g;
            __m512i s[4][2];
            for (int j = 0; j < NC; j++) s[j][0] = s[j][1] = _mm512_setzero_si512();
            const __m512i x6 = Q1_VBMI ? _mm512_srli_epi16(G[g], 2) : G[g];
            for (int t = 0; t < 8; t++) {
                const __m512i c = q1_codes(G[g], x6, t, T);
                for (int j = 0; j < NC; j++) {
                    int32_t v;
                    memcpy(&v, qp[j] + 32 * gg + 4 * t, 4);
                    s[j][t & 1] = _mm512_dpbusd_epi32(s[j][t & 1], c, _mm512_set1_epi32(v));
                }
            }
            for (int j = 0; j < NC; j++) {
                const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s[j][0], s[j][1]),
                                                      _mm512_set1_epi32(aq[j]->s[gg]));
                const __m512 da = _mm512_set1_ps(aq[j]->d[gg]), f = _mm512_cvtepi32_ps(isum);
                S[j] = g ? _mm512_fmadd_ps(f, da, S[j]) : _mm512_mul_ps(f, da);
            }
        }
        for (int j = 0; j < NC; j++) acc[j] = _mm512_fmadd_ps(dw, S[j], acc[j]);
    }
}

/* The first row of the 16-row tile at row r of [.., r1): a last tile of fewer rows is the 16
 * ending at r1 (its new rows are stored; rows before r0 exist in w) */
AI const uint8_t *q1_tile(const void *w, int64_t rb, int64_t r, int64_t r1) {
    return (const uint8_t *)w + (r + 16 <= r1 ? r : r1 - 16) * rb;
}

/* the GEMV of q1_rows16, the lookup GEMV's fallback (under 64 rows, a short last tile) */
static void q1_gemv_16rows(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    const int64_t nb = a->n / 128;
    int8_t stack[LOWBIT_Q1_STACK];
    __m512i T[8];
    q1_tables(T);
    const int8_t *qp[4];
    int8_t *buf = r1 >= 16 ? q1_quads_of(&a, 1, stack, qp) : NULL;
    if (!buf) { /* under 16 rows, or no memory for the reordered codes */
        gemv_q1_0_ref(w, rb, r0, r1, a, y);
        return;
    }
    for (int64_t r = r0; r < r1; r += 16) {
        const int64_t t = r + 16 <= r1 ? r : r1 - 16; /* the tile's first row */
        __m512 acc[4];
        q1_rows16(1, (const uint8_t *)w + t * rb, rb, nb, qp, &a, T, acc);
        float out[16];
        _mm512_storeu_ps(out, acc[0]);
        memcpy(y + r - r0, out + (r - t), sizeof(float) * (size_t)(16 - (r - t)));
    }
    if (buf != stack) free(buf);
}

#include "q1_lut512-inl.h"

void KQ(gemv_q1_0)(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                   float *y) {
    q1_gemv_lut512(w, rb, r0, r1, a, y);
}

/* Columns outermost, 4 at a time (their activations stay in L1 while the rows stream by). */
void KQ(gemm_q1_0)(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    const int64_t nb = a[0].n / 128;
    int8_t stack[LOWBIT_Q1_STACK];
    __m512i T[8];
    q1_tables(T);
    for (int64_t j = 0; j < batch; j += 4) {
        const int64_t nc = batch - j < 4 ? batch - j : 4;
        const lowbit_act *aq[4];
        for (int jj = 0; jj < 4; jj++) aq[jj] = &a[j + (jj < nc ? jj : nc - 1)];
        const int8_t *qp[4];
        int8_t *buf = r1 >= 16 ? q1_quads_of(aq, 4, stack, qp) : NULL;
        if (!buf) { /* under 16 rows, or no memory for the reordered codes */
            gemm_q1_0_ref(w, rb, r0, r1, aq[0], nc, y + j * ldy, ldy);
            continue;
        }
        for (int64_t r = r0; r < r1; r += 16) {
            const int64_t t = r + 16 <= r1 ? r : r1 - 16;
            __m512 acc[4];
            q1_rows16(4, (const uint8_t *)w + t * rb, rb, nb, qp, aq, T, acc);
            for (int jj = 0; jj < nc; jj++) {
                float out[16];
                _mm512_storeu_ps(out, acc[jj]);
                memcpy(y + (j + jj) * ldy + r, out + (r - t), sizeof(float) * (size_t)(16 - (r - t)));
            }
        }
        if (buf != stack) free(buf);
    }
}
#endif /* LOWBIT_Q1_0_AVX512_INL_H */
