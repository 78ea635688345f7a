/* AVX2 kernels of the BASE3F layout (TQ1_0 / PTQ1_0 in the dense base-3 geometry with file-style
 * bytes, packed.h above struct lowbit_matrix): the GEMV reads 5 trits a byte as packed, bit-exact
 * with lowbit_base3_gemv_ref; the GEMM decodes a task's rows into the 2-bit layout and runs the
 * AVX2 2-bit GEMM on them.
 *
 * A byte s_0 is a centred fraction whose base-3 digits are the trits: s_k+1 = 3 s_k (mod 256: two
 * byte adds) shifts the next trit to the top, and weight k = [s_k > 42] - [s_k < -42].  The GEMV
 * never builds codes: w = (s < -42) - (s > 42) from the two compare masks, vpsignb gives the
 * activation times w, and vpmaddubsw by ones its int16 pair sums -- 8 ops per 32 weights, no
 * tables and no code offset (the sums are of w, not of w + 1).
 *
 * A row set's unit is 8 runs of 64 bytes, run j holding bytes 4j..4j+3 of the unit of each of the
 * 16 rows; a ymm is its 8-row half, so a lane quad is a row and the broadcast activation quad of
 * plane k meets each row's 4 weights of that plane: each row's sums stay in its own lanes, and a
 * group's float step -- acc += (float)isum * (dw * d[g]), rounded product then add (the library
 * is built with -ffp-contract=off) -- runs for 8 rows at once, in group order: a period's groups
 * 0..3 as their units end, its group 4 (plane 4 of all its units) after them.  int16 bounds: a
 * lane adds 8 runs x 4 planes x S / 4 units (planes 0..3) or 8 x S (plane 4) pair sums of at most
 * 2 x 127: 64 x 254 < 32767 at S = 8. */
#include <immintrin.h>
#include <string.h>

#include "avx2-inl.h" /* LOWBIT_PF_DIST */

/* The activation quad at q (4 codes) in every lane */
AI __m256i quad(const int8_t *q) {
    int32_t v;
    memcpy(&v, q, 4);
    return _mm256_set1_epi32(v);
}

/* The weights (-1, 0, 1) of one plane of 32 bytes s, applied to the activations x: x * w */
AI __m256i times_w(__m256i s, __m256i x) {
    const __m256i p = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(42));
    const __m256i n = _mm256_cmpgt_epi8(_mm256_set1_epi8(-42), s);
    return _mm256_sign_epi8(x, _mm256_sub_epi8(n, p));
}

AI __m256i times3(__m256i s) { return _mm256_add_epi8(_mm256_add_epi8(s, s), s); }

/* One unit of one set (t: its 512 bytes): the int16 pair sums of planes 0..3 into P[h], of plane
 * 4 into P4[h] (X4: the unit has a plane 4), h the 8-row half.  q[k]: plane k's slice. */
AI void unit(const int X4, const int PF, const uint8_t *t, const int8_t *const q[5], __m256i P[2],
             __m256i P4[2]) {
    const __m256i ones = _mm256_set1_epi8(1);
#pragma GCC unroll 1
    for (int j = 0; j < 8; j++) {
        if (PF) _mm_prefetch((const char *)(t + 64 * j + PF), _MM_HINT_T0);
        __m256i s0 = _mm256_loadu_si256((const __m256i *)(t + 64 * j));
        __m256i s1 = _mm256_loadu_si256((const __m256i *)(t + 64 * j + 32));
#pragma GCC unroll 5
        for (int k = 0; k < 4 + X4; k++) {
            const __m256i x = quad(q[k] + 4 * j);
            if (k) s0 = times3(s0), s1 = times3(s1);
            const __m256i p0 = _mm256_maddubs_epi16(ones, times_w(s0, x));
            const __m256i p1 = _mm256_maddubs_epi16(ones, times_w(s1, x));
            if (k < 4)
                P[0] = _mm256_add_epi16(P[0], p0), P[1] = _mm256_add_epi16(P[1], p1);
            else
                P4[0] = _mm256_add_epi16(P4[0], p0), P4[1] = _mm256_add_epi16(P4[1], p1);
        }
    }
}

/* acc[h] += (float)isum * (dw * d[g]) for the 8 rows of half h of set R, isum from the int16
 * pair sums P[h] */
AI void float_step(const lowbit_matrix *m, int64_t R, const lowbit_act *a, int64_t g,
                   const __m256i P[2], __m256 acc[2]) {
    const uint16_t *sc = m->scales + lowbit_base3_scale_at(m, R * LOWBIT_BASE3_ROWS, g);
    const __m256 da = _mm256_set1_ps(a->d[g]);
    for (int h = 0; h < 2; h++) {
        const __m256i isum = _mm256_madd_epi16(P[h], _mm256_set1_epi16(1));
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 8 * h)));
        acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, da)));
    }
}

/* Set R's rows in [lo, hi) of a matrix of S slices a group (4: PTQ1_0, 8: TQ1_0) */
AI void set16(const int S, const int PF, const lowbit_matrix *m, int64_t R, int64_t lo, int64_t hi,
              const lowbit_act *a, float *y) {
    const int64_t G = 32 * S, ng = m->cols / G, np = ng / 5;
    const uint8_t *t = m->codes + R * m->nunits * 512;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t g0 = 0; g0 < ng; g0 += 5) {
        const int full = g0 / 5 < np; /* a period of 5 groups, else the tail's groups */
        __m256i P4[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int j = 0; j < 5 && g0 + j < ng; j++) {
            if (j == 4) { /* group 4: plane 4 of the period's units */
                float_step(m, R, a, g0 + 4, P4, acc);
                break;
            }
            __m256i P[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int uu = 0; uu < S / 4; uu++) {
                const int8_t *qg = a->q + (g0 + j) * G + 128 * uu, *q[5];
                for (int k = 0; k < 4; k++) q[k] = qg + 32 * k;
                q[4] = a->q + (g0 + 4) * G + 32 * (j * S / 4 + uu); /* full periods only */
                if (full)
                    unit(1, PF, t, q, P, P4);
                else
                    unit(0, PF, t, q, P, P4);
                t += 512;
            }
            float_step(m, R, a, g0 + j, P, acc);
        }
    }
    float out[16];
    _mm256_storeu_ps(out, acc[0]);
    _mm256_storeu_ps(out + 8, acc[1]);
    if (hi > m->rows) hi = m->rows;
    for (int l = 0; l < 16; l++) {
        const int64_t r = R * 16 + l;
        if (r >= lo && r < hi) y[r] = out[l];
    }
}

/* set16 with S and the prefetch distance as constants, each instance a function of its own (as
 * the AVX-512 base-3 instances: docs/PERFORMANCE.md, "the base-3 instances as functions") */
typedef void set16_fn(const lowbit_matrix *m, int64_t R, int64_t lo, int64_t hi,
                      const lowbit_act *a, float *y);
#define SET16_INSTANCE(S)                                                                          \
    static __attribute__((noinline)) void set16_##S(const lowbit_matrix *m, int64_t R, int64_t lo,  \
                                                    int64_t hi, const lowbit_act *a, float *y) {   \
        set16(S, LOWBIT_PF_DIST, m, R, lo, hi, a, y);                                              \
    }
SET16_INSTANCE(4)
SET16_INSTANCE(8)
#undef SET16_INSTANCE

void base3f_gemv_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                      float *y) {
    set16_fn *const one = m->group == 256 ? set16_8 : set16_4;
    if (r1 > m->rows) r1 = m->rows;
    for (int64_t R = r0 / 16; R * 16 < r1; R++) one(m, R, r0, r1, a, y);
}

/* ---- the GEMM: rows decoded into the 2-bit layout ---------------------------------------------
 * A unit's planes 0..3 are one 128-weight chunk of the 2-bit layout (byte: t0 | t1 << 2 | t2 << 4
 * | t3 << 6, t_k = [s_k > -43] + [s_k > 42]); the 2-bit chunk cc of a period's group 4 is plane 4
 * of its units 4 cc .. 4 cc + 3, one 2-bit field each. */

/* The trit (0..2) of plane s, shifted to bits `f` (a constant 1 << 2k) */
AI __m256i trit_at(__m256i s, __m256i f) {
    const __m256i hi = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(42));
    const __m256i mid = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(-43));
    return _mm256_add_epi8(_mm256_and_si256(hi, f), _mm256_and_si256(mid, f));
}

/* V[j]: bytes 4j..4j+3 of rows 16R + l (l < 16, 64 bytes a j) of one chunk: to the 2-bit chunk of
 * the rows of groups [rg0, rg0 + nrg) among them */
static void put_chunk(const uint8_t V[8][64], int64_t R, int64_t rg0, int64_t nrg, int64_t nch,
                      int64_t chunk, uint8_t *dst) {
    for (int l = 0; l < 16; l++) {
        const int64_t g = 4 * R + l / 4 - rg0;
        if (g < 0 || g >= nrg) continue;
        uint8_t *d = dst + ((g * nch + chunk) * 4 + l % 4) * 32;
        for (int j = 0; j < 8; j++) memcpy(d + 4 * j, V[j] + 4 * l, 4);
    }
}

static void base3f_decode(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                          uint16_t *sdst) {
    const int64_t G = m->group, S = G / 32, ng = m->cols / G, np = ng / 5, per = S / 4;
    const int64_t nu = m->nunits, nch = m->nchunks;
    _Alignas(32) uint8_t C[8][64], X[8][64];
    for (int64_t R = rg0 / 4; R * 4 < rg0 + nrg; R++) {
        const uint8_t *src = m->codes + R * nu * 512;
        memset(X, 0, sizeof X);
        for (int64_t u = 0; u < nu; u++) {
            const int64_t p = u / S, uu = u % S;
            for (int j = 0; j < 8; j++)
                for (int h = 0; h < 2; h++) {
                    __m256i s = _mm256_loadu_si256((const __m256i *)(src + u * 512 + 64 * j + 32 * h));
                    __m256i c = trit_at(s, _mm256_set1_epi8(1));
                    for (int k = 1; k < 4; k++) {
                        s = times3(s);
                        c = _mm256_add_epi8(c, trit_at(s, _mm256_set1_epi8((char)(1 << (2 * k)))));
                    }
                    _mm256_store_si256((__m256i *)(C[j] + 32 * h), c);
                    if (p < np) { /* plane 4 of unit uu is field uu % 4 of its chunk */
                        __m256i *x = (__m256i *)(X[j] + 32 * h);
                        const __m256i f = trit_at(times3(s), _mm256_set1_epi8((char)(1 << (2 * (uu % 4)))));
                        _mm256_store_si256(x, uu % 4 ? _mm256_add_epi8(_mm256_load_si256(x), f) : f);
                    }
                }
            /* planes 0..3: chunk uu % per of group 5p + uu / per (the tail alike) */
            put_chunk(C, R, rg0, nrg, nch, (5 * p + uu / per) * per + uu % per, dst);
            if (p < np && uu % 4 == 3) put_chunk(X, R, rg0, nrg, nch, (5 * p + 4) * per + uu / 4, dst);
        }
        lowbit_set_scales_decoded(m, R, rg0, nrg, sdst);
    }
}

void packed_gemm_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                      int64_t batch, float *y, int64_t ldy);

void base3f_gemm_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                      int64_t batch, float *y, int64_t ldy) {
    lowbit_base3_gemm_decoded(base3f_decode, packed_gemm_avx2, m, r0, r1, a, batch, y, ldy);
}
