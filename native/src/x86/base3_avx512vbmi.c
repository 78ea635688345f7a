/* AVX-512 VNNI + VBMI kernels of the dense base-3 layout (TQ1_0 / PTQ1_0, internal.h above struct
 * lowbit_matrix): the GEMV decodes the trits in registers, bit-exact with lowbit_base3_gemv_ref
 * (and so with the 2-bit packed and the file-layout references); the GEMM decodes a task's rows
 * into the 2-bit layout and runs the table's 2-bit GEMM on them.
 *
 * A byte v = 84 t4 + r, r = t0 + 3 t1 + 9 t2 + 27 t3 < 81, so v >> 2 is below 21, in [21, 42) or
 * in [42, 63) as t4 is 0, 1 or 2: a vpermb of v >> 2 (a 16-bit shift: vpermb reads the low 6 bits
 * only) gives t4, a second one 84 t4, and a vpermi2b of r = v - 84 t4 the 2-bit layout's byte of
 * t0..t3 (t0 | t1 << 2 | t2 << 4 | t3 << 6), which the VNNI kernels' masks then split into planes
 * (planes 0 and 2 masked with 3 out of the byte and the byte >> 4, planes 1 and 3 with 12 in
 * place, into separate accumulators as 4 x their sums), and t4 goes to vpdpbusd as it is.
 *
 * A 4-row unit tile is 128 bytes, two zmm of two rows each (a row per 256-bit half); rows go 8 at
 * a time (two row groups), their group sums reduced to one ymm, a lane a row, and each group's
 * float step -- acc += (float)(isum - s[g]) * (dw * d[g]), rounded product then add (the library
 * is built with -ffp-contract=off) -- runs in group order: a period's groups 0..3 as their units
 * end, its group 4 (plane 4 of all its units) after them. */
#include <cpuid.h>
#include <immintrin.h>

#include "../internal.h"
#include "avx512_reduce.h"

#define AI static inline __attribute__((always_inline))

/* Software prefetch of both lines of each tile this far ahead in its run, into L2, on Intel (the
 * same choice as the 2-bit 8-row kernels, kernels_avx512vnni.c: pf_rows8). */
#ifndef LOWBIT_PF_BASE3_INTEL
#define LOWBIT_PF_BASE3_INTEL 16384
#endif
static int pf_base3; /* 0 or LOWBIT_PF_BASE3_INTEL */

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

AI void pf_tile(const uint8_t *tile, const int dist) {
    if (dist) {
        _mm_prefetch((const char *)(tile + dist), _MM_HINT_T1);
        _mm_prefetch((const char *)(tile + dist + 64), _MM_HINT_T1);
    }
}

AI __m512i bcast32(const int8_t *q) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q));
}

/* One unit of the 8 rows (tiles ta: rows 0-3, tb: rows 4-7), zmm z = rows 2z, 2z + 1: E[z] +=
 * planes 0, 2, O[z] += 4 x planes 1, 3 against A[0..3]; X4: X[z] += plane 4 against A4 */
AI void unit8(const int X4, const uint8_t *ta, const uint8_t *tb, const __m512i A[4], __m512i A4,
              const b3_tables *T, __m512i E[4], __m512i O[4], __m512i X[4]) {
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12);
    for (int z = 0; z < 4; z++) {
        __m512i c, t4;
        decode64(_mm512_loadu_si512((z < 2 ? ta : tb) + 64 * (z & 1)), T, &c, &t4);
        const __m512i u = _mm512_srli_epi16(c, 4);
        E[z] = _mm512_dpbusd_epi32(E[z], _mm512_and_si512(c, m3), A[0]);
        O[z] = _mm512_dpbusd_epi32(O[z], _mm512_and_si512(c, m12), A[1]);
        E[z] = _mm512_dpbusd_epi32(E[z], _mm512_and_si512(u, m3), A[2]);
        O[z] = _mm512_dpbusd_epi32(O[z], _mm512_and_si512(u, m12), A[3]);
        if (X4) X[z] = _mm512_dpbusd_epi32(X[z], t4, A4);
    }
}

/* Lane r = the sum of the 8 lanes of row r, rows 2j and 2j + 1 being the halves of P[j] */
AI __m256i rows8_sums(const __m512i P[4]) {
    /* 128-bit quarter q: the sums of quarter q of P[0..3] */
    const __m512i u = tr64(tr32(P[0], P[1]), tr32(P[2], P[3]));
    /* quarter 0: rows 0, 2, 4, 6; quarter 2: rows 1, 3, 5, 7 */
    const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_i64x2(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, v));
}

/* The group sums of E, O (unit8): E + O / 4 per row.  An E lane is at most 2 x 2 units x 4 x 2 x
 * 128 = 4096 in magnitude, an int16 with its sign extension above: one vpdpwssd by (4, 0) makes
 * O + 4 E, 4 x the sums, shifted back (exactly) once they are reduced. */
AI __m256i group_sums(const __m512i E[4], const __m512i O[4]) {
    const __m512i four = _mm512_set1_epi32(4);
    __m512i P[4];
    for (int z = 0; z < 4; z++) P[z] = _mm512_dpwssd_epi32(O[z], E[z], four);
    return _mm256_srai_epi32(rows8_sums(P), 2);
}

/* acc += (float)(isum - s[g]) * (dw * d[g]) for the 8 rows (lanes in row order) */
AI __m256 float_step(const lowbit_matrix *m, int64_t ga, int64_t gb, const lowbit_act *a,
                     int64_t g, __m256i isum, __m256 acc) {
    const uint16_t *sa = m->scales + (ga * m->nscales + g) * 4;
    const uint16_t *sb = m->scales + (gb * m->nscales + g) * 4;
    const __m128i h = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)sa),
                                         _mm_loadl_epi64((const __m128i *)sb));
    const __m256 sc = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(a->d[g]));
    const __m256i s = _mm256_sub_epi32(isum, _mm256_set1_epi32(a->s[g]));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(s), sc));
}

/* y of the rows of row groups ga (0..3) and, if wb, gb (4..7); rows past m->rows not written */
AI void store8(const lowbit_matrix *m, int64_t ga, int64_t gb, int wb, __m256 v, float *y) {
    float out[8];
    _mm256_storeu_ps(out, v);
    for (int i = 0; i < 4 && ga * 4 + i < m->rows; i++) y[ga * 4 + i] = out[i];
    for (int i = 0; wb && i < 4 && gb * 4 + i < m->rows; i++) y[gb * 4 + i] = out[4 + i];
}

/* Row groups ga, gb of a matrix of S slices a group (4: PTQ1_0, 8: TQ1_0); PF the prefetch
 * distance, a constant in each instance. */
AI void rows8(const int S, const int PF, const lowbit_matrix *m, int64_t ga, int64_t gb, int wb,
              const lowbit_act *a, const b3_tables *T, float *y) {
    const int64_t G = 32 * S, ng = m->cols / G, np = ng / 5, nu = m->nunits;
    const uint8_t *ta = m->codes + ga * nu * 128, *tb = m->codes + gb * nu * 128;
    const int8_t *q = a->q;
    __m256 acc = _mm256_setzero_ps();
    __m512i E[4], O[4], X[4], A[4];
    for (int64_t p = 0; p < np; p++) {
        for (int z = 0; z < 4; z++) X[z] = _mm512_setzero_si512();
        const int8_t *q4 = q + (5 * p + 4) * G; /* group 4: slice u of the period's unit u */
        for (int j = 0; j < 4; j++) {
            for (int z = 0; z < 4; z++) E[z] = O[z] = _mm512_setzero_si512();
            for (int uu = 0; uu < S / 4; uu++) {
                const int8_t *qg = q + (5 * p + j) * G + 128 * uu;
                for (int k = 0; k < 4; k++) A[k] = bcast32(qg + 32 * k);
                pf_tile(ta, PF);
                pf_tile(tb, PF);
                unit8(1, ta, tb, A, bcast32(q4 + 32 * (j * S / 4 + uu)), T, E, O, X);
                ta += 128;
                tb += 128;
            }
            acc = float_step(m, ga, gb, a, 5 * p + j, group_sums(E, O), acc);
        }
        acc = float_step(m, ga, gb, a, 5 * p + 4, rows8_sums(X), acc);
    }
    for (int64_t g = 5 * np; g < ng; g++) { /* the tail: planes 0..3 only */
        for (int z = 0; z < 4; z++) E[z] = O[z] = _mm512_setzero_si512();
        for (int uu = 0; uu < S / 4; uu++) {
            const int8_t *qg = q + g * G + 128 * uu;
            for (int k = 0; k < 4; k++) A[k] = bcast32(qg + 32 * k);
            pf_tile(ta, PF);
            pf_tile(tb, PF);
            unit8(0, ta, tb, A, A[0], T, E, O, X);
            ta += 128;
            tb += 128;
        }
        acc = float_step(m, ga, gb, a, g, group_sums(E, O), acc);
    }
    store8(m, ga, gb, wb, acc, y);
}

/* rows8 on row groups ga0 + step * k and gb0 + step * k for k < n */
AI void run_rows(const int S, const int PF, const lowbit_matrix *m, int64_t ga0, int64_t gb0,
                 int64_t step, int64_t n, int wb, const lowbit_act *a, float *y) {
    const b3_tables T = tables_load();
    for (int64_t k = 0; k < n; k++) rows8(S, PF, m, ga0 + step * k, gb0 + step * k, wb, a, &T, y);
}

/* run_rows with S and the prefetch distance as constants */
static void run_any(const lowbit_matrix *m, int64_t ga0, int64_t gb0, int64_t step, int64_t n,
                    int wb, const lowbit_act *a, float *y) {
    if (m->group == 256) {
        if (pf_base3)
            run_rows(8, LOWBIT_PF_BASE3_INTEL, m, ga0, gb0, step, n, wb, a, y);
        else
            run_rows(8, 0, m, ga0, gb0, step, n, wb, a, y);
    } else {
        if (pf_base3)
            run_rows(4, LOWBIT_PF_BASE3_INTEL, m, ga0, gb0, step, n, wb, a, y);
        else
            run_rows(4, 0, m, ga0, gb0, step, n, wb, a, y);
    }
}

static void base3_gemv(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       float *y) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    /* adjacent row groups in pairs; a lone last one is read twice, its twin not written */
    const int64_t g0 = r0 / 4, ngr = (r1 - r0 + 3) / 4;
    run_any(m, g0, g0 + 1, 2, ngr / 2, 1, a, y);
    if (ngr & 1) run_any(m, g0 + ngr - 1, g0 + ngr - 1, 1, 1, 0, a, y);
}

/* Row group k of range A with row group k of range B, far apart, as the 8 rows of rows8: two runs
 * of memory side by side (internal.h, packed_gemv_pair); A's rows past B's alone. */
static void base3_gemv_pair(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0, int64_t b1,
                            const lowbit_act *a, float *y) {
    const int64_t npair = (b1 - b0 + 3) / 4;
    run_any(m, a0 / 4, b0 / 4, 1, npair, 1, a, y);
    base3_gemv(m, a0 + 4 * npair, a1, a, y);
}

/* ---- the GEMM: rows decoded into the 2-bit layout ---------------------------------------------
 * A unit's planes 0..3 are one 128-weight chunk of the 2-bit layout (its byte is the decoded c as
 * it is); the 2-bit chunk cc of a period's group 4 is plane 4 of its units 4 cc .. 4 cc + 3, one
 * 2-bit field each. */
static void base3_decode(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst) {
    const b3_tables T = tables_load();
    const int64_t G = m->group, S = G / 32, ng = m->cols / G, np = ng / 5, per = S / 4;
    const int64_t nu = m->nunits, nch = m->nchunks;
    for (int64_t g = 0; g < nrg; g++) {
        const uint8_t *src = m->codes + (rg0 + g) * nu * 128;
        uint8_t *out = dst + g * nch * 128;
        for (int64_t u = 0; u < nu; u++) {
            const int64_t p = u / S, uu = u % S;
            /* the chunk of planes 0..3: chunk uu % per of group 5p + uu / per (tail alike) */
            const int64_t chunk = (5 * p + uu / per) * per + uu % per;
            const int64_t x_chunk = (5 * p + 4) * per + uu / 4; /* group 4's chunk, full periods */
            for (int h = 0; h < 2; h++) {
                __m512i c, t4;
                decode64(_mm512_loadu_si512(src + u * 128 + 64 * h), &T, &c, &t4);
                _mm512_store_si512((__m512i *)(out + chunk * 128 + 64 * h), c);
                if (p < np) { /* plane 4 of unit uu is field uu % 4 of its chunk */
                    __m512i *x = (__m512i *)(out + x_chunk * 128 + 64 * h);
                    const __m512i f = _mm512_slli_epi16(t4, (unsigned)(2 * (uu % 4)));
                    _mm512_store_si512(x, uu % 4 ? _mm512_or_si512(_mm512_load_si512(x), f) : f);
                }
            }
        }
    }
}

/* the 2-bit layout GEMM of this table (gemm_avx512vnni.c), taken at registration */
static void (*gemm_2bit)(const lowbit_matrix *, int64_t, int64_t, const lowbit_act *, int64_t,
                         float *, int64_t);

static void base3_gemm(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       int64_t batch, float *y, int64_t ldy) {
    lowbit_base3_gemm_decoded(base3_decode, gemm_2bit, m, r0, r1, a, batch, y, ldy);
}

static int cpu_has_vbmi(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (c >> 1) & 1; /* CPUID.(EAX=7, ECX=0):ECX bit 1, AVX512_VBMI */
}

/* After the variant's 2-bit GEMM is registered.  Without VBMI the table keeps the 2-bit layout
 * (base3_pack 0) and the reference for base-3 matrices packed elsewhere. */
void lowbit_register_base3_avx512vbmi(lowbit_kernels *k) {
    if (!cpu_has_vbmi()) return;
    tables_fill();
    pf_base3 = lowbit_cpu_is_intel() ? LOWBIT_PF_BASE3_INTEL : 0;
    gemm_2bit = k->packed_gemm;
    k->base3_gemv = base3_gemv;
    k->base3_gemv_pair = base3_gemv_pair;
    k->base3_gemm = base3_gemm;
    k->base3_pack = 1;
}
