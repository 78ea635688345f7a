/* AVX-512 VNNI packed GEMV of group-32 matrices (Q2_0), bit-exact with lowbit_packed_gemv_ref:
 * on the four-row layout, 16 rows transposed so that a lane is a row (the contract of the 8-row
 * kernels in packed_avx512vnni.c holds here too); on the rows16 layout (packed.h), which stores
 * them so, the same steps without the transpose; the paired forms, and the rows16 GEMM. */
#include <immintrin.h>

#include "../internal.h"
#include "avx512_reduce.h"
#include "pf_l1-inl.h"
#include "sets16-inl.h"

#define AI static inline __attribute__((always_inline))

/* ---- group 32 (Q2_0): 16 rows transposed, lane = row ------------------------------------------- */

/* The 16 rows of 4 row groups (tiles t = 0..3 of a chunk) are transposed by dwords so that a vector
 * X[j] holds dword j of every row, one row per lane: plane k of X[j] is weights 4j .. 4j + 3 of
 * group k of the chunk, so one vpdpbusd against the broadcast activation quad q[32k + 4j] per plane
 * accumulates group k's sum in the row's lane, no reduction.
 *
 * The transpose uses no cross-128-bit-lane shuffle: those share vpdpbusd's pipes on some cores
 * (docs/PERFORMANCE.md#q32-transpose).  A
 * tile's 128 bytes are loaded at offsets 0, 48 and 16, 64 and blended so that each vector holds
 * the same 16-byte half h of the 4 rows (rows 0, 2, 1, 3 in its 128-bit lanes); an in-lane 4 x 4
 * dword transpose of the 4 tiles' vectors then gives X[4h .. 4h + 3], lane 4L + t holding row
 * q32_row[4L + t] = 4t + (0, 2, 1, 3)[L].
 *
 * The planes are masked in place (3 << 2k: no shift) into 4^k x the sums.  Rather than shifting
 * them back and subtracting the code offset s[g] (3 + 4 vector ops a chunk), each group's
 * accumulator starts at -4^k s[g] and its activation scale is d[g] / 4^k (q32_tables, built once
 * per call): (float)(4^k x) * (dw * d / 4^k) is bit for bit (float)x * (dw * d), both products
 * being exact power-of-two scalings, while d / 4^k and dw * d / 4^k stay normal and every 4^k x is
 * an exact float (lowbit_q32_fast: |s| <= 2^16, d zero, non-finite or 2^-60 <= |d| <= 2^100; other
 * activations take the shift-and-subtract steps). */
static const int32_t q32_row[16] = {0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15};

/* Prefetch: the 4 row groups of a row set are one contiguous run of memory (4 x nchunks x 128
 * bytes) read as 4 interleaved streams.  Each chunk step prefetches the next 512 bytes of the run
 * LOWBIT_PF_Q32_SETS row sets ahead in address order, into L2 (prefetcht1).  Paired tasks (api.c,
 * packed_gemv_pair32) make a row set of 2 row groups of a task's tile and 2 of its twin half a
 * matrix away: two runs of memory, each prefetched the same way (256 bytes a chunk step, its
 * 2-row-group sets LOWBIT_PF_Q32_SETS ahead).  docs/PERFORMANCE.md#q32-prefetch. */
#ifndef LOWBIT_PF_Q32_SETS
#define LOWBIT_PF_Q32_SETS 2
#endif

AI void q32_transpose(const uint8_t *const t[4], __m512i X[8]) {
    for (int h = 0; h < 2; h++) {
        __m512i H[4];
        for (int i = 0; i < 4; i++)
            H[i] = _mm512_mask_blend_epi32(0xf0f0, _mm512_loadu_si512(t[i] + 16 * h),
                                           _mm512_loadu_si512(t[i] + 48 + 16 * h));
        const __m512i a = _mm512_unpacklo_epi32(H[0], H[1]), b = _mm512_unpackhi_epi32(H[0], H[1]);
        const __m512i c = _mm512_unpacklo_epi32(H[2], H[3]), d = _mm512_unpackhi_epi32(H[2], H[3]);
        X[4 * h + 0] = _mm512_unpacklo_epi64(a, c);
        X[4 * h + 1] = _mm512_unpackhi_epi64(a, c);
        X[4 * h + 2] = _mm512_unpacklo_epi64(b, d);
        X[4 * h + 3] = _mm512_unpackhi_epi64(b, d);
    }
}

/* isum[k] = init[k] + 4^k x the sums of group k (k < NG: 4, or 2 for a last half chunk) of the
 * chunk of the 16 rows in tiles t[0..3]; init NULL: 0 */
AI void q32_chunk(const int NG, const uint8_t *const t[4], const int8_t *q, const int32_t *init,
                  __m512i isum[4]) {
    __m512i X[8];
    q32_transpose(t, X);
    for (int k = 0; k < NG; k++) isum[k] = init ? _mm512_set1_epi32(init[k]) : _mm512_setzero_si512();
    for (int j = 0; j < 8; j++)
        for (int k = 0; k < NG; k++) {
            int32_t a4;
            memcpy(&a4, q + 32 * k + 4 * j, 4);
            const __m512i c = _mm512_and_si512(X[j], _mm512_set1_epi8((char)(3 << 2 * k)));
            isum[k] = _mm512_dpbusd_epi32(isum[k], c, _mm512_set1_epi32(a4));
        }
}

/* fp16 scales of block b of the 16 rows (q32_row's lane order) */
AI __m512 q32_scales1(const lowbit_matrix *m, const int64_t rg[4], int64_t b) {
    int64_t s[4];
    for (int i = 0; i < 4; i++) memcpy(&s[i], m->scales + (rg[i] * m->nscales + b) * 4, 8);
    const __m512 dw = _mm512_cvtph_ps(_mm256_setr_epi64x(s[0], s[1], s[2], s[3]));
    return _mm512_permutexvar_ps(_mm512_loadu_si512(q32_row), dw);
}

/* blocks b and b + 1 (16 bytes per row group), idx from q32_scale_index */
AI void q32_scales2(const lowbit_matrix *m, const int64_t rg[4], int64_t b, const __m512i idx[2],
                    __m512 dw[2]) {
    __m256i p[4];
    for (int i = 0; i < 4; i++)
        p[i] = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(m->scales + (rg[i] * m->nscales + b) * 4)));
    /* rows of row groups 0, 1 (lo) and 2, 3 (hi), block b then b + 1 for each */
    const __m512 lo = _mm512_cvtph_ps(_mm256_blend_epi32(p[0], p[1], 0xf0));
    const __m512 hi = _mm512_cvtph_ps(_mm256_blend_epi32(p[2], p[3], 0xf0));
    for (int h = 0; h < 2; h++) dw[h] = _mm512_permutex2var_ps(lo, idx[h], hi);
}

AI void q32_scale_index(__m512i idx[2]) {
    int32_t ix[2][16];
    for (int l = 0; l < 16; l++)
        for (int h = 0; h < 2; h++) {
            const int t = q32_row[l] / 4, i = q32_row[l] % 4;
            ix[h][l] = 16 * (t >> 1) + 8 * (t & 1) + 4 * h + i;
        }
    for (int h = 0; h < 2; h++) idx[h] = _mm512_loadu_si512(ix[h]);
}

/* Per call: the accumulators' start -4^k s[g] and the scales d[g] / 4^k (k = g % 4), see above */
typedef struct {
    int32_t ns[2048];
    float dq[2048];
} q32_tables;

/* 1 if the tables are filled and exact for a (at most 2048 groups) */
static int q32_tables_fill(q32_tables *T, const lowbit_act *a, int64_t ng) {
    if (ng > 2048) return 0;
    const __m512i sh = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
    /* 4^-k: the exponent of 1.0f lowered by 2k */
    const __m512 inv = _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_castps_si512(_mm512_set1_ps(1.0f)),
                                                            _mm512_slli_epi32(sh, 23)));
    __mmask16 bad = 0;
    for (int64_t g = 0; g < ng; g += 16) {
        const __mmask16 k = ng - g >= 16 ? 0xffff : (__mmask16)((1u << (ng - g)) - 1);
        const __m512i s = _mm512_maskz_loadu_epi32(k, a->s + g);
        const __m512 d = _mm512_maskz_loadu_ps(k, a->d + g), ad = _mm512_abs_ps(d);
        bad |= _mm512_cmp_epu32_mask(_mm512_add_epi32(s, _mm512_set1_epi32(65536)),
                                     _mm512_set1_epi32(131072), _MM_CMPINT_GT);
        bad |= _mm512_cmp_ps_mask(ad, _mm512_set1_ps(0x1p-60f), _CMP_LT_OQ) &
               _mm512_cmp_ps_mask(ad, _mm512_setzero_ps(), _CMP_NEQ_UQ);
        bad |= _mm512_cmp_ps_mask(ad, _mm512_set1_ps(0x1p100f), _CMP_GT_OQ) &
               _mm512_cmp_ps_mask(ad, _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
        _mm512_mask_storeu_epi32(T->ns + g, k, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sllv_epi32(s, sh)));
        _mm512_mask_storeu_ps(T->dq + g, k, _mm512_mul_ps(d, inv));
    }
    return !bad;
}

/* acc (lane = row) += the float steps of groups g0 .. g0 + NG - 1 in order, isum from q32_chunk,
 * dw[k >> 1] the scales of group k's block.  FAST: isum started at T->ns (see above). */
AI __m512 q32_float(const int NG, const int FAST, __m512 acc, const __m512i isum[4],
                    const __m512 dw[2], const lowbit_act *a, const q32_tables *T, int64_t g0) {
    for (int k = 0; k < NG; k++) {
        __m512 sc;
        __m512i x;
        if (FAST) {
            sc = _mm512_mul_ps(dw[k >> 1], _mm512_set1_ps(T->dq[g0 + k]));
            x = isum[k];
        } else {
            sc = _mm512_mul_ps(dw[k >> 1], _mm512_set1_ps(a->d[g0 + k]));
            x = _mm512_sub_epi32(_mm512_srai_epi32(isum[k], 2 * k), _mm512_set1_epi32(a->s[g0 + k]));
        }
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(x), sc));
    }
    return acc;
}

/* y of the 16 rows of row groups rg[0..3] (qk = 1 << SH, 64 or 128): chunk by chunk.  PAIRED 0:
 * the 4 row groups are one run of memory, 1: rg[0..1] and rg[2..3] are two (q32_set).  A row of
 * rg[0..1] is written if in [lim[0], lim[1]), of rg[2..3] if in [lim[2], lim[3]), and below
 * m->rows (a repeated row group writes the same values twice). */
AI void q32_rows(const int SH, const int FAST, const int PAIRED, const lowbit_matrix *m,
                 const int64_t rg[4], const lowbit_act *a, const q32_tables *T,
                 const __m512i idx[2], const int64_t lim[4], float *y) {
    /* unpaired: one range, a constant choice below (docs/PERFORMANCE.md#const-tpg) */
    const int64_t a0 = lim[0], a1 = lim[1], b0 = lim[PAIRED ? 2 : 0], b1 = lim[PAIRED ? 3 : 1];
    const int64_t nch = m->nchunks, nfull = m->cols / 128;
    const uint8_t *t[4];
    for (int i = 0; i < 4; i++) t[i] = m->codes + rg[i] * nch * 128;
    /* each run: its next 512 / RUNS bytes, LOWBIT_PF_Q32_SETS sets (4 / RUNS row groups) ahead */
    const int RUNS = PAIRED ? 2 : 1, L = 8 / RUNS;
    const uint8_t *pf = m->codes + (rg[0] + 4 / RUNS * LOWBIT_PF_Q32_SETS) * nch * 128;
    const int64_t pf_b = (rg[2] - rg[0]) * nch * 128; /* run B, PAIRED */
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < nfull; c++) {
        for (int r = 0; r < RUNS; r++)
            for (int l = 0; l < L; l++)
                _mm_prefetch((const char *)(pf + r * pf_b + 64 * L * c + 64 * l), _MM_HINT_T1);
        __m512i isum[4];
        __m512 dw[2];
        q32_chunk(4, t, a->q + c * 128, FAST ? T->ns + 4 * c : NULL, isum);
        if (SH == 6)
            q32_scales2(m, rg, 2 * c, idx, dw);
        else
            dw[0] = dw[1] = q32_scales1(m, rg, c);
        acc = q32_float(4, FAST, acc, isum, dw, a, T, 4 * c);
        for (int i = 0; i < 4; i++) t[i] += 128;
    }
    if (nfull < nch) { /* a last half chunk: groups 0, 1, one scale block */
        __m512i isum[4];
        __m512 dw[2];
        q32_chunk(2, t, a->q + nfull * 128, FAST ? T->ns + 4 * nfull : NULL, isum);
        dw[0] = q32_scales1(m, rg, (nfull * 128) >> SH);
        acc = q32_float(2, FAST, acc, isum, dw, a, T, 4 * nfull);
    }
    float out[16];
    _mm512_storeu_ps(out, acc);
    for (int l = 0; l < 16; l++) {
        const int b = q32_row[l] >= 8;
        const int64_t r = rg[q32_row[l] / 4] * 4 + q32_row[l] % 4;
        if (r >= (b ? b0 : a0) && r < (b ? b1 : a1) && r < m->rows) y[r] = out[l];
    }
}

/* What every row set of one call shares: the tables (and whether they are exact) and the scale
 * permutation */
typedef struct {
    q32_tables T;
    int fast, l1; /* l1: the rows16 AMD entry's prefetch (r16_sets) */
    __m512i idx[2];
} q32_call;

static void q32_call_init(q32_call *C, const lowbit_matrix *m, const lowbit_act *a) {
    C->fast = q32_tables_fill(&C->T, a, m->cols / 32);
    C->l1 = 0;
    q32_scale_index(C->idx);
}

/* One row set: rg[0..3] one run of memory (PAIRED 0: 4 consecutive row groups) or two far apart
 * (PAIRED 1: rg[0..1] and rg[2..3], each 2 consecutive ones). */
AI void q32_set(const int PAIRED, const q32_call *C, const lowbit_matrix *m, const int64_t rg[4],
                const lowbit_act *a, const int64_t lim[4], float *y) {
    if (m->qk == 64 && C->fast)
        q32_rows(6, 1, PAIRED, m, rg, a, &C->T, C->idx, lim, y);
    else if (m->qk == 64)
        q32_rows(6, 0, PAIRED, m, rg, a, &C->T, C->idx, lim, y);
    else
        q32_rows(7, 0, PAIRED, m, rg, a, &C->T, C->idx, lim, y);
}

/* Rows [r0, r1) of a group-32 matrix with qk 64 or 128: 4 row groups at a time, the last one of
 * the range repeated to fill the 16 lanes. */
static void q32_range(const q32_call *C, const lowbit_matrix *m, int64_t r0, int64_t r1,
                      const lowbit_act *a, float *y) {
    const int64_t last = (r1 - 1) / 4, lim[4] = {r0, r1, r0, r1};
    for (int64_t rg0 = r0 / 4; rg0 <= last; rg0 += 4) {
        int64_t rg[4];
        for (int i = 0; i < 4; i++) rg[i] = rg0 + i <= last ? rg0 + i : last;
        q32_set(0, C, m, rg, a, lim, y);
    }
}

void packed_gemv32_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                              float *y) {
    q32_call C;
    q32_call_init(&C, m, a);
    q32_range(&C, m, r0, r1, a, y);
}

/* packed_gemv_pair32: row groups k, k + 1 of range A and of range B (far apart) as one row set,
 * two runs of memory side by side (a lone last pair repeated); A's rows past B's alone.  Only
 * group 32 comes here (api.c); other qk than 64 / 128 would run unpaired. */
void packed_gemv_pair32_avx512vnni(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                   int64_t b1, const lowbit_act *a, float *y) {
    if (!(m->group == 32 && (m->qk == 64 || m->qk == 128))) {
        LOWBIT_PLANNED_GEMV(m, LOWBIT_ISA_AVX512VNNI)(m, a0, a1, a, y);
        LOWBIT_PLANNED_GEMV(m, LOWBIT_ISA_AVX512VNNI)(m, b0, b1, a, y);
        return;
    }
    q32_call C;
    q32_call_init(&C, m, a);
    const int64_t npair = (b1 - b0 + 3) / 4, lim[4] = {a0, a1, b0, b1};
    for (int64_t k = 0; k < npair; k += 2) {
        const int64_t k1 = k + 1 < npair ? k + 1 : k;
        const int64_t rg[4] = {a0 / 4 + k, a0 / 4 + k1, b0 / 4 + k, b0 / 4 + k1};
        q32_set(1, &C, m, rg, a, lim, y);
    }
    if (a0 + 4 * npair < a1) q32_range(&C, m, a0 + 4 * npair, a1, a, y);
}

/* ---- the rows16 layout (packed.h): the 16 rows of a set stored a lane a row -------------------
 * Vector j of chunk c of a set is X[j] of q32_chunk with lane l holding row 16R + l, read as it
 * lies: no transpose, and a block's 16 fp16 scales are one 32-byte run, one vcvtph2ps.  The
 * integer and float steps are q32_chunk's and q32_float's, in the same order. */

/* isum[k] = init[k] + 4^k x the sums of group k (k < NG) of the chunk at p (512 bytes) */
AI void r16_chunk(const int NG, const uint8_t *p, const int8_t *q, const int32_t *init,
                  __m512i isum[4]) {
    for (int k = 0; k < NG; k++) isum[k] = init ? _mm512_set1_epi32(init[k]) : _mm512_setzero_si512();
    for (int j = 0; j < 8; j++) {
        const __m512i x = _mm512_loadu_si512(p + 64 * j);
        for (int k = 0; k < NG; k++) {
            int32_t a4;
            memcpy(&a4, q + 32 * k + 4 * j, 4);
            const __m512i c = _mm512_and_si512(x, _mm512_set1_epi8((char)(3 << 2 * k)));
            isum[k] = _mm512_dpbusd_epi32(isum[k], c, _mm512_set1_epi32(a4));
        }
    }
}

AI __m512 r16_scales(const uint16_t *s) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)s));
}

/* Prefetch: a set is one run of nchunks x 512 bytes and the sets of a range follow each other;
 * each chunk step prefetches the next 512 bytes of each run LOWBIT_PF_Q32_SETS sets ahead (the
 * distance of q32_rows), into L2, or with L1 (the AMD entry, one set at a time) LOWBIT_PF_L1_AMD
 * ahead into L1 (pf_l1-inl.h). */

/* y of row sets R[0..NS-1] (NS 2: two ranges far apart, side by side), qk = 1 << SH (64 or
 * 128).  A row of set s is written if in [lim[2s], lim[2s + 1]) and below m->rows. */
AI void r16_sets(const int NS, const int SH, const int FAST, const int L1, const lowbit_matrix *m,
                 const int64_t R[2], const lowbit_act *a, const q32_tables *T, const int64_t lim[4],
                 float *y) {
    const int64_t nch = m->nchunks, nfull = m->cols / 128, set_bytes = nch * 512;
    const uint8_t *p[2];
    const uint16_t *sc[2];
    __m512 acc[2];
    for (int s = 0; s < NS; s++) {
        p[s] = m->codes + R[s] * set_bytes;
        sc[s] = m->scales + R[s] * m->nscales * 16;
        acc[s] = _mm512_setzero_ps();
    }
    for (int64_t c = 0; c < nfull; c++) {
        for (int s = 0; s < NS; s++)
            for (int l = 0; l < 8; l++)
                if (L1)
                    lowbit_pf_l1_amd(p[s] + 64 * l);
                else
                    _mm_prefetch((const char *)(p[s] + LOWBIT_PF_Q32_SETS * set_bytes + 64 * l),
                                 _MM_HINT_T1);
        for (int s = 0; s < NS; s++) {
            __m512i isum[4];
            __m512 dw[2];
            r16_chunk(4, p[s], a->q + c * 128, FAST ? T->ns + 4 * c : NULL, isum);
            if (SH == 6) {
                dw[0] = r16_scales(sc[s] + 2 * c * 16);
                dw[1] = r16_scales(sc[s] + (2 * c + 1) * 16);
            } else {
                dw[0] = dw[1] = r16_scales(sc[s] + c * 16);
            }
            acc[s] = q32_float(4, FAST, acc[s], isum, dw, a, T, 4 * c);
            p[s] += 512;
        }
    }
    for (int s = 0; s < NS; s++) {
        if (nfull < nch) { /* a last half chunk: groups 0, 1, one scale block */
            __m512i isum[4];
            __m512 dw[2];
            r16_chunk(2, p[s], a->q + nfull * 128, FAST ? T->ns + 4 * nfull : NULL, isum);
            dw[0] = r16_scales(sc[s] + ((nfull * 128) >> SH) * 16);
            acc[s] = q32_float(2, FAST, acc[s], isum, dw, a, T, 4 * nfull);
        }
        const int64_t base = R[s] * 16;
        int64_t lo = lim[2 * s] - base, hi = (lim[2 * s + 1] < m->rows ? lim[2 * s + 1] : m->rows) - base;
        lo = lo < 0 ? 0 : lo;
        hi = hi > 16 ? 16 : hi;
        if (hi > lo)
            _mm512_mask_storeu_ps(y + base, (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), acc[s]);
    }
}

/* The walks' steps (sets16-inl.h), ctx the call's q32_call */
AI void r16_step(const int NS, const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                 const int64_t lim[4], const lowbit_act *a, float *y) {
    const q32_call *C = ctx;
    if (NS == 1 && C->l1) {
        if (m->qk == 64 && C->fast)
            r16_sets(1, 6, 1, 1, m, R, a, &C->T, lim, y);
        else if (m->qk == 64)
            r16_sets(1, 6, 0, 1, m, R, a, &C->T, lim, y);
        else
            r16_sets(1, 7, 0, 1, m, R, a, &C->T, lim, y);
    } else if (m->qk == 64 && C->fast)
        r16_sets(NS, 6, 1, 0, m, R, a, &C->T, lim, y);
    else if (m->qk == 64)
        r16_sets(NS, 6, 0, 0, m, R, a, &C->T, lim, y);
    else
        r16_sets(NS, 7, 0, 0, m, R, a, &C->T, lim, y);
}

AI void r16_one(const void *ctx, const lowbit_matrix *m, const int64_t R[2], const int64_t lim[4],
                const lowbit_act *a, float *y) {
    r16_step(1, ctx, m, R, lim, a, y);
}

AI void r16_two(const void *ctx, const lowbit_matrix *m, const int64_t R[2], const int64_t lim[4],
                const lowbit_act *a, float *y) {
    r16_step(2, ctx, m, R, lim, a, y);
}

static void r16_rows(const void *ctx, const lowbit_matrix *m, int64_t r0, int64_t r1,
                     const lowbit_act *a, float *y) {
    sets16_range(r16_one, ctx, m, r0, r1, a, y);
}

void rows16_gemv32_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                              float *y) {
    q32_call C;
    C.fast = q32_tables_fill(&C.T, a, m->cols / 32);
    C.l1 = 0;
    r16_rows(&C, m, r0, r1, a, y);
}

/* The AMD entry: a set at a time (no paired entry there), its run prefetched into L1 */
void rows16_gemv32_avx512vnni_amdpf(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                    const lowbit_act *a, float *y) {
    q32_call C;
    C.fast = q32_tables_fill(&C.T, a, m->cols / 32);
    C.l1 = 1;
    r16_rows(&C, m, r0, r1, a, y);
}

void rows16_gemv_pair32_avx512vnni(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                   int64_t b1, const lowbit_act *a, float *y) {
    q32_call C;
    C.fast = q32_tables_fill(&C.T, a, m->cols / 32);
    C.l1 = 0;
    sets16_pair(r16_two, r16_rows, &C, m, a0, a1, b0, b1, a, y);
}
