/* The 256-bit kernels of the rows16 layout (packed.h: 2-bit codes in 16-row sets, a lane a row),
 * the body of rows16_avx2.c and rows16_avxvnni.c, which differ in the multiply-accumulate step
 * only (dot_step-inl.h): the GEMVs of group 32 (Q2_0), of group 128 (PQ2_0, PTQ1_0) and of group
 * 256 (TQ2_0, TQ1_0), bit-exact with lowbit_packed_gemv_ref, and the
 * GEMM of any rows16 matrix, which decodes a task's rows into the canonical layout and runs the
 * canonical 256-bit GEMM on them (as rows16_avx512vnni.c does).
 *
 * A set's chunk is 8 vectors of 64 bytes, vector j holding bytes 4j..4j+3 of the chunk of each of
 * the 16 rows: as two ymm, rows 0..7 and 8..15 of the set, a row per 32-bit lane.  That is the
 * operand packed_gemv32 builds by transposing 8 rows' tiles (packed32-inl.h), read here as it
 * lies, with the same planes: 0 and 1 of the byte, 2 and 3 of the byte shifted right by 4, planes
 * 1 and 3 masked in place (code x 4, shifted out of the int32 sum exactly), so that one shift per
 * vector serves both steps and vpmaddubsw's int16 lanes cannot saturate over the 8 vectors of a
 * chunk (two products a lane, codes at most 12, activations at most 128 in size).  The float step is the spec's, per group in group order.
 * Each GEMV has an AMD twin (_amdpf) that prefetches its run into L1 (pf_l1-inl.h) in place of
 * the L2 prefetch a set ahead. */
#ifndef LOWBIT_ROWS16_INL_H
#define LOWBIT_ROWS16_INL_H
#include "packed_step-inl.h"
#include "pf_l1-inl.h"

void KN(packed_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                     int64_t batch, float *y, int64_t ldy);

/* isum[h][k] (k < NG): the sums of group k of the chunk at p of rows 8h..8h+7 of the set */
AI void r16_sums(const int NG, const uint8_t *p, const int8_t *q, __m256i isum[2][4]) {
#if DOT_INT16
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
#endif
    dot_t s[2][4];
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < NG; k++) s[h][k] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i X[2];
        for (int h = 0; h < 2; h++)
            X[h] = _mm256_load_si256((const __m256i *)(p + 64 * j + 32 * h));
#if DOT_INT16
        __m256i Y[2];
        for (int h = 0; h < 2; h++) Y[h] = NG > 2 ? _mm256_srli_epi16(X[h], 4) : X[h];
#endif
        for (int k = 0; k < NG; k++) {
            int32_t a4;
            memcpy(&a4, q + 32 * k + 4 * j, 4);
            const __m256i b = _mm256_set1_epi32(a4);
            for (int h = 0; h < 2; h++) {
#if DOT_INT16
                const __m256i c = _mm256_and_si256(k < 2 ? X[h] : Y[h], k & 1 ? m12 : m3);
                s[h][k] = dot_add(s[h][k], dot_mul(c, b));
#else
                const __m256i c = _mm256_and_si256(X[h], _mm256_set1_epi8((char)(3 << 2 * k)));
                s[h][k] = dot_acc(s[h][k], c, b);
#endif
            }
        }
        /* vector by vector: gcc otherwise hoists the products of the chunk and spills them */
        if (NG > 2)
            __asm__ volatile("" : "+x"(s[0][0]), "+x"(s[0][1]), "+x"(s[0][2]), "+x"(s[0][3]),
                             "+x"(s[1][0]), "+x"(s[1][1]), "+x"(s[1][2]), "+x"(s[1][3]));
        else
            __asm__ volatile("" : "+x"(s[0][0]), "+x"(s[0][1]), "+x"(s[1][0]), "+x"(s[1][1]));
    }
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < NG; k++) {
            isum[h][k] = dot_wide(s[h][k]);
#if DOT_INT16
            if (k & 1) isum[h][k] = _mm256_srai_epi32(isum[h][k], 2); /* exact: a multiple of 4 */
#else
            if (k) isum[h][k] = _mm256_srai_epi32(isum[h][k], 2 * k);
#endif
        }
}

/* fp16 scales of block b of rows 8h..8h+7 of the set whose scales start at sc */
AI __m256 r16_dw(const uint16_t *sc, int64_t b, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + b * 16 + 8 * h)));
}

/* acc[h] += the NG groups of chunk c of the set (codes p, scales sc), in group order */
AI void r16_chunk(const int NG, const int SH, const uint8_t *p, const uint16_t *sc, int64_t c,
                  const lowbit_act *a, __m256 acc[2]) {
    __m256i isum[2][4];
    r16_sums(NG, p, a->q + c * 128, isum);
    for (int k = 0; k < NG; k++) {
        const int64_t g = 4 * c + k, b = (g * 32) >> SH;
        const __m256i off = _mm256_set1_epi32(a->s[g]);
        const __m256 da = _mm256_set1_ps(a->d[g]);
        for (int h = 0; h < 2; h++)
            acc[h] = group_acc8(acc[h], isum[h][k], off, r16_dw(sc, b, h), da);
    }
}

/* Prefetch: the sets of a range are one run of memory; each chunk step prefetches the 512 bytes
 * this many sets ahead, into L2 (the hardware prefetchers alone leave the GEMV well short of the
 * read bandwidth), or in the AMD entries (_amdpf, L1 set) LOWBIT_PF_L1_AMD ahead into L1 */
#ifndef LOWBIT_PF_R16_SETS
#define LOWBIT_PF_R16_SETS 1
#endif

AI void r16_prefetch(const int L1, const uint8_t *p, int64_t nch) { /* the chunk at p */
    for (int l = 0; l < 8; l++)
        if (L1)
            lowbit_pf_l1_amd(p + 64 * l);
        else
            _mm_prefetch((const char *)(p + LOWBIT_PF_R16_SETS * nch * 512 + 64 * l), _MM_HINT_T1);
}

/* y of the rows of set R in [r0, r1) (rows past m->rows: r1 is clipped to it) */
AI void r16_store(const __m256 acc[2], int64_t R, int64_t r0, int64_t r1, float *y) {
    float out[16];
    _mm256_storeu_ps(out, acc[0]);
    _mm256_storeu_ps(out + 8, acc[1]);
    for (int l = 0; l < 16; l++)
        if (R * 16 + l >= r0 && R * 16 + l < r1) y[R * 16 + l] = out[l];
}

/* Rows [r0, r1) of a group-32 matrix with qk = 1 << SH, a set at a time; a set's rows
 * past m->rows are its zero padding, read and not written. */
AI void r16_rows(const int SH, const int L1, const lowbit_matrix *m, int64_t r0, int64_t r1,
                 const lowbit_act *a, float *y) {
    const int64_t nch = m->nchunks, nfull = m->cols / 128;
    if (r1 > m->rows) r1 = m->rows;
    for (int64_t R = r0 / 16; R * 16 < r1; R++) {
        const uint8_t *p = m->codes + R * nch * 512;
        const uint16_t *sc = m->scales + R * m->nscales * 16;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t c = 0; c < nfull; c++, p += 512) {
            r16_prefetch(L1, p, nch);
            r16_chunk(4, SH, p, sc, c, a, acc);
        }
        if (nfull < nch) r16_chunk(2, SH, p, sc, nfull, a, acc); /* a last half chunk */
        r16_store(acc, R, r0, r1, y);
    }
}

/* Group 32, qk 64: Q2_0 (kernel_list.inc: group32_qk64) */
void KN(rows16_gemv32)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       float *y) {
    r16_rows(6, 0, m, r0, r1, a, y);
}

void KN_AMDPF(rows16_gemv32)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                             float *y) {
    r16_rows(6, 1, m, r0, r1, a, y);
}

/* Rows [r0, r1) of a matrix whose activation group is one scale block of TPG whole chunks (1:
 * group 128, qk 128; 2: group 256, qk 256): a group's four planes summed per chunk, then one float
 * step a group for 16 rows, where the 4-row tiles of the canonical layout reduce it across lanes. */
AI void r16_group_rows(const int TPG, const int L1, const lowbit_matrix *m, int64_t r0,
                       int64_t r1, const lowbit_act *a, float *y) {
    const int64_t nch = m->nchunks;
    if (r1 > m->rows) r1 = m->rows;
    for (int64_t R = r0 / 16; R * 16 < r1; R++) {
        const uint8_t *p = m->codes + R * nch * 512;
        const uint16_t *sc = m->scales + R * m->nscales * 16;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t g = 0; g * TPG < nch; g++) {
            __m256i sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int c = 0; c < TPG; c++, p += 512) {
                r16_prefetch(L1, p, nch);
                __m256i isum[2][4];
                r16_sums(4, p, a->q + (g * TPG + c) * 128, isum);
                for (int h = 0; h < 2; h++)
                    sum[h] = _mm256_add_epi32(
                        _mm256_add_epi32(sum[h], _mm256_add_epi32(isum[h][0], isum[h][1])),
                        _mm256_add_epi32(isum[h][2], isum[h][3]));
            }
            const __m256i off = _mm256_set1_epi32(a->s[g]);
            const __m256 da = _mm256_set1_ps(a->d[g]);
            for (int h = 0; h < 2; h++) acc[h] = group_acc8(acc[h], sum[h], off, r16_dw(sc, g, h), da);
        }
        r16_store(acc, R, r0, r1, y);
    }
}

/* Group 128, qk 128: PQ2_0, PTQ1_0 (kernel_list.inc: group128_qk128) */
void KN(rows16_gemv128)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    r16_group_rows(1, 0, m, r0, r1, a, y);
}

void KN_AMDPF(rows16_gemv128)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                              float *y) {
    r16_group_rows(1, 1, m, r0, r1, a, y);
}

/* Group 256 in whole groups: TQ2_0, TQ1_0 (kernel_list.inc: group256_whole) */
void KN(rows16_gemv256)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    r16_group_rows(2, 0, m, r0, r1, a, y);
}

void KN_AMDPF(rows16_gemv256)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                              float *y) {
    r16_group_rows(2, 1, m, r0, r1, a, y);
}

/* ---- the GEMM ------------------------------------------------------------------------------ */

/* Row groups [rg0, rg0 + nrg) in the canonical layout (a lowbit_base3_decode_fn): each half of a
 * set's chunk, X[j] = dword j of 8 rows, is a dword transpose away from the 8 rows' 32-byte
 * chunks, which the canonical layout keeps whole. */
static void KN(r16_decode)(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                           uint16_t *sdst) {
    const int64_t nch = m->nchunks;
    for (int64_t R = rg0 / 4; R * 4 < rg0 + nrg; R++) {
        const uint8_t *src = m->codes + R * nch * 512;
        for (int64_t c = 0; c < nch; c++, src += 512)
            for (int h = 0; h < 2; h++) {
                __m256i X[8], T[8], U[8];
                for (int j = 0; j < 8; j++)
                    X[j] = _mm256_load_si256((const __m256i *)(src + 64 * j + 32 * h));
                for (int i = 0; i < 8; i += 2) {
                    T[i] = _mm256_unpacklo_epi32(X[i], X[i + 1]);
                    T[i + 1] = _mm256_unpackhi_epi32(X[i], X[i + 1]);
                }
                /* U[4e + i]: dwords 4e..4e+3 of row i (128-bit lane 0) and of row i + 4 (lane 1) */
                for (int e = 0; e < 2; e++)
                    for (int f = 0; f < 2; f++) {
                        const __m256i a0 = T[4 * e + f], a1 = T[4 * e + f + 2];
                        U[4 * e + 2 * f] = _mm256_unpacklo_epi64(a0, a1);
                        U[4 * e + 2 * f + 1] = _mm256_unpackhi_epi64(a0, a1);
                    }
                for (int l = 0; l < 8; l++) { /* row 8h + l: 128-bit lane l / 4 of U[.. l % 4] */
                    const __m256i lo = U[l % 4], hi = U[4 + l % 4];
                    const __m256i row = l < 4 ? _mm256_permute2x128_si256(lo, hi, 0x20)
                                              : _mm256_permute2x128_si256(lo, hi, 0x31);
                    const int64_t r = 8 * h + l, G = 4 * R + r / 4 - rg0;
                    if (G < 0 || G >= nrg) continue;
                    _mm256_storeu_si256((__m256i *)(dst + ((G * nch + c) * 4 + r % 4) * 32), row);
                }
            }
        lowbit_set_scales_decoded(m, R, rg0, nrg, sdst);
    }
}

void KN(rows16_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                     int64_t batch, float *y, int64_t ldy) {
    lowbit_base3_gemm_decoded(KN(r16_decode), KN(packed_gemm), m, r0, r1, a, batch, y, ldy);
}

#endif /* LOWBIT_ROWS16_INL_H */
