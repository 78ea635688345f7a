/* AVX-512 VNNI GEMV / GEMM of Q1_0 in the file layout (18-byte blocks: fp16 d, then 128 bits,
 * weight j at bit j % 8 of qs[j / 8]), equal to the scalar reference (ref/dot.c) bit for bit.
 *
 * The 128 bits of a block are two 64-bit masks as they are stored (mask bit j = weight j), so a
 * block's codes need no unpacking: kmovq loads a mask, vmovdqu8 {z} turns it into the codes
 * (2 where the bit is set, 0 elsewhere: the reference's c = 2 * bit) and vpdpbusd multiplies
 * them with 64 activation codes.  A 32-weight activation group then holds sum(c * q), and the
 * reference's isum = sum(c * q) - s[g] (s: the activation code sum): exact int32 sums.
 *
 * 8 rows at a time: each row's two zmm of a block (groups 0-1, 2-3) are reduced across the 8 rows
 * by the transpose-add tree (avx512_reduce.h) into lanes [group g: rows 0-7 | g + 1: rows 0-7],
 * and the float steps, acc += (float)isum * (dw * da), run on those lanes, groups in order (the
 * reference's roundings; -ffp-contract=off keeps the multiply and the add apart).  A last tile of
 * fewer than 8 rows repeats its last row in the missing lanes and stores only its own.
 *
 * GEMM: the same per 4 activation columns, the codes of a row made once for all 4. */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>

#include "../internal.h"
#include "avx512_reduce.h"

#define AI static inline __attribute__((always_inline))

#define Q1B ((int64_t)sizeof(lowbit_block_q1_0))
#define Q1D ((int64_t)offsetof(lowbit_block_q1_0, d))
#define Q1QS ((int64_t)offsetof(lowbit_block_q1_0, qs))

/* L2 prefetch distance of the 8-row run (as the Q8_0 GEMV's: the 8 row streams are one run of
 * memory when the tile is whole) */
#ifndef LOWBIT_PF_Q1_512
#define LOWBIT_PF_Q1_512 32768
#endif

AI uint64_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

AI __mmask64 ldmask(const uint8_t *p) {
    __mmask64 k;
    memcpy(&k, p, 8);
    return k;
}

/* fp16 scales of block b of the 8 rows, in both 256-bit halves (gathered in general-purpose
 * registers: the vector shuffle pipe is the busy one) */
AI __m512 q1_scales(const uint8_t *const row[8], int64_t b) {
    uint64_t lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        lo |= ld16(row[i] + Q1B * b + Q1D) << (16 * i);
        hi |= ld16(row[i + 4] + Q1B * b + Q1D) << (16 * i);
    }
    const __m256 d = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
    return _mm512_insertf32x8(_mm512_castps256_ps512(d), d, 1);
}

/* acc += the float steps of groups g and g + 1 (isum lanes [g: rows 0-7 | g + 1: rows 0-7]) */
AI __m256 q1_step(__m256 acc, __m512i sum, __m512 dw, const lowbit_act *a, int64_t g) {
    const __m512i s = _mm512_mask_set1_epi32(_mm512_set1_epi32(a->s[g]), 0xff00, a->s[g + 1]);
    const __m512 da = _mm512_mask_broadcastss_ps(_mm512_set1_ps(a->d[g]), 0xff00,
                                                 _mm_load_ss(a->d + g + 1));
    const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, s)),
                                   _mm512_mul_ps(dw, da));
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(p)); /* group g */
    return _mm256_add_ps(acc, _mm512_extractf32x8_ps(p, 1)); /* then g + 1 */
}

/* The 8 rows (row[i]; a whole tile's are the run [run, run + 8 rb)) against NC activation
 * columns aq[NC]: acc[j] lane i = the reference's dot of row i and column j. */
AI void q1_rows8(const int NC, const uint8_t *const row[8], const char *run, int64_t nb,
                 const lowbit_act *const *aq, __m256 acc[4]) {
    const __m512i two = _mm512_set1_epi8(2), zero = _mm512_setzero_si512();
    const char *pf = run + LOWBIT_PF_Q1_512;
    for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        if (LOWBIT_PF_Q1_512)
            for (const char *lim = run + 8 * Q1B * (b + 1) + LOWBIT_PF_Q1_512; pf < lim; pf += 64)
                _mm_prefetch(pf, _MM_HINT_T1);
        const __m512 dw = q1_scales(row, b);
        for (int h = 0; h < 2; h++) { /* weights 64 h .. 64 h + 63: groups 4 b + 2 h, + 1 */
            __m512i c[8];
            for (int i = 0; i < 8; i++)
                c[i] = _mm512_maskz_mov_epi8(ldmask(row[i] + Q1B * b + Q1QS + 8 * h), two);
            for (int j = 0; j < NC; j++) {
                const __m512i av = _mm512_loadu_si512(aq[j]->q + 128 * b + 64 * h);
                __m512i v[8];
                for (int i = 0; i < 8; i++) v[i] = _mm512_dpbusd_epi32(zero, c[i], av);
                acc[j] = q1_step(acc[j], reduce8(v), dw, aq[j], 4 * b + 2 * h);
            }
        }
    }
}

/* The 8 row pointers of the tile at row r of [.., r1) (missing rows: the last one again) */
AI void q1_tile(const uint8_t *w, int64_t rb, int64_t r, int64_t r1, const uint8_t *row[8]) {
    for (int i = 0; i < 8; i++) row[i] = w + (r + i < r1 ? r + i : r1 - 1) * rb;
}

void gemv_q1_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    const int64_t nb = a->n / 128;
    for (int64_t r = r0; r < r1; r += 8) {
        const uint8_t *row[8];
        q1_tile((const uint8_t *)w, rb, r, r1, row);
        __m256 acc[4];
        q1_rows8(1, row, (const char *)row[0], nb, &a, acc);
        if (r + 8 <= r1) {
            _mm256_storeu_ps(y + r - r0, acc[0]);
        } else {
            float out[8];
            _mm256_storeu_ps(out, acc[0]);
            memcpy(y + r - r0, out, sizeof(float) * (size_t)(r1 - r));
        }
    }
}

/* Columns outermost, 4 at a time (their activations stay in L1 while the rows stream by). */
void gemm_q1_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    const int64_t nb = a[0].n / 128;
    for (int64_t j = 0; j < batch; j += 4) {
        const lowbit_act *aq[4];
        for (int jj = 0; jj < 4; jj++) aq[jj] = &a[j + jj < batch ? j + jj : batch - 1];
        for (int64_t r = r0; r < r1; r += 8) {
            const uint8_t *row[8];
            q1_tile((const uint8_t *)w, rb, r, r1, row);
            __m256 acc[4];
            q1_rows8(4, row, (const char *)row[0], nb, aq, acc);
            for (int jj = 0; jj < 4 && j + jj < batch; jj++) {
                float out[8];
                _mm256_storeu_ps(out, acc[jj]);
                memcpy(y + (j + jj) * ldy + r, out, sizeof(float) * (size_t)(r1 - r < 8 ? r1 - r : 8));
            }
        }
    }
}
