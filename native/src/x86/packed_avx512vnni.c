/* AVX-512 VNNI packed GEMV (the decode path), bit-exact with lowbit_packed_gemv_ref.
 *
 * A 4-row chunk tile of the packed layout (packed.h) is 128 bytes: two zmm, rows 0-1 and rows
 * 2-3, one row per 256-bit half.  Plane k of a code byte is weight 32k + p of the chunk, so with
 * the chunk's activation codes q[32k .. 32k + 31] broadcast into both halves one vpdpbusd (u8 code
 * x s8 activation, 4 products summed into an int32 lane) accumulates exact sums: no vpmaddubsw /
 * vpmaddwd pair and no int16 bound.  Planes 0 and 2 are masked with 3 out of v and v >> 4, planes
 * 1 and 3 with 12 in place (4 x the code), into separate accumulators: one shift per 64 code bytes,
 * and the x4 sums are shifted back exactly (a multiple of 4) once per group.
 *
 * Rows go 8 at a time (two row groups, one zmm accumulator pair each per 2 rows), reduced to one
 * ymm of 8 row sums (a lane a row; with per-group scales, two groups' sums share a zmm), so the
 * float step of a group -- acc += (float)(isum - s[g]) * (dw * da), product rounded then added,
 * never fused (-ffp-contract=off) -- runs once for 8 rows in the spec's order.  Group 32 (Q2_0) is
 * packed32_avx512vnni.c.  What is not here (TQ* with cols % 256 != 0, I2_S without P2 activations)
 * falls back to the AVX2 entries (kernel_list.inc).  The ops per weight are what to cut:
 * docs/PERFORMANCE.md#vnni-packed. */
#include <immintrin.h>

#include "../internal.h"
#include "avx512_reduce.h"

#define AI static inline __attribute__((always_inline))

/* Software prefetch of the 8-row kernels: both lines of each 128-byte tile `dist` bytes ahead in
 * its run, into L2 (prefetcht1), in the _l2pf entries the list gives Intel cores: on some cores the
 * hardware prefetchers follow the two runs best alone, on others the kernels need it to stream
 * (docs/PERFORMANCE.md has the measurements per CPU). */
#ifndef LOWBIT_PF_ROWS8_INTEL
#define LOWBIT_PF_ROWS8_INTEL 16384
#endif

AI void pf_tile(const uint8_t *tile, const int dist) {
    if (dist) {
        _mm_prefetch((const char *)(tile + dist), _MM_HINT_T1);
        _mm_prefetch((const char *)(tile + dist + 64), _MM_HINT_T1);
    }
}

/* ---- 8 rows (row groups ga, gb), groups of whole chunks ---------------------------------------- */

/* acc[h] += planes 0 and 2 of rows 2h, 2h + 1 of a tile, masked with 3 out of v and v >> 4;
 * acc[2 + h] += 4 x planes 1 and 3, masked in place with 12 (one shift per 64 code bytes).  A[k]:
 * the chunk's activation codes 32k .. 32k + 31 in both halves. */
AI void tile_dp(const uint8_t *tile, const __m512i A[4], __m512i acc[4]) {
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12);
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_loadu_si512(tile + 64 * h);
        const __m512i u = _mm512_srli_epi16(v, 4); /* bits 4..7 of each byte at 0..3 */
        acc[h] = _mm512_dpbusd_epi32(acc[h], _mm512_and_si512(v, m3), A[0]);
        acc[2 + h] = _mm512_dpbusd_epi32(acc[2 + h], _mm512_and_si512(v, m12), A[1]);
        acc[h] = _mm512_dpbusd_epi32(acc[h], _mm512_and_si512(u, m3), A[2]);
        acc[2 + h] = _mm512_dpbusd_epi32(acc[2 + h], _mm512_and_si512(u, m12), A[3]);
    }
}

/* Lane r of the result = sum of the 8 lanes of row r, rows 2j and 2j + 1 being the halves of P[j] */
AI __m256i rows8_sums(const __m512i P[4]) {
    /* 128-bit quarter q: the sums of quarter q of P[0..3]; rows 2j: quarters 0 + 1 of P[j] */
    const __m512i u = tr64(tr32(P[0], P[1]), tr32(P[2], P[3]));
    /* quarter 0: rows 0, 2, 4, 6; quarter 2: rows 1, 3, 5, 7 */
    const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_i64x2(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, v));
}

/* Accumulate chunks [c0, c1) of the 8 rows of row groups at base_a, base_b: acc[0] rows 0-3,
 * acc[1] rows 4-7, as tile_dp; PF: the prefetch distance (pf_tile), a constant in each instance. */
AI void chunks8_acc(const int PF, const uint8_t *base_a, const uint8_t *base_b, const int8_t *q,
                    int64_t c0, int64_t c1, __m512i acc[2][4]) {
    for (int i = 0; i < 4; i++) acc[0][i] = acc[1][i] = _mm512_setzero_si512();
    for (int64_t c = c0; c < c1; c++) {
        const int64_t off = c * 128;
        pf_tile(base_a + off, PF);
        pf_tile(base_b + off, PF);
        __m512i A[4];
        for (int k = 0; k < 4; k++)
            A[k] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(q + off + 32 * k)));
        tile_dp(base_a + off, A, acc[0]);
        tile_dp(base_b + off, A, acc[1]);
    }
}

/* I2_S: int sums of all chunks of the 8 rows (lane = row) */
AI __m256i rows8_all_sums(const int PF, const uint8_t *base_a, const uint8_t *base_b,
                          const int8_t *q, int64_t nch) {
    __m512i acc[2][4], P[4];
    chunks8_acc(PF, base_a, base_b, q, 0, nch, acc);
    for (int j = 0; j < 4; j++) /* exact: the odd planes' sums are multiples of 4 */
        P[j] = _mm512_add_epi32(acc[j / 2][j % 2], _mm512_srai_epi32(acc[j / 2][2 + j % 2], 2));
    return rows8_sums(P);
}

/* 4 x the int sums of one group (TPG chunks from c0, at most 2) of the 8 rows, by quarters:
 * quarter q of the result holds the sums of quarter q of the 4 row pairs, so quarters 0 + 1 are
 * rows 0, 2, 4, 6 and quarters 2 + 3 rows 1, 3, 5, 7.  At most 2 chunks, an even-plane lane is
 * <= 2 x 2 x 4 x 3 x 128 = 6144 in magnitude, an int16 (with its sign extension in the high half):
 * one vpdpwssd by (4, 0) makes o + 4e per vector in place of a shift and an add.  One chunk
 * (PQ2_0 / PTQ1_0), o + 4e is 4 x a lane's 16 products, <= 4 x 16 x 3 x 128 = 24576 < 2^15: a
 * pack (not saturating here) and a vpmaddwd by 1 sum the dword pairs of two vectors. */
AI __m512i group8_quarters(const int TPG, const int PF, const uint8_t *base_a,
                           const uint8_t *base_b, const int8_t *q, int64_t c0) {
    __m512i acc[2][4], P[4];
    chunks8_acc(PF, base_a, base_b, q, c0, c0 + TPG, acc);
    const __m512i four = _mm512_set1_epi32(4);
    for (int j = 0; j < 4; j++)
        P[j] = _mm512_dpwssd_epi32(acc[j / 2][2 + j % 2], acc[j / 2][j % 2], four);
    if (TPG == 1) {
        const __m512i one = _mm512_set1_epi16(1);
        /* per quarter: P[2i] pair sums (2 lanes), then P[2i + 1]'s */
        const __m512i x = _mm512_madd_epi16(_mm512_packs_epi32(P[0], P[1]), one);
        const __m512i y = _mm512_madd_epi16(_mm512_packs_epi32(P[2], P[3]), one);
        const __m512 fx = _mm512_castsi512_ps(x), fy = _mm512_castsi512_ps(y);
        const __m512 lo = _mm512_shuffle_ps(fx, fy, _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 hi = _mm512_shuffle_ps(fx, fy, _MM_SHUFFLE(3, 1, 3, 1));
        return _mm512_add_epi32(_mm512_castps_si512(lo), _mm512_castps_si512(hi));
    }
    return tr64(tr32(P[0], P[1]), tr32(P[2], P[3]));
}

/* The lanes of a group's sums (group8_quarters' quarters 0 + 1, then 2 + 3) are rows
 * 0, 2, 4, 6, 1, 3, 5, 7; the scales are loaded in that order and the 8 results put back in row
 * order once per 8 rows. */

/* fp16 scales of block b of the 8 rows of row groups ga (rows 0..3) and gb (4..7), lanes as
 * above */
AI __m256 scales8(const lowbit_matrix *m, int64_t ga, int64_t gb, int64_t b) {
    const uint16_t *sa = m->scales + (ga * m->nscales + b) * 4;
    const uint16_t *sb = m->scales + (gb * m->nscales + b) * 4;
    const __m128i v = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)sa),
                                         _mm_loadl_epi64((const __m128i *)sb));
    const __m128i order = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    return _mm256_cvtph_ps(_mm_shuffle_epi8(v, order));
}

/* y of the rows of ga (lanes 0..3) and, if wb, gb (4..7); rows past m->rows are not written */
AI void store8(const lowbit_matrix *m, int64_t ga, int64_t gb, int wb, __m256 v, float *y) {
    float out[8];
    _mm256_storeu_ps(out, v);
    for (int i = 0; i < 4 && ga * 4 + i < m->rows; i++) y[ga * 4 + i] = out[i];
    for (int i = 0; wb && i < 4 && gb * 4 + i < m->rows; i++) y[gb * 4 + i] = out[4 + i];
}

/* acc += (float)(isum - s[g]) * (dw * d[g]) for the 8 rows' group g, product rounded then added */
AI __m256 float_step(const lowbit_matrix *m, int64_t ga, int64_t gb, const lowbit_act *a,
                     int64_t g, __m256i isum, __m256 acc) {
    const __m256 sc = _mm256_mul_ps(scales8(m, ga, gb, g), _mm256_set1_ps(a->d[g]));
    const __m256i s = _mm256_sub_epi32(isum, _mm256_set1_epi32(a->s[g]));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(s), sc));
}

/* Row groups ga, gb of a matrix whose groups are TPG whole chunks and one scale block each
 * (lowbit_pair_rows_ok: TQ2_0 / TQ1_0 TPG 2, PQ2_0 / PTQ1_0 TPG 1); TPG 0: I2_S row sums (one
 * int sum per row minus the code offset stot, one float step: exact with P2 activations,
 * lowbit_i2s_row_sums_ok). */
AI void rows8(const int TPG, const int PF, const lowbit_matrix *m, int64_t ga, int64_t gb, int wb,
              const lowbit_act *a, int32_t stot, float *y) {
    const int64_t nch = m->nchunks;
    const uint8_t *base_a = m->codes + ga * nch * 128, *base_b = m->codes + gb * nch * 128;
    if (!TPG) {
        const __m256i isum = _mm256_sub_epi32(rows8_all_sums(PF, base_a, base_b, a->q, nch),
                                              _mm256_set1_epi32(stot));
        /* exact: |isum| < 2^24 and d a power of two (or 0) */
        store8(m, ga, gb, wb, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a->d[0])), y);
        return;
    }
    const int64_t ng = nch / TPG;
    __m256 acc = _mm256_setzero_ps();
    /* Two groups' quarters to one vector of 16 sums, lanes 0-7 group g and 8-15 group g + 1: 3 ops
     * for two groups where rows8_sums' last steps take 3 for one. */
    for (int64_t g = 0; g < ng; g += 2) {
        const __m512i u0 = group8_quarters(TPG, PF, base_a, base_b, a->q, TPG * g);
        const __m512i u1 =
            g + 1 < ng ? group8_quarters(TPG, PF, base_a, base_b, a->q, TPG * (g + 1)) : u0;
        const __m512i sum = _mm512_add_epi32(_mm512_shuffle_i64x2(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                                             _mm512_shuffle_i64x2(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
        const __m512i isum = _mm512_srai_epi32(sum, 2); /* exact: 4 x the sums */
        acc = float_step(m, ga, gb, a, g, _mm512_castsi512_si256(isum), acc);
        if (g + 1 < ng)
            acc = float_step(m, ga, gb, a, g + 1, _mm512_extracti64x4_epi64(isum, 1), acc);
    }
    const __m256i to_rows = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    store8(m, ga, gb, wb, _mm256_permutevar8x32_ps(acc, to_rows), y);
}

/* ---- the 8-row kernels' entries ------------------------------------------------------------- */

/* rows8 on row groups ga0 + step * k and gb0 + step * k for k < n (wb: B's rows are real) */
AI void pairs_tpg(const int TPG, const int PF, const lowbit_matrix *m, int64_t ga0, int64_t gb0,
                  int64_t step, int64_t n, int wb, const lowbit_act *a, int32_t stot, float *y) {
    for (int64_t k = 0; k < n; k++)
        rows8(TPG, PF, m, ga0 + step * k, gb0 + step * k, wb, a, stot, y);
}

/* the kind of rows8 a matrix runs: TPG 1 or 2, 0 for I2_S row sums */
AI int rows8_kind(const lowbit_matrix *m) {
    return m->type == LOWBIT_TYPE_I2_S ? 0 : m->group == 256 ? 2 : 1;
}

/* TPG and the prefetch distance PF (0 or LOWBIT_PF_ROWS8_INTEL: the _l2pf entries) constants in
 * each instance */
AI void run_pairs(int kind, const int PF, const lowbit_matrix *m, int64_t ga0, int64_t gb0,
                  int64_t step, int64_t n, int wb, const lowbit_act *a, float *y) {
    if (kind == 2)
        pairs_tpg(2, PF, m, ga0, gb0, step, n, wb, a, 0, y);
    else if (kind == 1)
        pairs_tpg(1, PF, m, ga0, gb0, step, n, wb, a, 0, y);
    else
        pairs_tpg(0, PF, m, ga0, gb0, step, n, wb, a, lowbit_i2s_code_offset(m, a), y);
}

/* adjacent row groups in pairs (rg, rg + 1); a lone last one is read twice, B dropped */
AI void rows8_range(const int PF, const lowbit_matrix *m, int64_t r0, int64_t r1,
                    const lowbit_act *a, float *y) {
    if (r1 <= r0) return;
    const int kind = rows8_kind(m);
    const int64_t g0 = r0 / 4, ngr = (r1 - r0 + 3) / 4;
    run_pairs(kind, PF, m, g0, g0 + 1, 2, ngr / 2, 1, a, y);
    if (ngr & 1) run_pairs(kind, PF, m, g0 + ngr - 1, g0 + ngr - 1, 1, 1, 0, a, y);
}

/* I2_S in whole chunks: the row sums where the activations allow them (decided per call), else
 * the AVX2 group kernel. */
void packed_gemv_g128_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y);
AI void i2s_rows(const int PF, const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                 float *y) {
    if (lowbit_i2s_row_sums_ok(m, a))
        rows8_range(PF, m, r0, r1, a, y);
    else
        packed_gemv_g128_avx2(m, r0, r1, a, y);
}

/* packed_gemv_pair: row group k of range A and row group k of range B, far apart, as the 8 rows of
 * rows8 (two runs of memory side by side, see kernel_table.h); A's rows past B's alone. */
AI void pair_rows(const int PF, const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                  int64_t b1, const lowbit_act *a, float *y) {
    if (m->type == LOWBIT_TYPE_I2_S && !lowbit_i2s_row_sums_ok(m, a)) {
        /* I2_S's per-group path: one range after the other */
        LOWBIT_PLANNED_GEMV(m, LOWBIT_ISA_AVX512VNNI)(m, a0, a1, a, y);
        LOWBIT_PLANNED_GEMV(m, LOWBIT_ISA_AVX512VNNI)(m, b0, b1, a, y);
        return;
    }
    const int64_t npair = (b1 - b0 + 3) / 4;
    run_pairs(rows8_kind(m), PF, m, a0 / 4, b0 / 4, 1, npair, 1, a, y);
    if (a0 + 4 * npair < a1) LOWBIT_PLANNED_GEMV(m, LOWBIT_ISA_AVX512VNNI)(m, a0 + 4 * npair, a1, a, y); /* A's rows past B's */
}

/* The entries, each at a prefetch distance of its own: _l2pf for Intel cores (kernel_list.inc).
 * rows8: groups of one scale block each (lowbit_pair_rows_ok, not I2_S). */
#define ROWS8_ENTRIES(SUFFIX, PF)                                                                  \
    void packed_gemv_rows8_avx512vnni##SUFFIX(const lowbit_matrix *m, int64_t r0, int64_t r1,      \
                                              const lowbit_act *a, float *y) {                     \
        rows8_range(PF, m, r0, r1, a, y);                                                          \
    }                                                                                              \
    void packed_gemv_i2s_avx512vnni##SUFFIX(const lowbit_matrix *m, int64_t r0, int64_t r1,        \
                                            const lowbit_act *a, float *y) {                       \
        i2s_rows(PF, m, r0, r1, a, y);                                                             \
    }                                                                                              \
    void packed_gemv_pair_avx512vnni##SUFFIX(const lowbit_matrix *m, int64_t a0, int64_t a1,       \
                                             int64_t b0, int64_t b1, const lowbit_act *a,          \
                                             float *y) {                                           \
        pair_rows(PF, m, a0, a1, b0, b1, a, y);                                                    \
    }
ROWS8_ENTRIES(, 0)
ROWS8_ENTRIES(_l2pf, LOWBIT_PF_ROWS8_INTEL)
#undef ROWS8_ENTRIES
