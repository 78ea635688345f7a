/* AVX-512 VNNI + VBMI kernels of the dense base-3 layout (TQ1_0 / PTQ1_0, packed.h above struct
 * lowbit_matrix): the GEMV decodes the trits in registers, bit-exact with lowbit_base3_gemv_ref
 * (and so with the 2-bit packed and the file-layout references); the GEMM decodes a task's rows
 * into the 2-bit layout and runs the AVX-512 2-bit GEMM on them.  Listed in kernel_list.inc with
 * `when vbmi` (the avx512vnni variant does not require VBMI; these do).
 *
 * A byte v = 84 t4 + r, r = t0 + 3 t1 + 9 t2 + 27 t3 < 81, so v >> 2 is below 21, in [21, 42) or
 * in [42, 63) as t4 is 0, 1 or 2: a vpermb of v >> 2 (a 16-bit shift: vpermb reads the low 6 bits
 * only) gives t4, a second one 84 t4, and a vpermi2b of r = v - 84 t4 the 2-bit layout's byte of
 * t0..t3 (t0 | t1 << 2 | t2 << 4 | t3 << 6).  The GEMM decodes so; the GEMV skips the t4 lookup
 * and feeds vpdpbusd 84 t4 and each plane k of that byte masked in place (4^k t_k), a plane an
 * accumulator, and divides the exact multiples out at the group's end (decode64_gemv).
 *
 * A row set's unit is 8 vectors, vector j holding bytes 4j..4j+3 of the unit of each of the 16
 * rows (a lane a row), so vpdpbusd against the broadcast activation quad of plane k accumulates
 * each row's sums in its own lane: no horizontal reduction, and each group's float step --
 * acc += (float)(isum - s[g]) * (dw * d[g]), rounded product then add (the library is built with
 * -ffp-contract=off) -- runs for 16 rows at once, in group order: a period's groups 0..3 as their
 * units end, its group 4 (plane 4 of all its units) after them.  (A 4-row layout with a row per
 * 256-bit half, as the 2-bit kernels read, spent a third of its ops reducing each group.)
 */
#include <immintrin.h>
#include <string.h>

#include "../internal.h"
#include "pf_l1-inl.h"
#include "sets16-inl.h"
#include "../platform.h" /* lowbit_once */

#define AI static inline __attribute__((always_inline))

/* Software prefetch of both lines of each tile this far ahead in its run, into L2, in the _l2pf
 * entries for Intel cores (the same choice as the 2-bit 8-row kernels, packed_avx512vnni.c), and LOWBIT_PF_BASE3_NEAR ahead
 * into L1: with the L2 prefetch alone the decode waited on L2 (docs/PERFORMANCE.md#weight-slabs). */
#ifndef LOWBIT_PF_BASE3_INTEL
#define LOWBIT_PF_BASE3_INTEL 16384
#endif
#ifndef LOWBIT_PF_BASE3_NEAR
#define LOWBIT_PF_BASE3_NEAR 1024
#endif
/* The other entries (AMD cores) read a set at a time, one run of memory (no paired entry), and
 * prefetch each line into L1 (lowbit_pf_l1_amd, pf_l1-inl.h). */
/* Vectors the decode runs ahead of the dot products in those entries */
#define B3_AHEAD 4
/* t4 and 84 t4 by v >> 2; the 2-bit byte of t0..t3 by r (128 entries, r < 81 used) */
static _Alignas(64) uint8_t TABLES[4][64];

typedef struct {
    __m512i t4, t84, lo, hi;
} b3_tables;

static void tables_fill(void) {
    for (int x = 0; x < 64; x++) {
        TABLES[0][x] = (uint8_t)(x >= 42 ? 2 : x >= 21 ? 1 : 0);
        TABLES[1][x] = (uint8_t)(84 * TABLES[0][x]);
    }
    for (int r = 0; r < 128; r++) {
        const int v = r < 81 ? r : 0;
        TABLES[2 + r / 64][r % 64] =
            (uint8_t)(v % 3 | (v / 3 % 3) << 2 | (v / 9 % 3) << 4 | (v / 27 % 3) << 6);
    }
}

AI b3_tables tables_load(void) {
    return (b3_tables){_mm512_load_si512(TABLES[0]), _mm512_load_si512(TABLES[1]),
                       _mm512_load_si512(TABLES[2]), _mm512_load_si512(TABLES[3])};
}

/* 64 code bytes -> the 2-bit byte of their trits 0..3 (*c) and trit 4 (*t4) */
AI void decode64(__m512i v, const b3_tables *T, __m512i *c, __m512i *t4) {
    const __m512i w = _mm512_srli_epi16(v, 2);
    *t4 = _mm512_permutexvar_epi8(w, T->t4);
    const __m512i r = _mm512_sub_epi8(v, _mm512_permutexvar_epi8(w, T->t84));
    *c = _mm512_permutex2var_epi8(T->lo, r, T->hi);
}

/* The GEMV's decode: decode64 without its t4 lookup.  Plane 4 goes to vpdpbusd as 84 t4 (at most
 * 168, an unsigned byte), so its sums come out 84 times theirs: exact, divided out once a period. */
AI void decode64_gemv(__m512i v, const b3_tables *T, __m512i *c, __m512i *t84) {
    *t84 = _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 2), T->t84);
    *c = _mm512_permutex2var_epi8(T->lo, _mm512_sub_epi8(v, *t84), T->hi);
}

/* NS row sets of one GEMV step (1, or 2 far apart: paired tasks), NA accumulators of each plane
 * per set (independent vpdpbusd chains).  Plane k of the 2-bit byte c is masked in place (no
 * shift), so P[k] sums 4^k times plane k's products; P[4] is plane 4 (group 4) at 84 times. */
#define NA_OF(NS) (2 / (NS))

/* Each set's base t[s] as an opaque register b[s]: the prefetches and loads then address it with
 * a displacement, where gcc otherwise keeps an induction variable per address (more than there
 * are registers: spilled, and moved back through vector ports). */
AI void opaque_bases(const int NS, const uint8_t *const t[2], const uint8_t *b[2]) {
    for (int s = 0; s < NS; s++) {
        b[s] = t[s];
        __asm__("" : "+r"(b[s]));
    }
}

/* One unit of the NS sets (t[s]: its 512 bytes in set s): q[k] the slice of plane k; X4 0 in
 * the tail (no plane 4).  Fully unrolled, so that the accumulators stay in registers. */
AI void unit16(const int NS, const int PF, const int X4, const uint8_t *const t[2],
               const int8_t *const q[5], const b3_tables *T, __m512i P[2][5][2]) {
    const int NA = NA_OF(NS);
    const uint8_t *b[2];
    opaque_bases(NS, t, b);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const int ac = j % NA;
#pragma GCC unroll 2
        for (int s = 0; s < NS; s++) {
            if (PF) {
                _mm_prefetch((const char *)(b[s] + 64 * j + PF), _MM_HINT_T1);
                _mm_prefetch((const char *)(b[s] + 64 * j + LOWBIT_PF_BASE3_NEAR), _MM_HINT_T0);
            }
            __m512i c, t84;
            decode64_gemv(_mm512_loadu_si512(b[s] + 64 * j), T, &c, &t84);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                P[s][k][ac] = _mm512_dpbusd_epi32(
                    P[s][k][ac], _mm512_and_si512(c, _mm512_set1_epi8((char)(3 << (2 * k)))),
                    sets16_quad(q[k] + 4 * j));
            if (X4) P[s][4][ac] = _mm512_dpbusd_epi32(P[s][4][ac], t84, sets16_quad(q[4] + 4 * j));
        }
    }
}

/* The same unit of one set with the decode B3_AHEAD vectors ahead of the dot products (the AMD
 * entries; the _l2pf instances keep unit16).  Each vector's dot products wait on a chain of two
 * lookups (load, shift, vpermb, sub, vpermi2b, and: ~25 cycles on some cores); issued that much
 * earlier, the core has later vectors' decodes to run beside them (one set has no second set's
 * vector to fill the wait).  The steps are asm because gcc 12 adds each vpdpbusd into a fresh
 * register and copies it back and hoists a unit's quads into registers it then spills; volatile,
 * so that they stay in the order written.
 *
 * decode_step: decode64_gemv of the 64 bytes at v.  A tail vector decodes the same way: its
 * plane 4 holds zeros, so t84 = 0 and c is the lookup of the bytes themselves. */
AI void decode_step(const uint8_t *v, const b3_tables *T, __m512i *c, __m512i *t84) {
    __asm__ volatile("vmovdqu64 %[v], %[c]\n\t"
                     "vpsrlw $2, %[c], %[t]\n\t"
                     "vpermb %[t84], %[t], %[t]\n\t"
                     "vpsubb %[t], %[c], %[c]\n\t"
                     "vpermi2b %[hi], %[lo], %[c]"
                     : [c] "=&v"(*c), [t] "=&v"(*t84)
                     : [v] "m"(*(const __m512i *)v), [t84] "v"(T->t84), [lo] "v"(T->lo),
                       [hi] "v"(T->hi));
}

/* dot_step: planes 0..3 of c masked in place (M[k]) into P[0..3] against the quads at qa + 32 k;
 * X4: 84 t4 into P[4] against the quad at q4.  Each quad is a broadcast operand: with one set a
 * quad serves one vpdpbusd, and a broadcast of its own would be one op more. */
AI void dot_step(const int X4, __m512i c, __m512i t84, const __m512i M[4], const int8_t *qa,
                 const int8_t *q4, __m512i P[5]) {
    __m512i w;
#define B3_PLANES                                                                                  \
    "vpandd %[m0], %[c], %[w]\n\t"                                                                 \
    "vpdpbusd (%[qa])%{1to16%}, %[w], %[p0]\n\t"                                                    \
    "vpandd %[m1], %[c], %[w]\n\t"                                                                 \
    "vpdpbusd 32(%[qa])%{1to16%}, %[w], %[p1]\n\t"                                                  \
    "vpandd %[m2], %[c], %[w]\n\t"                                                                 \
    "vpdpbusd 64(%[qa])%{1to16%}, %[w], %[p2]\n\t"                                                  \
    "vpandd %[m3], %[c], %[w]\n\t"                                                                 \
    "vpdpbusd 96(%[qa])%{1to16%}, %[w], %[p3]"
#define B3_OPERANDS                                                                                \
    [p0] "+v"(P[0]), [p1] "+v"(P[1]), [p2] "+v"(P[2]), [p3] "+v"(P[3]), [w] "=&v"(w)               \
    : [c] "v"(c), [m0] "v"(M[0]), [m1] "v"(M[1]), [m2] "v"(M[2]), [m3] "v"(M[3]), [qa] "r"(qa),    \
      "m"(*(const int8_t(*)[100])qa)
    if (X4)
        __asm__ volatile("vpdpbusd %[q4]%{1to16%}, %[t], %[p4]\n\t" B3_PLANES
                         : [p4] "+v"(P[4]), B3_OPERANDS, [t] "v"(t84),
                           [q4] "m"(*(const int32_t *)q4));
    else
        __asm__ volatile(B3_PLANES : B3_OPERANDS);
#undef B3_PLANES
#undef B3_OPERANDS
}

/* unit16 of one set with the decode ahead: D[i] holds the unit's vector i decoded (c, 84 t4), on
 * return the vectors at nx (the next unit, or at the run's end any of its vectors) */
AI void unit16_ahead(const int X4, const uint8_t *const t[2], const uint8_t *const nx[2],
                     const int8_t *const q[5], const b3_tables *T, const __m512i M[4],
                     __m512i D[B3_AHEAD][2], __m512i P[2][5][2]) {
    const uint8_t *b[2];
    opaque_bases(1, t, b);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const int ac = j % 2;
        lowbit_pf_l1_amd(b[0] + 64 * j);
        __m512i c, t84;
        decode_step(j + B3_AHEAD < 8 ? b[0] + 64 * (j + B3_AHEAD)
                                     : nx[0] + 64 * (j + B3_AHEAD - 8),
                    T, &c, &t84);
        __m512i A[5];
        for (int k = 0; k < 5; k++) A[k] = P[0][k][ac];
        dot_step(X4, D[0][0], D[0][1], M, q[0] + 4 * j, q[4] + 4 * j, A);
        for (int k = 0; k < 5; k++) P[0][k][ac] = A[k];
        for (int i = 0; i + 1 < B3_AHEAD; i++) D[i][0] = D[i + 1][0], D[i][1] = D[i + 1][1];
        D[B3_AHEAD - 1][0] = c, D[B3_AHEAD - 1][1] = t84;
    }
}

/* The group's integer sums of one set: planes 0..3's accumulators, each divided by its 4^k
 * (exact: every term is a multiple) */
AI __m512i acc_sum(const int NA, __m512i P[5][2]) {
    __m512i sum = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        __m512i p = P[k][0];
        for (int i = 1; i < NA; i++) p = _mm512_add_epi32(p, P[k][i]);
        sum = _mm512_add_epi32(sum, _mm512_srai_epi32(p, 2 * k));
    }
    return sum;
}

/* Plane 4's sums of one set: its accumulators divided by 84 (exact): by 4 with a shift, then by
 * 21 as a product with 21's inverse mod 2^32 */
AI __m512i acc_sum84(const int NA, __m512i P[5][2]) {
    __m512i p = P[4][0];
    for (int i = 1; i < NA; i++) p = _mm512_add_epi32(p, P[4][i]);
    return _mm512_mullo_epi32(_mm512_srai_epi32(p, 2), _mm512_set1_epi32((int)0x3cf3cf3du));
}

/* Row sets R[0..NS) of a matrix of S slices a group (4: PTQ1_0, 8: TQ1_0); PF the prefetch
 * distance of the _l2pf instances, a constant in each, or 0: one set (NS 1), unit16_ahead */
AI void rows16(const int NS, const int S, const int PF, const lowbit_matrix *m, const int64_t R[2],
               const int64_t lim[4], const lowbit_act *a, const b3_tables *T, float *y) {
    const int64_t G = 32 * S, ng = m->cols / G, np = ng / 5, nu = m->nunits;
    const int NA = NA_OF(NS);
    const uint8_t *t[2];
    for (int s = 0; s < NS; s++) t[s] = m->codes + R[s] * nu * 512;
    __m512 acc[2];
    __m512i P[2][5][2], D[B3_AHEAD][2], M[4]; /* D, M: unit16_ahead's (PF 0) */
    for (int k = 0; k < 4; k++) M[k] = _mm512_set1_epi8((char)(3 << (2 * k)));
    for (int s = 0; s < NS; s++) {
        acc[s] = _mm512_setzero_ps();
        if (!PF) /* NS 1; the order of these lines decided gcc 12's spills in the loop */
            for (int i = 0; i < B3_AHEAD; i++) decode_step(t[s] + 64 * i, T, &D[i][0], &D[i][1]);
    }
    int64_t u = 0; /* units done */
    for (int64_t g0 = 0; g0 < ng; g0 += 5) {
        const int full = g0 / 5 < np; /* a period of 5 groups, else the tail's groups */
        for (int s = 0; s < NS; s++)
            for (int i = 0; i < NA; i++) P[s][4][i] = _mm512_setzero_si512();
        for (int j = 0; j < 5 && g0 + j < ng; j++) {
            if (j == 4) { /* group 4: plane 4 of the period's units */
                for (int s = 0; s < NS; s++)
                    acc[s] = sets16_float_step(m, R[s], a, g0 + 4, acc_sum84(NA, P[s]), acc[s]);
                break;
            }
            for (int s = 0; s < NS; s++)
                for (int k = 0; k < 4; k++)
                    for (int i = 0; i < NA; i++) P[s][k][i] = _mm512_setzero_si512();
            for (int uu = 0; uu < S / 4; uu++) {
                const int8_t *qg = a->q + (g0 + j) * G + 128 * uu, *q[5];
                for (int k = 0; k < 4; k++) q[k] = qg + 32 * k;
                q[4] = a->q + (g0 + 4) * G + 32 * (j * S / 4 + uu); /* full periods only */
                const int end = ++u == nu;
                const uint8_t *nx[2];
                for (int s = 0; s < NS; s++) nx[s] = end ? t[s] : t[s] + 512;
                if (PF && full)
                    unit16(NS, PF, 1, t, q, T, P);
                else if (PF)
                    unit16(NS, PF, 0, t, q, T, P);
                else if (full)
                    unit16_ahead(1, t, nx, q, T, M, D, P);
                else
                    unit16_ahead(0, t, nx, q, T, M, D, P);
                for (int s = 0; s < NS; s++) t[s] += 512;
            }
            for (int s = 0; s < NS; s++)
                acc[s] = sets16_float_step(m, R[s], a, g0 + j, acc_sum(NA, P[s]), acc[s]);
        }
    }
    for (int s = 0; s < NS; s++) sets16_store(m, R[s], acc[s], lim[2 * s], lim[2 * s + 1], y);
}

/* rows16 with NS, S and the prefetch distance as constants, each instance a function of its own:
 * inlined together into one dispatcher, the S = 8 (TQ1_0) instances streamed slower from DRAM,
 * although their inner loops compiled to the same instructions (docs/PERFORMANCE.md, "the base-3
 * instances as functions"). */
typedef void rows16_fn(const lowbit_matrix *m, const int64_t R[2], const int64_t lim[4],
                       const lowbit_act *a, const b3_tables *T, float *y);
#define ROWS16_INSTANCE(ns, S, PF)                                                                 \
    static __attribute__((noinline)) void rows16_##ns##_##S##_##PF(                                \
        const lowbit_matrix *m, const int64_t R[2], const int64_t lim[4], const lowbit_act *a,    \
        const b3_tables *T, float *y) {                                                            \
        rows16(ns, S, PF, m, R, lim, a, T, y);                                                     \
    }
ROWS16_INSTANCE(1, 4, 0)
ROWS16_INSTANCE(1, 8, 0)
ROWS16_INSTANCE(1, 4, LOWBIT_PF_BASE3_INTEL)
ROWS16_INSTANCE(1, 8, LOWBIT_PF_BASE3_INTEL)
ROWS16_INSTANCE(2, 4, LOWBIT_PF_BASE3_INTEL)
ROWS16_INSTANCE(2, 8, LOWBIT_PF_BASE3_INTEL)
#undef ROWS16_INSTANCE

/* The instance for NS sets of m (its group: S) at prefetch distance pf (0, one set only, or
 * LOWBIT_PF_BASE3_INTEL) */
static rows16_fn *rows16_for(int NS, int pf, const lowbit_matrix *m) {
    static rows16_fn *const BY[3][2] = {
        {rows16_1_4_0, rows16_1_8_0},
        {rows16_1_4_LOWBIT_PF_BASE3_INTEL, rows16_1_8_LOWBIT_PF_BASE3_INTEL},
        {rows16_2_4_LOWBIT_PF_BASE3_INTEL, rows16_2_8_LOWBIT_PF_BASE3_INTEL}};
    return NS == 2 && !pf ? NULL : BY[pf ? NS : 0][m->group == 256];
}

static lowbit_once g_tables_once = LOWBIT_ONCE_INIT;

static void tables_init(void) { tables_fill(); }

/* The tables and instances of one call (one set and two at a time, NULL without prefetch): the
 * walks' ctx */
typedef struct {
    b3_tables T;
    rows16_fn *one, *two;
} b3_call;

static b3_call b3_call_for(const lowbit_matrix *m, int pf) {
    lowbit_once_run(&g_tables_once, tables_init);
    return (b3_call){tables_load(), rows16_for(1, pf, m), rows16_for(2, pf, m)};
}

static inline void b3_one(const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                          const int64_t lim[4], const lowbit_act *a, float *y) {
    const b3_call *C = ctx;
    C->one(m, R, lim, a, &C->T, y);
}

static inline void b3_two(const void *ctx, const lowbit_matrix *m, const int64_t R[2],
                          const int64_t lim[4], const lowbit_act *a, float *y) {
    const b3_call *C = ctx;
    C->two(m, R, lim, a, &C->T, y);
}

static void b3_rows(const void *ctx, const lowbit_matrix *m, int64_t r0, int64_t r1,
                    const lowbit_act *a, float *y) {
    sets16_range(b3_one, ctx, m, r0, r1, a, y);
}

/* The entries at each prefetch distance: _l2pf for Intel cores, alone and paired; the others
 * (AMD cores) alone (kernel_list.inc) */
#define BASE3_GEMV(SUFFIX, PF)                                                                     \
    void base3_gemv_avx512vbmi##SUFFIX(const lowbit_matrix *m, int64_t r0, int64_t r1,             \
                                       const lowbit_act *a, float *y) {                            \
        const b3_call C = b3_call_for(m, PF);                                                      \
        b3_rows(&C, m, r0, r1, a, y);                                                              \
    }
BASE3_GEMV(, 0)
BASE3_GEMV(_l2pf, LOWBIT_PF_BASE3_INTEL)
#undef BASE3_GEMV

void base3_gemv_pair_avx512vbmi_l2pf(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                     int64_t b1, const lowbit_act *a, float *y) {
    const b3_call C = b3_call_for(m, LOWBIT_PF_BASE3_INTEL);
    sets16_pair(b3_two, b3_rows, &C, m, a0, a1, b0, b1, a, y);
}

/* ---- the GEMM: rows decoded into the 2-bit layout ---------------------------------------------
 * A unit's planes 0..3 are one 128-weight chunk of the 2-bit layout (its byte is the decoded c as
 * it is); the 2-bit chunk cc of a period's group 4 is plane 4 of its units 4 cc .. 4 cc + 3, one
 * 2-bit field each.  The decoded vectors (lane = row) are written out row by row. */

/* V[j] lane l: bytes 4j..4j+3 of row 16R + l of one chunk: to the 2-bit chunk of the rows of
 * groups [rg0, rg0 + nrg) among them */
AI void put_chunk(const __m512i V[8], int64_t R, int64_t rg0, int64_t nrg, int64_t nch,
                  int64_t chunk, uint8_t *dst) {
    _Alignas(64) uint8_t tmp[8][64];
    for (int j = 0; j < 8; j++) _mm512_store_si512((__m512i *)tmp[j], V[j]);
    for (int l = 0; l < 16; l++) {
        const int64_t g = 4 * R + l / 4 - rg0;
        if (g < 0 || g >= nrg) continue;
        uint8_t *d = dst + ((g * nch + chunk) * 4 + l % 4) * 32;
        for (int j = 0; j < 8; j++) memcpy(d + 4 * j, tmp[j] + 4 * l, 4);
    }
}

static void base3_decode(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                         uint16_t *sdst) {
    const b3_tables T = tables_load();
    const int64_t G = m->group, S = G / 32, ng = m->cols / G, np = ng / 5, per = S / 4;
    const int64_t nu = m->nunits, nch = m->nchunks;
    for (int64_t R = rg0 / 4; R * 4 < rg0 + nrg; R++) {
        const uint8_t *src = m->codes + R * nu * 512;
        __m512i X[8];
        for (int j = 0; j < 8; j++) X[j] = _mm512_setzero_si512(); /* (quiets -Wmaybe-uninitialized) */
        for (int64_t u = 0; u < nu; u++) {
            const int64_t p = u / S, uu = u % S;
            __m512i C[8];
            for (int j = 0; j < 8; j++) {
                __m512i t4;
                decode64(_mm512_loadu_si512(src + u * 512 + 64 * j), &T, &C[j], &t4);
                if (p < np) { /* plane 4 of unit uu is field uu % 4 of its chunk */
                    const __m512i f = _mm512_slli_epi16(t4, (unsigned)(2 * (uu % 4)));
                    X[j] = uu % 4 ? _mm512_or_si512(X[j], f) : f;
                }
            }
            /* planes 0..3: chunk uu % per of group 5p + uu / per (the tail alike) */
            put_chunk(C, R, rg0, nrg, nch, (5 * p + uu / per) * per + uu % per, dst);
            if (p < np && uu % 4 == 3) put_chunk(X, R, rg0, nrg, nch, (5 * p + 4) * per + uu / 4, dst);
        }
        lowbit_set_scales_decoded(m, R, rg0, nrg, sdst);
    }
}

void packed_gemm_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);

void base3_gemm_avx512vbmi(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           int64_t batch, float *y, int64_t ldy) {
    lowbit_once_run(&g_tables_once, tables_init);
    lowbit_base3_gemm_decoded(base3_decode, packed_gemm_avx512vnni, m, r0, r1, a, batch, y, ldy);
}
