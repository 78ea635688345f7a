/* GEMV of the packed (row-interleaved) layout (pack.c, packed.h): one kernel per strategy, each
 * an entry of the kernel list with the matrices it takes; bit-exact with lowbit_packed_gemv_ref.
 * The body of packed_avx2.c and packed_avxvnni.c, which differ in the multiply-accumulate step
 * only (dot_step-inl.h); the group-32 8-row kernel is packed32-inl.h. */
#ifndef LOWBIT_PACKED_INL_H
#define LOWBIT_PACKED_INL_H
#include "packed_step-inl.h"
#include "pf_l1-inl.h"

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
AI void tile_sums(const uint8_t *tile, const int8_t *aq, dot_t s[4]) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    __m256i av[4];
    chunk_acts(aq, av);
    for (int i = 0; i < 4; i++) {
        const __m256i v = _mm256_load_si256((const __m256i *)(tile + 32 * i));
        const __m256i h = _mm256_srli_epi16(v, 4); /* bits 4..7 of each byte at 0..3 */
        /* two short chains, not one through s[i]: a vpdpbusd chain waits on its latency */
        const dot_t p02 = dot_acc(dot_mul(_mm256_and_si256(v, m3), av[0]), _mm256_and_si256(h, m3), av[2]);
        const dot_t p13 = dot_acc(dot_mul(_mm256_and_si256(v, m12), av[1]), _mm256_and_si256(h, m12), av[3]);
        s[i] = dot_add(s[i], dot_add(dot_slli(p02, 2), p13));
        /* row by row: gcc otherwise hoists every product of the tile and spills them */
        __asm__ volatile("" : "+x"(s[i]));
    }
}

/* Group 256 (TQ2_0, TQ1_0) with cols a multiple of 256: a group is two chunks, summed in int16
 * by tile_sums (<= 24384 per lane) and widened by one vpmaddwd per row; one reduction (hsum4) and
 * one float step per group for 4 rows, the float step pipelined as in packed_gemv_k.  Against
 * packed_gemv_k: 1 shift instead of 3 per 32 code bytes, one vpmaddwd per 256 weights of a row
 * instead of one per 128. */
void KN(packed_gemv256)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    const int64_t nch = m->nchunks, ng = m->cols / 256;
    const int sh = qk_shift(m);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        __m128i pis = _mm_setzero_si128();
        for (int64_t g = 0; g < ng; g++) {
            dot_t s[4];
            __m256i iv[4];
            for (int i = 0; i < 4; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < 2; cc++) {
                const uint8_t *tile = base + (2 * g + cc) * 128;
                pf_tile(tile);
                tile_sums(tile, a->q + (2 * g + cc) * 128, s);
            }
            for (int i = 0; i < 4; i++) iv[i] = dot_wide(s[i]);
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
    for (int64_t k = 0; k < npair; k++) {
        const int64_t ga = a0 / 4 + k, gb = b0 / 4 + k;
        const uint8_t *base_a = m->codes + ga * nch * 128, *base_b = m->codes + gb * nch * 128;
        __m256 acc = _mm256_setzero_ps();
        __m256i pis = _mm256_setzero_si256(); /* the previous group's sums: float step pipelined */
        for (int64_t g = 0; g < ng; g++) {
            dot_t s[8];
            __m256i iv[8];
            for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < TPG; cc++) {
                const int64_t off = (TPG * g + cc) * 128;
                pf_tile(base_a + off);
                pf_tile(base_b + off);
                tile_sums(base_a + off, a->q + off, s);
                tile_sums(base_b + off, a->q + off, s + 4);
            }
            for (int i = 0; i < 8; i++) iv[i] = dot_wide(s[i]);
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
        LOWBIT_PLANNED_GEMV(m, DOT_ISA)(m, a0 + 4 * npair, a1, a, y);
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

void KN(packed_gemv128)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    const int64_t nch = m->nchunks, npair = nch / 2;
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        __m256i pis[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* pairs p-2, p-1 */
        for (int64_t p = 0; p < npair; p++) {
            dot_t s[8];
            __m256i iv[8];
            for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < 2; cc++) {
                const uint8_t *tile = base + (2 * p + cc) * 128;
                pf_tile(tile);
                tile_sums(tile, a->q + (2 * p + cc) * 128, s + 4 * cc);
            }
            for (int i = 0; i < 8; i++) iv[i] = dot_wide(s[i]);
            const __m256i isum = _mm256_srai_epi32(hsum_8x8(iv), 2); /* exact: 4 x the sums */
            if (p > 1) acc = pair_acc(acc, pis[0], m, rg, 2 * p - 4, a);
            pis[0] = pis[1], pis[1] = isum;
        }
        if (npair > 1) acc = pair_acc(acc, pis[0], m, rg, 2 * npair - 4, a);
        if (npair) acc = pair_acc(acc, pis[1], m, rg, 2 * npair - 2, a);
        if (nch & 1) { /* the last chunk alone */
            const int64_t c = nch - 1;
            dot_t s[4];
            __m256i iv[4];
            for (int i = 0; i < 4; i++) s[i] = _mm256_setzero_si256();
            tile_sums(base + c * 128, a->q + c * 128, s);
            for (int i = 0; i < 4; i++) iv[i] = dot_wide(s[i]);
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
 * each in turn, two runs of memory side by side (docs/PERFORMANCE.md#i2s-row-sums).  L1: the AMD
 * entries' prefetch (pf_l1-inl.h), NR 1. */
AI void i2s_rows(const int NR, const int L1, const lowbit_matrix *m, const int64_t *rgs,
                 const lowbit_act *a, int32_t stot, float *y) {
    const int64_t nch = m->nchunks;
    __m256i acc[2][4];
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = _mm256_setzero_si256();
    for (int64_t c0 = 0; c0 < nch; c0 += 8) {
        const int64_t c1 = c0 + 8 < nch ? c0 + 8 : nch;
        for (int j = 0; j < NR; j++) {
            const uint8_t *base = m->codes + rgs[j] * nch * 128;
            dot_t s16[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                            _mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int64_t c = c0; c < c1; c++) {
                const uint8_t *tile = base + c * 128;
                if (L1) {
                    lowbit_pf_l1_amd(tile);
                    lowbit_pf_l1_amd(tile + 64);
                } else {
                    pf_tile(tile);
                }
                const int8_t *aq = a->q + c * 128;
                __m256i av[4];
                chunk_acts(aq, av);
                for (int i = 0; i < 4; i++) {
                    __m256i P[4];
                    planes(_mm256_load_si256((const __m256i *)(tile + 32 * i)), P);
                    const dot_t p01 = dot_acc(dot_mul(P[0], av[0]), P[1], av[1]);
                    const dot_t p23 = dot_acc(dot_mul(P[2], av[2]), P[3], av[3]);
                    s16[i] = dot_add(s16[i], dot_add(p01, p23));
                }
            }
            for (int i = 0; i < 4; i++)
                acc[j][i] = _mm256_add_epi32(acc[j][i], dot_wide(s16[i]));
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

#if !DOT_INT16
/* i2s_rows of one row group in the AMD twins of the int32 (vpdpbusd) variants: the planes as
 * tile_sums takes them (one shift; planes 1 and 3 masked in place, so their sums come out scaled
 * and are shifted back exactly once per row group), each product added into one of two int32 accumulators per row
 * (no int16 runs to widen, no adds between products), and the line prefetched into L1. */
AI void i2s_rows_dp(const lowbit_matrix *m, int64_t rg, const lowbit_act *a, int32_t stot,
                    float *y) {
    const int64_t nch = m->nchunks;
    const uint8_t *base = m->codes + rg * nch * 128;
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    __m256i s02[4], s13[4];
    for (int i = 0; i < 4; i++) s02[i] = s13[i] = _mm256_setzero_si256();
    for (int64_t c = 0; c < nch; c++) {
        const uint8_t *tile = base + c * 128;
        lowbit_pf_l1_amd(tile);
        lowbit_pf_l1_amd(tile + 64);
        __m256i av[4];
        chunk_acts(a->q + c * 128, av);
        for (int i = 0; i < 4; i++) {
            const __m256i v = _mm256_load_si256((const __m256i *)(tile + 32 * i));
            const __m256i h = _mm256_srli_epi16(v, 4);
            s02[i] = dot_acc(dot_acc(s02[i], _mm256_and_si256(v, m3), av[0]),
                             _mm256_and_si256(h, m3), av[2]);
            s13[i] = dot_acc(dot_acc(s13[i], _mm256_and_si256(v, m12), av[1]),
                             _mm256_and_si256(h, m12), av[3]);
        }
    }
    __m256i acc[4];
    for (int i = 0; i < 4; i++) acc[i] = _mm256_add_epi32(s02[i], _mm256_srai_epi32(s13[i], 2));
    const __m128i isum = _mm_sub_epi32(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_epi32(stot));
    float out[4]; /* exact: |isum| < 2^24 and d a power of two (or 0) */
    _mm_storeu_ps(out, _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_set1_ps(a->d[0])));
    for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
}
#endif

/* Rows [r0, r1) a row group at a time; L1: the AMD twins' (i2s_rows_dp where it exists) */
AI void i2s_row_walk(const int L1, const lowbit_matrix *m, int64_t r0, int64_t r1,
                     const lowbit_act *a, float *y) {
    const int32_t stot = lowbit_i2s_code_offset(m, a);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++)
#if !DOT_INT16
        if (L1)
            i2s_rows_dp(m, rg, a, stot, y);
        else
#endif
            i2s_rows(1, L1, m, &rg, a, stot, y);
}

static void packed_gemv_i2s_row(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                                float *y) {
    i2s_row_walk(0, m, r0, r1, a, y);
}

/* The group kernel packed_gemv_k for each activation group, G a constant in each. */
void KN(packed_gemv_g32)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    packed_gemv_k(32, m, r0, r1, a, y);
}
void KN(packed_gemv_g128)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    packed_gemv_k(128, m, r0, r1, a, y);
}
void KN(packed_gemv_g256)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    packed_gemv_k(256, m, r0, r1, a, y);
}

/* I2_S in whole chunks: the row sums where the activations allow them (decided per call: the
 * activation scales are not known at pack time), else the group kernel. */
void KN(packed_gemv_i2s)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    if (lowbit_i2s_row_sums_ok(m, a))
        packed_gemv_i2s_row(m, r0, r1, a, y);
    else
        packed_gemv_k(128, m, r0, r1, a, y);
}

/* The AMD twins: a row group at a time, the run prefetched into L1; the pair role one range after
 * the other (two runs side by side streamed slower there than one) */
void KN_AMDPF(packed_gemv_i2s)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               float *y) {
    if (lowbit_i2s_row_sums_ok(m, a))
        i2s_row_walk(1, m, r0, r1, a, y);
    else
        packed_gemv_k(128, m, r0, r1, a, y);
}

void KN_AMDPF(packed_gemv_pair_i2s)(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                    int64_t b1, const lowbit_act *a, float *y) {
    KN_AMDPF(packed_gemv_i2s)(m, a0, a1, a, y);
    KN_AMDPF(packed_gemv_i2s)(m, b0, b1, a, y);
}

void KN(packed_gemv_pair)(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
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
        i2s_rows(2, 0, m, rgs, a, stot, y);
    }
    if (a0 + 4 * npair < a1) packed_gemv_i2s_row(m, a0 + 4 * npair, a1, a, y); /* A's rows past B's */
}

#endif /* LOWBIT_PACKED_INL_H */
