/* AVX-512 VNNI kernels of the rows16 layout (packed.h: 2-bit codes in 16-row sets, a lane a
 * row): the GEMVs of groups of one scale block (128: PQ2_0, PTQ1_0; 256: TQ2_0, TQ1_0, listed
 * for AMD cores only), bit-exact with lowbit_packed_gemv_ref,
 * and the GEMM of any rows16 matrix, which decodes a task's rows into the canonical layout and
 * runs the canonical AVX-512 GEMM on them.  The group-32 GEMV (Q2_0) shares the transposing
 * kernel's integer and float steps: packed32_avx512vnni.c.
 *
 * A set's chunk (one activation group of 128 weights) is 8 vectors, vector j holding bytes
 * 4j..4j+3 of the chunk of each of the 16 rows.  Plane k of a byte, masked in place (4^k x the
 * code, no shift), against the broadcast activation quad q[32k + 4j .. + 3] accumulates each row's
 * sums in its own lane, so a group ends in 3 shifts and adds and one float step --
 * acc += (float)(isum - s[g]) * (dw * d[g]), rounded product then add (-ffp-contract=off) -- for 16
 * rows at once, where the 4-row tiles of the canonical layout reduce every group across lanes. */
#include <immintrin.h>
#include <string.h>

#include "../internal.h"
#include "pf_l1-inl.h"
#include "sets16-inl.h"

#define AI static inline __attribute__((always_inline))

/* Software prefetch of each code line this far ahead in its run, into L2, on Intel (the choice of
 * the 2-bit 8-row kernels, packed_avx512vnni.c); PF_L1, lowbit_pf_l1_amd's into L1 (the _l1pf
 * entries: one run a call, unpaired) */
#ifndef LOWBIT_PF_ROWS16_INTEL
#define LOWBIT_PF_ROWS16_INTEL 16384
#endif
#define PF_L1 (-1)

/* NS row sets in one step (1, or 2 far apart: paired tasks), NA_OF(NS) accumulators of each plane
 * per set: eight independent vpdpbusd chains either way. */
#define NA_OF(NS) (2 / (NS))

/* P[s][k][i] += 4^k x plane k's products of one chunk of set s (t[s]: its 512 bytes); q: the
 * group's 128 activation codes.  Fully unrolled, so that the accumulators stay in registers. */
AI void chunk16(const int NS, const int PF, const uint8_t *const t[2], const int8_t *q,
                __m512i P[2][4][2]) {
    const int NA = NA_OF(NS);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
#pragma GCC unroll 2
        for (int s = 0; s < NS; s++) {
            if (PF > 0) _mm_prefetch((const char *)(t[s] + 64 * j + PF), _MM_HINT_T1);
            if (PF == PF_L1) lowbit_pf_l1_amd(t[s] + 64 * j);
            const __m512i v = _mm512_loadu_si512(t[s] + 64 * j);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                P[s][k][j % NA] = _mm512_dpbusd_epi32(
                    P[s][k][j % NA], _mm512_and_si512(v, _mm512_set1_epi8((char)(3 << (2 * k)))),
                    sets16_quad(q + 32 * k + 4 * j));
        }
    }
}

/* The group's integer sums of one set: each plane's accumulators divided by its 4^k (exact: every
 * term is a multiple) */
AI __m512i group_sum(const int NA, __m512i P[4][2]) {
    __m512i sum = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        __m512i p = P[k][0];
        for (int i = 1; i < NA; i++) p = _mm512_add_epi32(p, P[k][i]);
        sum = _mm512_add_epi32(sum, k ? _mm512_srai_epi32(p, 2 * k) : p);
    }
    return sum;
}

/* Row sets R[0..NS); lim[2s], lim[2s + 1]: the rows of set s to write; TPG the chunks of a group
 * of one scale block (1: PQ2_0 / PTQ1_0, 2: TQ2_0 / TQ1_0); PF the prefetch distance; all
 * constants in each instance. */
AI void sets16(const int TPG, const int NS, const int PF, const lowbit_matrix *m, const int64_t R[2],
               const int64_t lim[4], const lowbit_act *a, float *y) {
    const int64_t nch = m->nchunks;
    const int NA = NA_OF(NS);
    const uint8_t *t[2];
    __m512 acc[2];
    __m512i P[2][4][2];
    for (int s = 0; s < NS; s++) {
        t[s] = m->codes + R[s] * nch * 512;
        acc[s] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g * TPG < nch; g++) {
        for (int s = 0; s < NS; s++)
            for (int k = 0; k < 4; k++)
                for (int i = 0; i < NA; i++) P[s][k][i] = _mm512_setzero_si512();
        for (int c = 0; c < TPG; c++) {
            chunk16(NS, PF, t, a->q + 128 * (TPG * g + c), P);
            for (int s = 0; s < NS; s++) t[s] += 512;
        }
        for (int s = 0; s < NS; s++)
            acc[s] = sets16_float_step(m, R[s], a, g, group_sum(NA, P[s]), acc[s]);
    }
    for (int s = 0; s < NS; s++) sets16_store(m, R[s], acc[s], lim[2 * s], lim[2 * s + 1], y);
}

/* sets16 with TPG, NS and the prefetch distance as constants, each instance a function of its own
 * (as the base-3 kernels' instances: docs/PERFORMANCE.md, "the base-3 instances as functions") */
typedef void sets16_fn(const lowbit_matrix *m, const int64_t R[2], const int64_t lim[4],
                       const lowbit_act *a, float *y);
#define SETS16_INSTANCE(tpg, ns, PF)                                                               \
    static __attribute__((noinline)) void sets16_##tpg##_##ns##_##PF(                              \
        const lowbit_matrix *m, const int64_t R[2], const int64_t lim[4], const lowbit_act *a,    \
        float *y) {                                                                                \
        sets16(tpg, ns, PF, m, R, lim, a, y);                                                      \
    }
#define SETS16_INSTANCES(tpg)                                                                      \
    SETS16_INSTANCE(tpg, 1, 0)                                                                     \
    SETS16_INSTANCE(tpg, 2, 0)                                                                     \
    SETS16_INSTANCE(tpg, 1, LOWBIT_PF_ROWS16_INTEL)                                                \
    SETS16_INSTANCE(tpg, 2, LOWBIT_PF_ROWS16_INTEL)
SETS16_INSTANCES(1)
#undef SETS16_INSTANCES
SETS16_INSTANCE(1, 1, PF_L1)
SETS16_INSTANCE(2, 1, 0)
SETS16_INSTANCE(2, 2, 0)
SETS16_INSTANCE(2, 1, PF_L1)
#undef SETS16_INSTANCE

/* The instances of one call, a set (one) and two sets (two) at a time: the ctx of the walks'
 * steps and range (sets16-inl.h) */
typedef struct {
    sets16_fn *one, *two;
} sets16_call;

static inline void call_one(const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                            const int64_t lim[4], const lowbit_act *a, float *y) {
    ((const sets16_call *)ctx)->one(m, R, lim, a, y);
}

static inline void call_two(const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                            const int64_t lim[4], const lowbit_act *a, float *y) {
    ((const sets16_call *)ctx)->two(m, R, lim, a, y);
}

static void call_rows(const void *ctx, const lowbit_matrix *m, int64_t r0, int64_t r1,
                      const lowbit_act *a, float *y) {
    sets16_range(call_one, ctx, m, r0, r1, a, y);
}

/* The group-128 entries, alone and paired, at each prefetch distance: _l2pf for Intel cores
 * (kernel_list.inc) */
#define ROWS16_ENTRIES(SUFFIX, PF)                                                                 \
    void rows16_gemv128_avx512vnni##SUFFIX(const lowbit_matrix *m, int64_t r0, int64_t r1,         \
                                           const lowbit_act *a, float *y) {                        \
        const sets16_call C = {sets16_1_1_##PF, NULL};                                             \
        call_rows(&C, m, r0, r1, a, y);                                                            \
    }                                                                                              \
    void rows16_gemv_pair128_avx512vnni##SUFFIX(const lowbit_matrix *m, int64_t a0, int64_t a1,    \
                                                int64_t b0, int64_t b1, const lowbit_act *a,       \
                                                float *y) {                                        \
        const sets16_call C = {sets16_1_1_##PF, sets16_1_2_##PF};                                  \
        sets16_pair(call_two, call_rows, &C, m, a0, a1, b0, b1, a, y);                             \
    }
ROWS16_ENTRIES(, 0)
ROWS16_ENTRIES(_l2pf, LOWBIT_PF_ROWS16_INTEL)
#undef ROWS16_ENTRIES

/* The _l1pf entries (AMD cores with a 48 KB L1, group 128 and 256): one run a call, each line
 * prefetched into L1; the job pairs no tasks there (kernel_list.inc) */
void rows16_gemv128_avx512vnni_l1pf(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                    const lowbit_act *a, float *y) {
    const sets16_call C = {sets16_1_1_PF_L1, NULL};
    call_rows(&C, m, r0, r1, a, y);
}

void rows16_gemv256_avx512vnni_l1pf(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                    const lowbit_act *a, float *y) {
    const sets16_call C = {sets16_2_1_PF_L1, NULL};
    call_rows(&C, m, r0, r1, a, y);
}

/* The group-256 entries: on AMD cores only, where they read a token faster than the 8-row kernels
 * of the canonical layout (docs/PERFORMANCE.md) */
void rows16_gemv256_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               float *y) {
    const sets16_call C = {sets16_2_1_0, NULL};
    call_rows(&C, m, r0, r1, a, y);
}

void rows16_gemv_pair256_avx512vnni(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                    int64_t b1, const lowbit_act *a, float *y) {
    const sets16_call C = {sets16_2_1_0, sets16_2_2_0};
    sets16_pair(call_two, call_rows, &C, m, a0, a1, b0, b1, a, y);
}

/* ---- the GEMM ---------------------------------------------------------------------------------- */

void packed_gemm_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);

/* Row groups [rg0, rg0 + nrg) in the canonical layout (a lowbit_base3_decode_fn).  Chunk c of a
 * set is the dword matrix X[j] lane l (j < 8, l < 16); the canonical tile of the set's row group
 * g is rows 4g..4g+3, dwords 0..7 each: two rounds of in-lane unpacks give A[i] (B[i]) = dwords 0..3
 * (4..7) of row 4k + i in 128-bit lane k, and two of vshufi32x4 gather lane g of A[0], B[0],
 * A[1], B[1] (rows 4g, 4g + 1) and of A[2], B[2], A[3], B[3] (rows 4g + 2, 4g + 3). */
static void r16_decode(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                       uint16_t *sdst) {
    const int64_t nch = m->nchunks;
    for (int64_t R = rg0 / 4; R * 4 < rg0 + nrg; R++) {
        const uint8_t *src = m->codes + R * nch * 512;
        for (int64_t c = 0; c < nch; c++, src += 512) {
            __m512i X[8], T[8], A[4], B[4], C[4], D[4], tile[4][2];
            for (int j = 0; j < 8; j++) X[j] = _mm512_loadu_si512(src + 64 * j);
            for (int h = 0; h < 8; h += 2) {
                T[h] = _mm512_unpacklo_epi32(X[h], X[h + 1]);
                T[h + 1] = _mm512_unpackhi_epi32(X[h], X[h + 1]);
            }
            A[0] = _mm512_unpacklo_epi64(T[0], T[2]), A[1] = _mm512_unpackhi_epi64(T[0], T[2]);
            A[2] = _mm512_unpacklo_epi64(T[1], T[3]), A[3] = _mm512_unpackhi_epi64(T[1], T[3]);
            B[0] = _mm512_unpacklo_epi64(T[4], T[6]), B[1] = _mm512_unpackhi_epi64(T[4], T[6]);
            B[2] = _mm512_unpacklo_epi64(T[5], T[7]), B[3] = _mm512_unpackhi_epi64(T[5], T[7]);
            for (int i = 0; i < 4; i++) {
                C[i] = _mm512_shuffle_i32x4(A[i], B[i], _MM_SHUFFLE(1, 0, 1, 0));
                D[i] = _mm512_shuffle_i32x4(A[i], B[i], _MM_SHUFFLE(3, 2, 3, 2));
            }
            for (int h = 0; h < 2; h++) { /* rows 4g + 2h, 4g + 2h + 1 */
                tile[0][h] = _mm512_shuffle_i32x4(C[2 * h], C[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0));
                tile[1][h] = _mm512_shuffle_i32x4(C[2 * h], C[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1));
                tile[2][h] = _mm512_shuffle_i32x4(D[2 * h], D[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0));
                tile[3][h] = _mm512_shuffle_i32x4(D[2 * h], D[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1));
            }
            for (int g = 0; g < 4; g++) {
                const int64_t G = 4 * R + g - rg0;
                if (G < 0 || G >= nrg) continue;
                for (int h = 0; h < 2; h++)
                    _mm512_storeu_si512(dst + (G * nch + c) * 128 + 64 * h, tile[g][h]);
            }
        }
        lowbit_set_scales_decoded(m, R, rg0, nrg, sdst);
    }
}

/* The GEMM: a task's rows decoded into the canonical layout, the 2-bit GEMM on them */
void rows16_gemm_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    lowbit_base3_gemm_decoded(r16_decode, packed_gemm_avx512vnni, m, r0, r1, a, batch, y, ldy);
}
