/* The packed GEMV of group-32 matrices, 8 rows a lane each (the body of packed32_avx2.c and
 * packed32_avxvnni.c, which differ in the multiply-accumulate step only, dot_step-inl.h). */
#ifndef LOWBIT_PACKED32_INL_H
#define LOWBIT_PACKED32_INL_H
#include "packed_step-inl.h"

/* Group 32 (Q2_0): two row groups at once (8 rows), lane = row, the reduction vertical.  The 8
 * rows' tiles are transposed in registers (an 8 x 8 dword transpose: 24 shuffles per 1024 weights)
 * so that ymm X of byte quad q holds bytes 4q..4q+3 of rows 0..7, one row per 32-bit lane (the
 * GEMM scratch's quads, made on the fly from the same layout): its 2-bit plane k is weights
 * 4q..4q+3 of group k of each row.  vpmaddubsw against a broadcast load of the 4 activation codes
 * aq[32k + 4q ..] gives each row's pair sums in its two int16 lanes; summed over the 8 quads and
 * widened by one vpmaddwd, the group sums of 8 rows sit in 8 int32 lanes and the float step runs
 * once per group for 8 rows, in the spec's order.  Planes 1 and 3 are masked in place (code x 4,
 * x 4 shifted out of the int32 sum exactly), so a quad needs one shift: int16 lanes stay
 * <= 8 x 2 x 12 x 127 = 24384.  Why vertical: docs/PERFORMANCE.md#packed-gemv32-avx2. */
AI void chunk32x8_sums(const uint8_t *t0, const uint8_t *t1, const int8_t *aq, const int ng,
                       __m256i isum[4]) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    dot_t s16[4];
    for (int k = 0; k < ng; k++) s16[k] = _mm256_setzero_si256();
    for (int d = 0; d < 2; d++) { /* dwords 2d, 2d + 1 (low halves) and 2d + 4, 2d + 5 (high) */
        /* S[p]: rows 2p, 2p + 1 of those dwords, interleaved (rows 0..3: tile t0, 4..7: t1).
         * Loaded again for d = 1 (the barrier): fewer live registers, no spills. */
        __asm__("" ::: "memory");
        __m256i S[4];
        for (int p = 0; p < 4; p++) {
            const uint8_t *t = p < 2 ? t0 : t1;
            const __m256i u = _mm256_load_si256((const __m256i *)(t + 64 * (p & 1)));
            const __m256i v = _mm256_load_si256((const __m256i *)(t + 64 * (p & 1) + 32));
            S[p] = d ? _mm256_unpackhi_epi32(u, v) : _mm256_unpacklo_epi32(u, v);
        }
        for (int e = 0; e < 2; e++) {
            const int j = 2 * d + e;
            /* rows 0..3 (A) and 4..7 (B) of dword j (low half) and j + 4 (high half) */
            const __m256i A = e ? _mm256_unpackhi_epi64(S[0], S[1])
                                : _mm256_unpacklo_epi64(S[0], S[1]);
            const __m256i B = e ? _mm256_unpackhi_epi64(S[2], S[3])
                                : _mm256_unpacklo_epi64(S[2], S[3]);
            for (int h = 0; h < 2; h++) {
                /* low halves: an insert (lower latency than vperm2i128) */
                const __m256i X = h ? _mm256_permute2x128_si256(A, B, 0x31)
                                    : _mm256_inserti128_si256(A, _mm256_castsi256_si128(B), 1);
                const int q = j + 4 * h; /* byte quad */
                const __m256i Y = ng > 2 ? _mm256_srli_epi16(X, 4) : X;
                for (int k = 0; k < ng; k++) {
                    int32_t a4;
                    memcpy(&a4, aq + 32 * k + 4 * q, 4);
                    const __m256i c = _mm256_and_si256(k < 2 ? X : Y, k & 1 ? m12 : m3);
                    /* not dot_acc: a chain of vpdpbusd would wait on its latency */
                    s16[k] = dot_add(s16[k], dot_mul(c, _mm256_set1_epi32(a4)));
                }
                /* quad by quad: gcc otherwise hoists the products of the chunk and spills them */
                if (ng > 2)
                    __asm__ volatile("" : "+x"(s16[0]), "+x"(s16[1]), "+x"(s16[2]), "+x"(s16[3]));
                else
                    __asm__ volatile("" : "+x"(s16[0]), "+x"(s16[1]));
            }
        }
    }
    for (int k = 0; k < ng; k++) {
        isum[k] = dot_wide(s16[k]);
        if (k & 1) isum[k] = _mm256_srai_epi32(isum[k], 2); /* exact: a multiple of 4 */
    }
}

/* acc (lane = row) += the ng groups of chunk c of the 8 rows, in the spec's order */
AI __m256 chunk32x8(const int ng, const lowbit_matrix *m, int64_t rg, int64_t rg1, int64_t c,
                    int sh, const uint8_t *t0, const uint8_t *t1, const lowbit_act *a, __m256 acc) {
    __m256i isum[4];
    chunk32x8_sums(t0, t1, a->q + c * 128, ng, isum);
    __m256 W = scales8(m, rg, rg1, (c * 128) >> sh);
    for (int k = 0; k < ng; k++) {
        const int64_t g = c * 4 + k;
        if (k == 2 && m->qk == 64) W = scales8(m, rg, rg1, (g * 32) >> sh);
        acc = group_acc8(acc, isum[k], _mm256_set1_epi32(a->s[g]), W, _mm256_set1_ps(a->d[g]));
    }
    return acc;
}

/* Rows [r0, r1) of a group-32 matrix with qk = 64 or 128 (the dispatcher sends Q2_0, qk 64): row
 * groups in pairs; a last lone one is read twice (as lanes 0..3 and 4..7) and its copy dropped. */
void KN(packed_gemv32)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       float *y) {
    const int64_t nch = m->nchunks, n = m->cols;
    const int sh = qk_shift(m);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg += 2) {
        const int64_t rg1 = (rg + 1) * 4 < r1 ? rg + 1 : rg;
        const uint8_t *base0 = m->codes + rg * nch * 128, *base1 = m->codes + rg1 * nch * 128;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t c = 0; c < nch; c++) {
            const uint8_t *t0 = base0 + c * 128, *t1 = base1 + c * 128;
            pf_tile(t0); /* two streams */
            pf_tile(t1);
            if (n - c * 128 >= 128)
                acc = chunk32x8(4, m, rg, rg1, c, sh, t0, t1, a, acc);
            else
                acc = chunk32x8(2, m, rg, rg1, c, sh, t0, t1, a, acc);
        }
        float out[8];
        _mm256_storeu_ps(out, acc);
        const int nr = rg1 > rg ? 8 : 4;
        for (int i = 0; i < nr && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

#endif /* LOWBIT_PACKED32_INL_H */
