/* GEMV / GEMM for ggml's Q5_0, Q4_K and Q6_K with A8 activations (Q8_0 / Q8_K rules), equal
 * to the scalar reference (ref/kquant.c) bit for bit: the int32 sums of a weight block are exact,
 * and the float combination is the reference's, block by block, each product rounded before its
 * add (the library's -ffp-contract=off keeps the compiler from fusing them).
 *
 * Codes are unsigned (Q5_0 0..31, Q4_K 0..15, Q6_K 0..63), so one vpmaddubsw (code x signed
 * activation, |a| <= 127) gives exact int16 pair sums: at most 2 * 63 * 127 = 16002.  Q6_K's -32
 * offset is a second vpmaddubsw of 32 x a subtracted in int16 (|pair| <= 2 * 32 * 127), then one
 * vpmaddwd by the sub-block scales; Q4_K's mins multiply the sub-block sums of a (vpmaddubsw of
 * 1 x a) the same way.  Q5_0 subtracts 16 * s[g] once per block.  GEMV runs 4 rows and GEMM 4
 * activations per weight block, their int32 sums reduced together (see the tiles below).
 * The body of kquant_avx2.c and kquant_avxvnni.c, which differ in the multiply-accumulate steps
 * only (dot_step-inl.h): a sum of code x activation products (vpdpbusd for vpmaddubsw + vpmaddwd
 * by ones) and an int16 x int16 step by the sub-block scales (vpdpwssd for vpmaddwd + vpaddd). */
#ifndef LOWBIT_KQUANT_INL_H
#define LOWBIT_KQUANT_INL_H
#include <immintrin.h>

#include <stdlib.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))

#include "dot_step-inl.h"

AI int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

AI float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* ---- Q5_0 --------------------------------------------------------------------------------- */

/* Bit j of qh -> 0x10 in byte j. */
AI __m256i q5_high_bits(const uint8_t *qhp) {
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                            2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

static float dot_q5_0(const uint8_t *row, const lowbit_act *a) {
    const __m256i m4 = _mm256_set1_epi8(15);
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 32; b++) {
        const lowbit_block_q5_0 *blk = (const lowbit_block_q5_0 *)row + b;
        __m128i qs = _mm_loadu_si128((const __m128i *)blk->qs);
        __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), m4);
        c = _mm256_or_si256(c, q5_high_bits(blk->qh));
        __m256i av = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));
        int32_t isum = hsum_epi32(dot_wide(dot_mul(c, av))) - 16 * a->s[b];
        acc += (float)isum * (h2f(blk->d) * a->d[b]);
    }
    return acc;
}

/* ---- Q4_K --------------------------------------------------------------------------------- */

static float dot_q4_k(const uint8_t *row, const lowbit_act *a) {
    const __m256i m4 = _mm256_set1_epi8(15), one8 = _mm256_set1_epi8(1);
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q4_k *blk = (const lowbit_block_q4_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        int sc[8], m[8];
        for (int k = 0; k < 8; k++) lowbit_q4_k_scale_min(blk->scales, k, &sc[k], &m[k]);
        __m256i vi = _mm256_setzero_si256(), vm = vi;
        for (int c = 0; c < 4; c++) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c));
            __m256i lo = _mm256_and_si256(qv, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
            __m256i a0 = _mm256_loadu_si256((const __m256i *)(q + 64 * c));
            __m256i a1 = _mm256_loadu_si256((const __m256i *)(q + 64 * c + 32));
            __m256i s0 = _mm256_set1_epi16((short)sc[2 * c]), s1 = _mm256_set1_epi16((short)sc[2 * c + 1]);
            __m256i n0 = _mm256_set1_epi16((short)m[2 * c]), n1 = _mm256_set1_epi16((short)m[2 * c + 1]);
            vi = dot16_acc(vi, _mm256_maddubs_epi16(lo, a0), s0);
            vi = dot16_acc(vi, _mm256_maddubs_epi16(hi, a1), s1);
            vm = dot16_acc(vm, _mm256_maddubs_epi16(one8, a0), n0);
            vm = dot16_acc(vm, _mm256_maddubs_epi16(one8, a1), n1);
        }
        const float da = a->d[b];
        acc += (float)hsum_epi32(vi) * (h2f(blk->d) * da);
        acc -= (float)hsum_epi32(vm) * (h2f(blk->dmin) * da);
    }
    return acc;
}

/* ---- Q6_K --------------------------------------------------------------------------------- */

/* Q6_K codes 0..63 of weights 128h + 32k + l (k = 0..3, l = 0..31) of a block, in activation order:
 * low nibbles from ql, the two high bits of weight 32k + l sit at bits 2k of qh[32h + l]. */
AI void q6k_codes(const lowbit_block_q6_k *blk, int h, __m256i c[4]) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const __m256i L0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
    const __m256i L1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
    const __m256i H = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
    c[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
    c[1] = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
    c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30));
    c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
}

static float dot_q6_k(const uint8_t *row, const lowbit_act *a) {
    const __m256i k32 = _mm256_set1_epi8(32);
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q6_k *blk = (const lowbit_block_q6_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        __m256i vi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i c[4];
            q6k_codes(blk, h, c);
            for (int k = 0; k < 4; k++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(q + 128 * h + 32 * k));
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(c[k], av), _mm256_maddubs_epi16(k32, av));
                const int8_t *sc = blk->scales + 8 * h + 2 * k; /* 16-weight halves of the 32 */
                __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
                vi = dot16_acc(vi, p, sv);
            }
        }
        acc += (float)hsum_epi32(vi) * (h2f(blk->d) * a->d[b]);
    }
    return acc;
}

/* ---- tiles: 4 rows (GEMV) or 4 activations (GEMM) reduced together --------------------------
 *
 * The int32 vectors of 4 (row, activation) pairs are reduced into one xmm (lane = row or column),
 * and the reference's float steps run lane by lane: acc += (float)isum * (d_w * d_a).
 * Q4_K's mins and Q6_K's -32 offset multiply sums of 16 activation codes, taken once per call
 * (sums16) instead of once per row.  Tails (and a failed allocation) use the one-pair dots above,
 * whose float steps are the same. */

AI __m128i hsum4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* acc + (float)isum * (dw * da), lane by lane */
AI __m128 fstep(__m128 acc, __m128i isum, __m128 dw, __m128 da) {
    return _mm_add_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dw, da)));
}

/* s[i] = sum of codes 16i .. 16i + 15 (|s| <= 2032: int16) */
static void sums16(const int8_t *q, int64_t n, int16_t *s) {
    const __m256i one8 = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n; i += 64) { /* n is a multiple of 256 */
        __m256i a = dot_wide(dot_mul(one8, _mm256_loadu_si256((const __m256i *)(q + i))));
        __m256i b = dot_wide(dot_mul(one8, _mm256_loadu_si256((const __m256i *)(q + i + 32))));
        /* a: 8 sums of 4 (lanes 0-3 = bytes 0-15, 4-7 = 16-31); hadd pairs them into sums of 8,
         * twice into sums of 16, in-lane order: [a0 a1 | b0 b1] per 128-bit half */
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_setzero_si256());
        s[i / 16 + 0] = (int16_t)_mm256_extract_epi32(h, 0);
        s[i / 16 + 1] = (int16_t)_mm256_extract_epi32(h, 4);
        s[i / 16 + 2] = (int16_t)_mm256_extract_epi32(h, 1);
        s[i / 16 + 3] = (int16_t)_mm256_extract_epi32(h, 5);
    }
}

/* Q5_0 block x NA activations (qp[j]: the block's 32 codes of activation j) */
AI void q5_vecs(const lowbit_block_q5_0 *blk, const int8_t *const *qp, int NA, __m256i *v) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m128i qs = _mm_loadu_si128((const __m128i *)blk->qs);
    __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), m4);
    c = _mm256_or_si256(c, q5_high_bits(blk->qh));
    for (int j = 0; j < NA; j++)
        v[j] = dot_wide(dot_mul(c, _mm256_loadu_si256((const __m256i *)qp[j])));
}

/* lowbit_q4_k_scale_min for all 8 sub-blocks, inlined (it is called once per block and row) */
AI void q4k_scales(const uint8_t *q, int *sc, int *m) {
    for (int k = 0; k < 4; k++) {
        sc[k] = q[k] & 63;
        m[k] = q[k + 4] & 63;
        sc[k + 4] = (q[k + 8] & 15) | (q[k] >> 6) << 4;
        m[k + 4] = (q[k + 8] >> 4) | (q[k + 4] >> 6) << 4;
    }
}

/* Q4_K block x NA activations: vi = sum sc_k (q . a over sub-block k), vm = sum m_k (sum a) */
AI void q4k_vecs(const lowbit_block_q4_k *blk, const int8_t *const *qp, const int16_t *const *sp,
                 int NA, __m256i *vi, __m256i *vm) {
    const __m256i m4 = _mm256_set1_epi8(15);
    int sc[8], m[8];
    q4k_scales(blk->scales, sc, m);
    /* mins, each repeated for the two 16-sums of its sub-block */
    const __m256i mv = _mm256_setr_epi16((short)m[0], (short)m[0], (short)m[1], (short)m[1], (short)m[2],
                                         (short)m[2], (short)m[3], (short)m[3], (short)m[4], (short)m[4],
                                         (short)m[5], (short)m[5], (short)m[6], (short)m[6], (short)m[7],
                                         (short)m[7]);
    for (int j = 0; j < NA; j++) {
        vi[j] = _mm256_setzero_si256();
        vm[j] = _mm256_madd_epi16(mv, _mm256_loadu_si256((const __m256i *)sp[j]));
    }
    for (int c = 0; c < 4; c++) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c));
        __m256i lo = _mm256_and_si256(qv, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
        __m256i s0 = _mm256_set1_epi16((short)sc[2 * c]), s1 = _mm256_set1_epi16((short)sc[2 * c + 1]);
        for (int j = 0; j < NA; j++) {
            __m256i a0 = _mm256_loadu_si256((const __m256i *)(qp[j] + 64 * c));
            __m256i a1 = _mm256_loadu_si256((const __m256i *)(qp[j] + 64 * c + 32));
            vi[j] = dot16_acc(vi[j], _mm256_maddubs_epi16(lo, a0), s0);
            vi[j] = dot16_acc(vi[j], _mm256_maddubs_epi16(hi, a1), s1);
        }
    }
}

/* Q6_K block x NA activations: sum sc_k (q . a) - 32 sum sc_k (sum a), over 16-weight sub-blocks */
AI void q6k_vecs(const lowbit_block_q6_k *blk, const int8_t *const *qp, const int16_t *const *sp,
                 int NA, __m256i *vi) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)blk->scales));
    for (int j = 0; j < NA; j++) /* -32 sum sc_k S_k, as 8 int32 lanes */
        vi[j] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)sp[j])), 5);
    for (int j = 0; j < NA; j++) vi[j] = _mm256_sub_epi32(_mm256_setzero_si256(), vi[j]);
    for (int h = 0; h < 2; h++) {
        __m256i c[4];
        q6k_codes(blk, h, c);
        for (int k = 0; k < 4; k++) {
            const int8_t *sc = blk->scales + 8 * h + 2 * k;
            __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
            for (int j = 0; j < NA; j++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(qp[j] + 128 * h + 32 * k));
                vi[j] = dot16_acc(vi[j], _mm256_maddubs_epi16(c[k], av), sv);
            }
        }
    }
}

/* Activation code sums of 16 for `na` activations, in `buf` if they fit, else malloc'd (NULL:
 * the caller falls back to the one-pair dots). */
static int16_t *act_sums(const lowbit_act *a, int64_t na, int16_t *buf, int64_t bufn) {
    const int64_t per = a->n / 16;
    int16_t *s = per * na <= bufn ? buf : (int16_t *)malloc((size_t)(per * na) * sizeof(int16_t));
    if (s)
        for (int64_t j = 0; j < na; j++) sums16(a[j].q, a[j].n, s + j * per);
    return s;
}

enum { K_Q5_0, K_Q4_K, K_Q6_K };

/* One weight block of 4 rows (w4[i]) against one activation (GEMV), or of one row against 4
 * activations (GEMM): the spec's float step for each of the 4 lanes. */
AI __m128 tile_block(int K, const uint8_t *const *w4, int rows4, const lowbit_act *const *a4, int64_t b,
                     const int16_t *const *s4, __m128 acc) {
    const int8_t *qp[4];
    const int16_t *sp[4];
    __m256i vi[4], vm[4];
    float dw[4], dm[4], da[4];
    int32_t off[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        const lowbit_act *A = a4[rows4 ? 0 : i];
        da[i] = A->d[b];
        if (K == K_Q5_0) {
            qp[i] = A->q + 32 * b;
            off[i] = 16 * A->s[b];
        } else {
            qp[i] = A->q + 256 * b;
            sp[i] = s4[rows4 ? 0 : i] + 16 * b;
        }
    }
    for (int i = 0; i < (rows4 ? 4 : 1); i++) { /* GEMV: 4 rows x 1 activation; GEMM: 1 x 4 */
        const uint8_t *wb = w4[i];
        const int na = rows4 ? 1 : 4;
        if (K == K_Q5_0) {
            const lowbit_block_q5_0 *blk = (const lowbit_block_q5_0 *)wb + b;
            q5_vecs(blk, qp, na, vi + i);
            for (int j = 0; j < na; j++) dw[i + j] = h2f(blk->d);
        } else if (K == K_Q4_K) {
            const lowbit_block_q4_k *blk = (const lowbit_block_q4_k *)wb + b;
            q4k_vecs(blk, qp, sp, na, vi + i, vm + i);
            for (int j = 0; j < na; j++) dw[i + j] = h2f(blk->d), dm[i + j] = h2f(blk->dmin);
        } else {
            const lowbit_block_q6_k *blk = (const lowbit_block_q6_k *)wb + b;
            q6k_vecs(blk, qp, sp, na, vi + i);
            for (int j = 0; j < na; j++) dw[i + j] = h2f(blk->d);
        }
    }
    const __m128 dav = _mm_loadu_ps(da);
    __m128i isum = hsum4(vi[0], vi[1], vi[2], vi[3]);
    if (K == K_Q5_0) isum = _mm_sub_epi32(isum, _mm_loadu_si128((const __m128i *)off));
    acc = fstep(acc, isum, _mm_loadu_ps(dw), dav);
    if (K == K_Q4_K) /* acc -= (float)msum * (dmin * da) */
        acc = _mm_sub_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(hsum4(vm[0], vm[1], vm[2], vm[3])),
                                                _mm_mul_ps(_mm_loadu_ps(dm), dav)));
    return acc;
}

typedef float (*dot_fn)(const uint8_t *row, const lowbit_act *a);

AI void gemv_tiled(int K, dot_fn dot, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                   const lowbit_act *a, float *y) {
    int16_t buf[2048];
    int16_t *s = K == K_Q5_0 ? buf : act_sums(a, 1, buf, 2048);
    const int64_t bs = K == K_Q5_0 ? 32 : 256;
    int64_t r = r0;
    for (; s && r + 4 <= r1; r += 4) {
        const uint8_t *w4[4];
        for (int i = 0; i < 4; i++) w4[i] = (const uint8_t *)w + (r + i) * row_bytes;
        const lowbit_act *a4[1] = {a};
        const int16_t *s4[1] = {s};
        __m128 acc = _mm_setzero_ps();
        for (int64_t b = 0; b < a->n / bs; b++) acc = tile_block(K, w4, 1, a4, b, s4, acc);
        _mm_storeu_ps(y + (r - r0), acc);
    }
    for (; r < r1; r++) y[r - r0] = dot((const uint8_t *)w + r * row_bytes, a);
    if (s != buf) free(s);
}

AI void gemm_tiled(int K, dot_fn dot, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                   const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    int16_t buf[4096];
    int16_t *s = K == K_Q5_0 ? buf : act_sums(a, batch, buf, 4096);
    const int64_t bs = K == K_Q5_0 ? 32 : 256, per = a->n / 16;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + r * row_bytes;
        const uint8_t *w4[1] = {row};
        int64_t c = 0;
        for (; s && c + 4 <= batch; c += 4) {
            const lowbit_act *a4[4] = {&a[c], &a[c + 1], &a[c + 2], &a[c + 3]};
            const int16_t *s4[4] = {s + c * per, s + (c + 1) * per, s + (c + 2) * per, s + (c + 3) * per};
            __m128 acc = _mm_setzero_ps();
            for (int64_t b = 0; b < a->n / bs; b++) acc = tile_block(K, w4, 0, a4, b, s4, acc);
            float o[4];
            _mm_storeu_ps(o, acc);
            for (int j = 0; j < 4; j++) y[(c + j) * ldy + r] = o[j];
        }
        for (; c < batch; c++) y[c * ldy + r] = dot(row, &a[c]);
    }
    if (s != buf) free(s);
}

#define DEFINE_KQUANT(name, K)                                                                     \
    void KN(gemv_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,                \
                         const lowbit_act *a, float *y) {                                          \
        gemv_tiled(K, dot_##name, w, row_bytes, r0, r1, a, y);                                     \
    }                                                                                              \
    void KN(gemm_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,                \
                         const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {              \
        gemm_tiled(K, dot_##name, w, row_bytes, r0, r1, a, batch, y, ldy);                         \
    }
DEFINE_KQUANT(q5_0, K_Q5_0)
DEFINE_KQUANT(q4_k, K_Q4_K)
DEFINE_KQUANT(q6_k, K_Q6_K)
#endif /* LOWBIT_KQUANT_INL_H */

