/* AVX2 GEMV of the packed (row-interleaved) layout (pack.c, packed.h): one kernel per strategy,
 * each an entry of the kernel list with the matrices it takes; bit-exact with
 * lowbit_packed_gemv_ref.  The arithmetic contract is in avx2-inl.h. */
#include "avx2-inl.h"

/* ---- packed layout: 4-row groups, 128-weight chunks, codes then scales (see internal.h) -------- */

/* log2 of the scale block (64, 128 or 256): the scale of group g is block (g * G) >> sh */
AI int qk_shift(const lowbit_matrix *m) { return m->qk == 64 ? 6 : m->qk == 128 ? 7 : 8; }

/* fp16 scales of the 4 rows of group rg for activation group g */
AI __m128 packed_dw(const lowbit_matrix *m, int64_t rg, int64_t g, int64_t G, int sh) {
    if (!m->qk) return _mm_set1_ps(1.0f);
    const int64_t b = (g * G) >> sh;
    return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(m->scales + (rg * m->nscales + b) * 4)));
}

AI void pf_tile(const uint8_t *tile) { /* a 4-row chunk tile is two cache lines */
    if (LOWBIT_PF_DIST) {
        _mm_prefetch((const char *)(tile + LOWBIT_PF_DIST), _MM_HINT_T0);
        _mm_prefetch((const char *)(tile + LOWBIT_PF_DIST + 64), _MM_HINT_T0);
    }
}

/* Group G of the activations (32, 128 or 256): CG = min(G, 128) weights of it lie in one chunk,
 * a chunk holds 128 / CG group parts, a group spans CPG = max(G / 128, 1) chunks.  The int32
 * lanes of a group are summed across its chunks and reduced once. */
/* Float steps of what the previous step of packed_gemv_k left pending: one group's 4 row sums
 * (pend 1, group pg). */
AI __m128 pk_flush(const int G, int pend, __m128 acc, const lowbit_matrix *m, int64_t rg, int sh,
                   const lowbit_act *a, __m128i pis, int64_t pg) {
    if (pend)
        return group_acc(acc, pis, _mm_set1_epi32(a->s[pg]), packed_dw(m, rg, pg, G, sh),
                         _mm_set1_ps(a->d[pg]));
    return acc;
}

/* Software-pipelined: the float steps of a chunk are issued after the integer work of the next
 * one, so that the long integer-to-float chain of one chunk overlaps the next chunk's work (the
 * out-of-order window alone held about one chunk).  The float adds keep the spec's order. */
AI void packed_gemv_k(const int G, const lowbit_matrix *m, int64_t r0, int64_t r1,
                      const lowbit_act *a, float *y) {
    const int CG = G < 128 ? G : 128, CPG = G > 128 ? G / 128 : 1;
    const int64_t nch = m->nchunks, n = m->cols;
    const int sh = qk_shift(m);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        int pend = 0; /* pending float steps, see pk_flush */
        __m128i pis = _mm_setzero_si128();
        int64_t pg = 0;
        for (int64_t c = 0; c < nch; c += CPG) {
            const int ng = (int)((n - c * 128 < 128 ? n - c * 128 : 128) / CG);
            __m256i iv[4][4];
            for (int i = 0; i < 4; i++)
                for (int gi = 0; gi < 128 / CG; gi++) iv[i][gi] = _mm256_setzero_si256();
            for (int cc = 0; cc < CPG; cc++) {
                const uint8_t *tile = base + (c + cc) * 128;
                pf_tile(tile);
                for (int i = 0; i < 4; i++) {
                    __m256i cv[8];
                    decode(F_PK, tile + 32 * i, 0, cv);
                    for (int gi = 0; gi < ng && gi < 128 / CG; gi++)
                        iv[i][gi] = _mm256_add_epi32(
                            iv[i][gi], vec_dot(F_PK, cv, gi * CG / 32, CG / 32, a->q + (c + cc) * 128));
                }
            }
            if (G >= 128 && ng == 1) { /* one group per step: pipelined */
                const __m128i isum = hsum4(iv[0][0], iv[1][0], iv[2][0], iv[3][0]);
                acc = pk_flush(G, pend, acc, m, rg, sh, a, pis, pg);
                pis = isum, pg = c * 128 / G, pend = 1;
                continue;
            }
            acc = pk_flush(G, pend, acc, m, rg, sh, a, pis, pg);
            pend = 0;
            for (int gi = 0; gi < ng && gi < 128 / CG; gi++) {
                const int64_t g = (c * 128 + gi * CG) / G;
                __m128i isum = hsum4(iv[0][gi], iv[1][gi], iv[2][gi], iv[3][gi]);
                acc = group_acc(acc, isum, _mm_set1_epi32(a->s[g]), packed_dw(m, rg, g, G, sh),
                                _mm_set1_ps(a->d[g]));
            }
        }
        acc = pk_flush(G, pend, acc, m, rg, sh, a, pis, pg);
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

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
    __m256i s16[4];
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
                    const __m256i p = _mm256_maddubs_epi16(c, _mm256_set1_epi32(a4));
                    s16[k] = _mm256_add_epi16(s16[k], p);
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
        isum[k] = _mm256_madd_epi16(s16[k], _mm256_set1_epi16(1));
        if (k & 1) isum[k] = _mm256_srai_epi32(isum[k], 2); /* exact: a multiple of 4 */
    }
}

/* fp16 scales of block b of the 8 rows of row groups rg0 (lanes 0..3) and rg1 (4..7) */
AI __m256 scales8(const lowbit_matrix *m, int64_t rg0, int64_t rg1, int64_t b) {
    const uint16_t *s0 = m->scales + (rg0 * m->nscales + b) * 4;
    const uint16_t *s1 = m->scales + (rg1 * m->nscales + b) * 4;
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)s0),
                                              _mm_loadl_epi64((const __m128i *)s1)));
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
void packed_gemv32_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
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

/* The activation codes of one 128-weight chunk, plane by plane: av[k] = codes 32k .. 32k + 31. */
AI void chunk_acts(const int8_t *aq, __m256i av[4]) {
    for (int k = 0; k < 4; k++) av[k] = _mm256_loadu_si256((const __m256i *)(aq + 32 * k));
}

/* The codes of a 4-row chunk tile with one shift per 32 bytes instead of three: planes 0 and 2
 * are masked out of v and v >> 4 with 3 (codes 0..3), planes 1 and 3 with 12, in place (4 x the
 * code, 0..12), and s[i] (row i) gets 4 x (planes 0 + 2) + (planes 1 + 3): 4 x the true sums, in
 * int16 lanes, shifted back out exactly after the reduction.  Activation codes are in
 * [-127, 127] (formats.h), so a vpmaddubsw lane (a pair) is at most 2 x 3 x 127 = 762 for planes
 * 0, 2 and 2 x 12 x 127 = 3048 for planes 1, 3: one tile adds at most 4 x 2 x 762 + 2 x 3048 =
 * 12192 to a lane, two tiles 24384 < 32767. */
AI void tile_sums(const uint8_t *tile, const int8_t *aq, __m256i s[4]) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    __m256i av[4];
    chunk_acts(aq, av);
    for (int i = 0; i < 4; i++) {
        const __m256i v = _mm256_load_si256((const __m256i *)(tile + 32 * i));
        const __m256i h = _mm256_srli_epi16(v, 4); /* bits 4..7 of each byte at 0..3 */
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(v, m3), av[0]);
        const __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(h, m3), av[2]);
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(v, m12), av[1]);
        const __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(h, m12), av[3]);
        const __m256i t = _mm256_add_epi16(_mm256_slli_epi16(_mm256_add_epi16(p0, p2), 2),
                                           _mm256_add_epi16(p1, p3));
        s[i] = _mm256_add_epi16(s[i], t);
        /* row by row: gcc otherwise hoists every product of the tile and spills them */
        __asm__ volatile("" : "+x"(s[i]));
    }
}

/* Group 256 (TQ2_0, TQ1_0) with cols a multiple of 256: a group is two chunks, summed in int16
 * by tile_sums (<= 24384 per lane) and widened by one vpmaddwd per row; one reduction (hsum4) and
 * one float step per group for 4 rows, the float step pipelined as in packed_gemv_k.  Against
 * packed_gemv_k: 1 shift instead of 3 per 32 code bytes, one vpmaddwd per 256 weights of a row
 * instead of one per 128. */
void packed_gemv256_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    const int64_t nch = m->nchunks, ng = m->cols / 256;
    const int sh = qk_shift(m);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        __m128i pis = _mm_setzero_si128();
        for (int64_t g = 0; g < ng; g++) {
            __m256i s[4], iv[4];
            for (int i = 0; i < 4; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < 2; cc++) {
                const uint8_t *tile = base + (2 * g + cc) * 128;
                pf_tile(tile);
                tile_sums(tile, a->q + (2 * g + cc) * 128, s);
            }
            for (int i = 0; i < 4; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m128i isum = _mm_srai_epi32(hsum4(iv[0], iv[1], iv[2], iv[3]), 2);
            acc = pk_flush(256, g > 0, acc, m, rg, sh, a, pis, g - 1);
            pis = isum;
        }
        acc = pk_flush(256, ng > 0, acc, m, rg, sh, a, pis, ng - 1);
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

/* acc (lane = row) += the float step of group g of row groups ga (lanes 0..3) and gb (4..7) */
AI __m256 pair_group_acc(__m256 acc, __m256i isum, const lowbit_matrix *m, int64_t ga, int64_t gb,
                         int64_t g, const lowbit_act *a) {
    return group_acc8(acc, isum, _mm256_set1_epi32(a->s[g]), scales8(m, ga, gb, g),
                      _mm256_set1_ps(a->d[g]));
}

/* packed_gemv_pair (lowbit_pair_rows_ok: groups of one scale block, 256 weights (TQ2_0, TQ1_0:
 * TPG = 2 chunk tiles a group) or 128 (PQ2_0, PTQ1_0: TPG = 1)): row group k of range A and row
 * group k of range B, far apart, side by side as 8 rows (tile_sums on each), lanes 0..3 and
 * 4..7 of one vector after one transpose-reduce (hsum_8x8) per group, one float step per group
 * for the 8 rows in the spec's order.  The two runs must be far apart for the prefetchers to
 * follow both (docs/PERFORMANCE.md#paired-gemv).  I2_S: below. */
AI void packed_gemv_pair_k(const int TPG, const lowbit_matrix *m, int64_t a0, int64_t a1,
                           int64_t b0, int64_t b1, const lowbit_act *a, float *y) {
    const int64_t nch = m->nchunks, ng = nch / TPG;
    const int64_t npair = (b1 - b0 + 3) / 4;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t k = 0; k < npair; k++) {
        const int64_t ga = a0 / 4 + k, gb = b0 / 4 + k;
        const uint8_t *base_a = m->codes + ga * nch * 128, *base_b = m->codes + gb * nch * 128;
        __m256 acc = _mm256_setzero_ps();
        __m256i pis = _mm256_setzero_si256(); /* the previous group's sums: float step pipelined */
        for (int64_t g = 0; g < ng; g++) {
            __m256i s[8], iv[8];
            for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < TPG; cc++) {
                const int64_t off = (TPG * g + cc) * 128;
                pf_tile(base_a + off);
                pf_tile(base_b + off);
                tile_sums(base_a + off, a->q + off, s);
                tile_sums(base_b + off, a->q + off, s + 4);
            }
            for (int i = 0; i < 8; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m256i isum = _mm256_srai_epi32(hsum_8x8(iv), 2); /* exact: 4 x the sums */
            if (g > 0) acc = pair_group_acc(acc, pis, m, ga, gb, g - 1, a);
            pis = isum;
        }
        if (ng > 0) acc = pair_group_acc(acc, pis, m, ga, gb, ng - 1, a);
        float out[8];
        _mm256_storeu_ps(out, acc);
        for (int i = 0; i < 4 && ga * 4 + i < m->rows; i++) y[ga * 4 + i] = out[i];
        for (int i = 0; i < 4 && gb * 4 + i < m->rows; i++) y[gb * 4 + i] = out[4 + i];
    }
    if (a0 + 4 * npair < a1) /* A's rows past B's */
        LOWBIT_PLANNED_GEMV(m, LOWBIT_ISA_AVX2)(m, a0 + 4 * npair, a1, a, y);
}

/* Group 128 with qk = 128 (PQ2_0, PTQ1_0: a group is one chunk and one scale block).  Two chunks
 * per step: tile_sums gives the 4 rows' int16 sums of each (<= 12192 per lane: one tile each), one
 * vpmaddwd per (row, chunk) and one transpose-reduce (hsum_8x8) put the 8 (row, chunk) sums in the
 * 8 lanes of one vector -- lanes 0..3 rows 0..3 of chunk c, 4..7 those of chunk c + 1 -- which is
 * exactly the order of the 8 fp16 scales at scales[rg][c][0..3], scales[rg][c + 1][0..3]: one
 * vcvtph2ps, one vpsubd of the code sums, one cvt and the spec's two multiplies for 8 groups,
 * then the float adds in the spec's order (chunk c, then c + 1, lane = row).  Software-pipelined
 * two pairs deep: a pair's float steps are issued after the integer work of the two pairs that
 * follow it (the spec's float order is unchanged).  A last odd chunk runs alone (hsum4).
 * Alternatives tried: docs/PERFORMANCE.md#packed-gemv128-avx2. */
AI __m256 bcast2_ps(const float *p) { /* p[0] in lanes 0..3, p[1] in 4..7 */
    return _mm256_blend_ps(_mm256_broadcast_ss(p), _mm256_broadcast_ss(p + 1), 0xf0);
}
AI __m256i bcast2_epi32(const int32_t *p) {
    return _mm256_blend_epi32(_mm256_set1_epi32(p[0]), _mm256_set1_epi32(p[1]), 0xf0);
}
/* acc (lane = row) += the float steps of chunks c, c + 1 of row group rg, isum as above */
AI __m128 pair_acc(__m128 acc, __m256i isum, const lowbit_matrix *m, int64_t rg, int64_t c,
                   const lowbit_act *a) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m->scales + (rg * m->nscales + c) * 4)));
    const __m256 sc = _mm256_mul_ps(dw, bcast2_ps(a->d + c));
    const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, bcast2_epi32(a->s + c))), sc);
    acc = _mm_add_ps(acc, _mm256_castps256_ps128(p));
    return _mm_add_ps(acc, _mm256_extractf128_ps(p, 1));
}

void packed_gemv128_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    const int64_t nch = m->nchunks, npair = nch / 2;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        __m256i pis[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* pairs p-2, p-1 */
        for (int64_t p = 0; p < npair; p++) {
            __m256i s[8], iv[8];
            for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < 2; cc++) {
                const uint8_t *tile = base + (2 * p + cc) * 128;
                pf_tile(tile);
                tile_sums(tile, a->q + (2 * p + cc) * 128, s + 4 * cc);
            }
            for (int i = 0; i < 8; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m256i isum = _mm256_srai_epi32(hsum_8x8(iv), 2); /* exact: 4 x the sums */
            if (p > 1) acc = pair_acc(acc, pis[0], m, rg, 2 * p - 4, a);
            pis[0] = pis[1], pis[1] = isum;
        }
        if (npair > 1) acc = pair_acc(acc, pis[0], m, rg, 2 * npair - 4, a);
        if (npair) acc = pair_acc(acc, pis[1], m, rg, 2 * npair - 2, a);
        if (nch & 1) { /* the last chunk alone */
            const int64_t c = nch - 1;
            __m256i s[4], iv[4];
            for (int i = 0; i < 4; i++) s[i] = _mm256_setzero_si256();
            tile_sums(base + c * 128, a->q + c * 128, s);
            for (int i = 0; i < 4; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m128i isum = _mm_srai_epi32(hsum4(iv[0], iv[1], iv[2], iv[3]), 2);
            acc = group_acc(acc, isum, _mm_set1_epi32(a->s[c]), packed_dw(m, rg, c, 128, 7),
                            _mm_set1_ps(a->d[c]));
        }
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

/* I2_S with P2 activations (act_rules.h: one power-of-two scale per row, so the per-group float
 * steps of the spec are exact and their sum is (float)(row's int sum) * d): the int sums of a row
 * are added across all its chunks, in int16 for runs of 8 chunks (32 vpmaddubsw of codes <= 3 x
 * |a| <= 127: <= 24384 per lane), and reduced once per row group; no per-chunk horizontal sum or
 * float step.  Row groups rgs[0 .. NR): NR = 1, or 2 for packed_gemv_pair, a run of 8 chunks of
 * each in turn, two runs of memory side by side (docs/PERFORMANCE.md#i2s-row-sums). */
AI void i2s_rows(const int NR, const lowbit_matrix *m, const int64_t *rgs, const lowbit_act *a,
                 int32_t stot, float *y) {
    const int64_t nch = m->nchunks;
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i acc[2][4];
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = _mm256_setzero_si256();
    for (int64_t c0 = 0; c0 < nch; c0 += 8) {
        const int64_t c1 = c0 + 8 < nch ? c0 + 8 : nch;
        for (int j = 0; j < NR; j++) {
            const uint8_t *base = m->codes + rgs[j] * nch * 128;
            __m256i s16[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                              _mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int64_t c = c0; c < c1; c++) {
                const uint8_t *tile = base + c * 128;
                pf_tile(tile);
                const int8_t *aq = a->q + c * 128;
                __m256i av[4];
                chunk_acts(aq, av);
                for (int i = 0; i < 4; i++) {
                    const __m256i v = _mm256_load_si256((const __m256i *)(tile + 32 * i));
                    __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(v, m3), av[0]);
                    __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2), m3), av[1]);
                    __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m3), av[2]);
                    __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 6), m3), av[3]);
                    s16[i] = _mm256_add_epi16(s16[i], _mm256_add_epi16(_mm256_add_epi16(p0, p1),
                                                                       _mm256_add_epi16(p2, p3)));
                }
            }
            for (int i = 0; i < 4; i++)
                acc[j][i] = _mm256_add_epi32(acc[j][i], _mm256_madd_epi16(s16[i], ones));
        }
    }
    const __m128 d = _mm_set1_ps(a->d[0]);
    for (int j = 0; j < NR; j++) {
        const int64_t rg = rgs[j];
        const __m128i isum = _mm_sub_epi32(hsum4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]),
                                           _mm_set1_epi32(stot));
        float out[4]; /* exact: |isum| < 2^24 and d a power of two (or 0) */
        _mm_storeu_ps(out, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

static void packed_gemv_i2s_row(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                                float *y) {
    const int32_t stot = lowbit_i2s_code_offset(m, a);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) i2s_rows(1, m, &rg, a, stot, y);
}

/* The group kernel packed_gemv_k for each activation group, G a constant in each. */
void packed_gemv_g32_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    packed_gemv_k(32, m, r0, r1, a, y);
}
void packed_gemv_g128_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    packed_gemv_k(128, m, r0, r1, a, y);
}
void packed_gemv_g256_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    packed_gemv_k(256, m, r0, r1, a, y);
}

/* I2_S in whole chunks: the row sums where the activations allow them (decided per call: the
 * activation scales are not known at pack time), else the group kernel. */
void packed_gemv_i2s_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    if (lowbit_i2s_row_sums_ok(m, a))
        packed_gemv_i2s_row(m, r0, r1, a, y);
    else
        packed_gemv_k(128, m, r0, r1, a, y);
}

void packed_gemv_pair_avx2(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                  int64_t b1, const lowbit_act *a, float *y) {
    if (m->type != LOWBIT_TYPE_I2_S) {
        /* TPG a constant in each call: a run-time value is slower (docs/PERFORMANCE.md#const-tpg) */
        if (m->group == 256)
            packed_gemv_pair_k(2, m, a0, a1, b0, b1, a, y);
        else
            packed_gemv_pair_k(1, m, a0, a1, b0, b1, a, y);
        return;
    }
    if (!lowbit_i2s_row_sums_ok(m, a)) { /* the per-group path, one range after the other */
        packed_gemv_k(128, m, a0, a1, a, y);
        packed_gemv_k(128, m, b0, b1, a, y);
        return;
    }
    const int32_t stot = lowbit_i2s_code_offset(m, a);
    const int64_t npair = (b1 - b0 + 3) / 4;
    for (int64_t k = 0; k < npair; k++) {
        const int64_t rgs[2] = {a0 / 4 + k, b0 / 4 + k};
        i2s_rows(2, m, rgs, a, stot, y);
    }
    if (a0 + 4 * npair < a1) packed_gemv_i2s_row(m, a0 + 4 * npair, a1, a, y); /* A's rows past B's */
}
