/* AVX-512 VNNI GEMV / GEMM for ggml's Q4_K and Q6_K in the file layout with Q8_K activations, equal
 * to the scalar reference (ref/kquant.c) bit for bit.  Q4_K first; Q6_K (below) takes the same
 * tiles.
 *
 * Per (row, activation) pair and 256-weight block, the reference's two exact int32 sums:
 *   isum = sum_k sc_k (q . a over sub-block k): one zmm holds 64 codes (sub-blocks 2c, 2c + 1),
 *          vpmaddubsw gives exact int16 pair sums (<= 2 * 15 * 127), vpdpwssd multiplies them by
 *          the sub-block scales into int32 lanes;
 *   msum = sum_k m_k S_k with S_k the activation's code sum over sub-block k (a table per call:
 *          it does not depend on the row), one vpmaddwd of the int32 S_k by the zero-extended m_k.
 * isum's 16 lanes are folded to 8 and msum's 8 lanes put above them; 8 pairs (8 rows for GEMV, 8
 * activations for GEMM) are reduced by one transpose-add tree into [isum: 0-7 | msum: 0-7], and
 * the float steps run lane by lane: acc += (float)isum * (d da), then acc -= (float)msum * (dmin da),
 * blocks in order.  A short last tile repeats its last row (activation) and keeps its own lanes.
 * The tables cover a window of blocks; accumulators carry across windows through y (a float
 * stored and reloaded is exact). */
#include <immintrin.h>

#include "../internal.h"
#include "avx512_reduce.h"

#define AI static inline __attribute__((always_inline))

/* blocks per table window: the tables live on the stack */
#define WINDOW 32

/* One block unpacked: 64 codes per zmm (c: weights 64c ..), the scale vectors (int16 elements
 * 0-15 sc_2c, 16-31 sc_2c+1, the vpmaddubsw pairs of sub-blocks 2c and 2c + 1) and the mins
 * zero-extended to int32. */
typedef struct {
    __m512i codes[4], sc[4];
    __m256i m;
} q4k_unpacked;

AI void q4k_unpack(const lowbit_block_q4_k *blk, q4k_unpacked *u) {
    const uint8_t *s = blk->scales;
    uint8_t sc[8], m[8];
    for (int k = 0; k < 4; k++) {
        sc[k] = s[k] & 63;
        m[k] = s[k + 4] & 63;
        sc[k + 4] = (uint8_t)((s[k + 8] & 15) | (s[k] >> 6) << 4);
        m[k + 4] = (uint8_t)((s[k + 8] >> 4) | (s[k + 4] >> 6) << 4);
    }
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c));
        u->codes[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q, m4)),
                                         _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), 1);
        u->sc[c] = _mm512_mask_set1_epi16(_mm512_set1_epi16((short)sc[2 * c]), 0xffff0000u,
                                          (short)sc[2 * c + 1]);
    }
    uint64_t m8;
    memcpy(&m8, m, 8);
    u->m = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m8));
}

/* [isum lanes folded to 8 | m_k S_k, k = 0..7] of one pair: q the activation's 256 codes of the
 * block, S its 8 sub-block sums */
AI __m512i q4k_pair(const q4k_unpacked *u, const int8_t *q, const int32_t *S) {
    __m512i vi = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        const __m512i p = _mm512_maddubs_epi16(u->codes[c], _mm512_loadu_si512(q + 64 * c));
        vi = _mm512_dpwssd_epi32(vi, p, u->sc[c]);
    }
    const __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(vi), _mm512_extracti64x4_epi64(vi, 1));
    const __m256i m8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)S), u->m);
    return _mm512_inserti64x4(_mm512_castsi256_si512(i8), m8, 1);
}

/* acc -> acc + (float)isum * (d da) - (float)msum * (dmin da): dw [d: 0-7 | dmin: 0-7], da [da: 0-7 | da: 0-7] */
AI __m256 q4k_fstep(__m256 acc, __m512i sums, __m512 dw, __m512 da) {
    const __m512 prod = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, da));
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(prod));
    return _mm256_sub_ps(acc, _mm512_extractf32x8_ps(prod, 1));
}

/* S[8 b + k] = sum of codes 32k .. 32k + 31 of block w0 + b, b < wn (|S| <= 32 * 128) */
static void sub_sums(const lowbit_act *a, int64_t w0, int64_t wn, int32_t *S) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t b = 0; b < wn; b++) {
        const int8_t *q = a->q + 256 * (w0 + b);
        __m512i v[8];
        for (int c = 0; c < 4; c++) /* lanes 0-7 sub-block 2c, 8-15 sub-block 2c + 1 */
            v[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(q + 64 * c));
        for (int c = 4; c < 8; c++) v[c] = _mm512_setzero_si512();
        /* lane c: sub-block 2c, lane 8 + c: 2c + 1 */
        int32_t t[16];
        _mm512_storeu_si512(t, reduce8(v));
        for (int c = 0; c < 4; c++) S[8 * b + 2 * c] = t[c], S[8 * b + 2 * c + 1] = t[8 + c];
    }
}

void gemv_q4_k_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    const int64_t nb = a->n / 256;
    int32_t S[8 * WINDOW];
    for (int64_t w0 = 0; w0 < nb; w0 += WINDOW) {
        const int64_t wn = nb - w0 < WINDOW ? nb - w0 : WINDOW;
        sub_sums(a, w0, wn, S);
        for (int64_t r = r0; r < r1; r += 8) {
            const int nv = r1 - r < 8 ? (int)(r1 - r) : 8;
            const lowbit_block_q4_k *row[8];
            for (int i = 0; i < 8; i++)
                row[i] = (const lowbit_block_q4_k *)((const uint8_t *)w + (r + (i < nv ? i : nv - 1)) * rb) + w0;
            float o[8] = {0};
            if (w0) memcpy(o, y + r - r0, sizeof(float) * (size_t)nv);
            __m256 acc = _mm256_loadu_ps(o);
            for (int64_t b = 0; b < wn; b++) {
                const int8_t *q = a->q + 256 * (w0 + b);
                __m512i v[8];
                uint64_t h[4] = {0, 0, 0, 0};
                for (int i = 0; i < 8; i++) {
                    const lowbit_block_q4_k *blk = row[i] + b;
                    q4k_unpacked u;
                    q4k_unpack(blk, &u);
                    v[i] = q4k_pair(&u, q, S + 8 * b);
                    h[i >> 2] |= (uint64_t)blk->d << (16 * (i & 3));
                    h[2 + (i >> 2)] |= (uint64_t)blk->dmin << (16 * (i & 3));
                }
                const __m512 dw = _mm512_cvtph_ps(_mm256_set_epi64x((long long)h[3], (long long)h[2],
                                                                    (long long)h[1], (long long)h[0]));
                acc = q4k_fstep(acc, reduce8(v), dw, _mm512_set1_ps(a->d[w0 + b]));
            }
            _mm256_storeu_ps(o, acc);
            memcpy(y + r - r0, o, sizeof(float) * (size_t)nv);
        }
    }
}

void gemm_q4_k_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    const int64_t nb = a->n / 256;
    int32_t S[8 * 8 * WINDOW]; /* [block][activation][sub-block] */
    float dt[8 * WINDOW];      /* [block][activation] */
    for (int64_t c = 0; c < batch; c += 8) {
        const int nv = batch - c < 8 ? (int)(batch - c) : 8;
        const lowbit_act *A[8];
        for (int j = 0; j < 8; j++) A[j] = &a[c + (j < nv ? j : nv - 1)];
        for (int64_t w0 = 0; w0 < nb; w0 += WINDOW) {
            const int64_t wn = nb - w0 < WINDOW ? nb - w0 : WINDOW;
            for (int j = 0; j < 8; j++) {
                int32_t s[8 * WINDOW];
                sub_sums(A[j], w0, wn, s);
                for (int64_t b = 0; b < wn; b++) {
                    memcpy(S + 64 * b + 8 * j, s + 8 * b, 8 * sizeof(int32_t));
                    dt[8 * b + j] = A[j]->d[w0 + b];
                }
            }
            for (int64_t r = r0; r < r1; r++) {
                const lowbit_block_q4_k *row = (const lowbit_block_q4_k *)((const uint8_t *)w + r * rb) + w0;
                float o[8] = {0};
                if (w0)
                    for (int j = 0; j < nv; j++) o[j] = y[(c + j) * ldy + r];
                __m256 acc = _mm256_loadu_ps(o);
                for (int64_t b = 0; b < wn; b++) {
                    q4k_unpacked u;
                    q4k_unpack(row + b, &u);
                    __m512i v[8];
                    for (int j = 0; j < 8; j++) v[j] = q4k_pair(&u, A[j]->q + 256 * (w0 + b), S + 64 * b + 8 * j);
                    const __m512 dw = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)row[b].dmin),
                                                                       _mm_set1_epi16((short)row[b].d)));
                    const __m512 da = _mm512_broadcast_f32x8(_mm256_loadu_ps(dt + 8 * b));
                    acc = q4k_fstep(acc, reduce8(v), dw, da);
                }
                _mm256_storeu_ps(o, acc);
                for (int j = 0; j < nv; j++) y[(c + j) * ldy + r] = o[j];
            }
        }
    }
}

/* ---- Q6_K ------------------------------------------------------------------------------------
 *
 * isum = sum_k sc_k (sum over sub-block k of (q - 32) a), k: 16 sub-blocks of 16 weights, sc_k
 * signed int8.  Per zmm of 64 codes (0..63), vpmaddubsw (pairs <= 2 * 63 * 127) and vpdpwssd by
 * the sub-blocks' scales; the -32 offset is 32 sum_k sc_k S_k with S_k the activation's code sum
 * over sub-block k (a table per call), one vpmaddwd of the int32 S_k by the scales' low 16 bits.
 * Both go in one 16-lane vector whose lanes sum to isum; 8 pairs per transpose-add tree, then
 * acc += (float)isum * (d da). */

typedef struct {
    __m512i codes[4], sc[4];
    __m512i sc32; /* sc_k in the low 16 bits of lane k */
} q6k_unpacked;

AI void q6k_unpack(const lowbit_block_q6_k *blk, q6k_unpacked *u) {
    const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
    /* zmm 2h + p: weights 128h + 64p ..; p = 0 the low nibbles of ql[64h ..] with qh bits 0-1
     * (first 32 weights) and 2-3 (next 32), p = 1 the high nibbles with qh bits 4-5 and 6-7 */
    for (int h = 0; h < 2; h++) {
        const __m512i L = _mm512_loadu_si512(blk->ql + 64 * h);
        const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h)));
        /* upper 256 bits take the qh bits 2 higher than the lower */
        const __m512i H0 = _mm512_mask_srli_epi16(H, 0xffff0000u, H, 2);
        const __m512i H1 = _mm512_srli_epi16(H0, 4);
        u->codes[2 * h] = _mm512_or_si512(_mm512_and_si512(L, m4),
                                          _mm512_slli_epi16(_mm512_and_si512(H0, m3), 4));
        u->codes[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                              _mm512_slli_epi16(_mm512_and_si512(H1, m3), 4));
    }
    const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)blk->scales)));
    for (int z = 0; z < 4; z++) { /* int16 element e of zmm z: sub-block 4z + e / 8 */
        const __m512i idx = _mm512_set_epi64(
            0x0003000300030003ll + (int64_t)(4 * z) * 0x0001000100010001ll,
            0x0003000300030003ll + (int64_t)(4 * z) * 0x0001000100010001ll,
            0x0002000200020002ll + (int64_t)(4 * z) * 0x0001000100010001ll,
            0x0002000200020002ll + (int64_t)(4 * z) * 0x0001000100010001ll,
            0x0001000100010001ll + (int64_t)(4 * z) * 0x0001000100010001ll,
            0x0001000100010001ll + (int64_t)(4 * z) * 0x0001000100010001ll,
            (int64_t)(4 * z) * 0x0001000100010001ll, (int64_t)(4 * z) * 0x0001000100010001ll);
        u->sc[z] = _mm512_permutexvar_epi16(idx, s16);
    }
    u->sc32 = _mm512_and_si512(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk->scales)),
                               _mm512_set1_epi32(0xffff));
}

/* 16 lanes summing to the pair's isum: q the activation's 256 codes of the block, S its 16
 * sub-block sums */
AI __m512i q6k_pair(const q6k_unpacked *u, const int8_t *q, const int32_t *S) {
    __m512i vi = _mm512_slli_epi32(_mm512_madd_epi16(_mm512_loadu_si512(S), u->sc32), 5);
    vi = _mm512_sub_epi32(_mm512_setzero_si512(), vi);
    for (int z = 0; z < 4; z++)
        vi = _mm512_dpwssd_epi32(vi, _mm512_maddubs_epi16(u->codes[z], _mm512_loadu_si512(q + 64 * z)), u->sc[z]);
    return vi;
}

/* acc + (float)isum * (d da), isum the two halves of the tree's lanes */
AI __m256 q6k_fstep(__m256 acc, __m512i t, __m256 dw, __m256 da) {
    const __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, da)));
}

/* S[16 b + k] = sum of codes 16k .. 16k + 15 of block w0 + b, b < wn (|S| <= 16 * 128) */
static void sums16(const lowbit_act *a, int64_t w0, int64_t wn, int32_t *S) {
    for (int64_t b = 0; b < wn; b++) {
        const int8_t *q = a->q + 256 * (w0 + b);
        for (int k = 0; k < 16; k++) {
            int32_t t = 0;
            for (int j = 0; j < 16; j++) t += q[16 * k + j];
            S[16 * b + k] = t;
        }
    }
}

void gemv_q6_k_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    const int64_t nb = a->n / 256;
    int32_t S[16 * WINDOW];
    for (int64_t w0 = 0; w0 < nb; w0 += WINDOW) {
        const int64_t wn = nb - w0 < WINDOW ? nb - w0 : WINDOW;
        sums16(a, w0, wn, S);
        for (int64_t r = r0; r < r1; r += 8) {
            const int nv = r1 - r < 8 ? (int)(r1 - r) : 8;
            const lowbit_block_q6_k *row[8];
            for (int i = 0; i < 8; i++)
                row[i] = (const lowbit_block_q6_k *)((const uint8_t *)w + (r + (i < nv ? i : nv - 1)) * rb) + w0;
            float o[8] = {0};
            if (w0) memcpy(o, y + r - r0, sizeof(float) * (size_t)nv);
            __m256 acc = _mm256_loadu_ps(o);
            for (int64_t b = 0; b < wn; b++) {
                const int8_t *q = a->q + 256 * (w0 + b);
                __m512i v[8];
                uint64_t h[2] = {0, 0};
                for (int i = 0; i < 8; i++) {
                    const lowbit_block_q6_k *blk = row[i] + b;
                    q6k_unpacked u;
                    q6k_unpack(blk, &u);
                    v[i] = q6k_pair(&u, q, S + 16 * b);
                    h[i >> 2] |= (uint64_t)blk->d << (16 * (i & 3));
                }
                const __m256 dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)h[1], (long long)h[0]));
                acc = q6k_fstep(acc, reduce8(v), dw, _mm256_set1_ps(a->d[w0 + b]));
            }
            _mm256_storeu_ps(o, acc);
            memcpy(y + r - r0, o, sizeof(float) * (size_t)nv);
        }
    }
}

void gemm_q6_k_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    const int64_t nb = a->n / 256;
    int32_t S[8 * 16 * WINDOW]; /* [block][activation][sub-block] */
    float dt[8 * WINDOW];       /* [block][activation] */
    for (int64_t c = 0; c < batch; c += 8) {
        const int nv = batch - c < 8 ? (int)(batch - c) : 8;
        const lowbit_act *A[8];
        for (int j = 0; j < 8; j++) A[j] = &a[c + (j < nv ? j : nv - 1)];
        for (int64_t w0 = 0; w0 < nb; w0 += WINDOW) {
            const int64_t wn = nb - w0 < WINDOW ? nb - w0 : WINDOW;
            for (int j = 0; j < 8; j++) {
                int32_t s[16 * WINDOW];
                sums16(A[j], w0, wn, s);
                for (int64_t b = 0; b < wn; b++) {
                    memcpy(S + 128 * b + 16 * j, s + 16 * b, 16 * sizeof(int32_t));
                    dt[8 * b + j] = A[j]->d[w0 + b];
                }
            }
            for (int64_t r = r0; r < r1; r++) {
                const lowbit_block_q6_k *row = (const lowbit_block_q6_k *)((const uint8_t *)w + r * rb) + w0;
                float o[8] = {0};
                if (w0)
                    for (int j = 0; j < nv; j++) o[j] = y[(c + j) * ldy + r];
                __m256 acc = _mm256_loadu_ps(o);
                for (int64_t b = 0; b < wn; b++) {
                    q6k_unpacked u;
                    q6k_unpack(row + b, &u);
                    __m512i v[8];
                    for (int j = 0; j < 8; j++) v[j] = q6k_pair(&u, A[j]->q + 256 * (w0 + b), S + 128 * b + 16 * j);
                    const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi16((short)row[b].d));
                    acc = q6k_fstep(acc, reduce8(v), dw, _mm256_loadu_ps(dt + 8 * b));
                }
                _mm256_storeu_ps(o, acc);
                for (int j = 0; j < nv; j++) y[(c + j) * ldy + r] = o[j];
            }
        }
    }
}
