/* AVX2 GEMV / GEMM for ggml's Q5_0, Q4_K and Q6_K with A8 activations (Q8_0 / Q8_K rules), equal
 * to the scalar reference (ref/kquant.c) bit for bit: the int32 sums of a weight block are exact,
 * and the float combination is the reference's, block by block, each product rounded before its
 * add (`nofma` keeps the compiler from fusing them).
 *
 * Codes are unsigned (Q5_0 0..31, Q4_K 0..15, Q6_K 0..63), so one vpmaddubsw (code x signed
 * activation, |a| <= 127) gives exact int16 pair sums: at most 2 * 63 * 127 = 16002.  Q6_K's -32
 * offset is a second vpmaddubsw of 32 x a subtracted in int16 (|pair| <= 2 * 32 * 127), then one
 * vpmaddwd by the sub-block scales; Q4_K's mins multiply the sub-block sums of a (vpmaddubsw of
 * 1 x a) the same way.  Q5_0 subtracts 16 * s[g] once per block. */
#include <immintrin.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))

AI float nofma(float x) {
    __asm__("" : "+x"(x));
    return x;
}

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
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 32; b++) {
        const lowbit_block_q5_0 *blk = (const lowbit_block_q5_0 *)row + b;
        __m128i qs = _mm_loadu_si128((const __m128i *)blk->qs);
        __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), m4);
        c = _mm256_or_si256(c, q5_high_bits(blk->qh));
        __m256i av = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));
        int32_t isum = hsum_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(c, av), ones)) - 16 * a->s[b];
        acc += nofma((float)isum * (h2f(blk->d) * a->d[b]));
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
            vi = _mm256_add_epi32(vi, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s0));
            vi = _mm256_add_epi32(vi, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s1));
            vm = _mm256_add_epi32(vm, _mm256_madd_epi16(_mm256_maddubs_epi16(one8, a0), n0));
            vm = _mm256_add_epi32(vm, _mm256_madd_epi16(_mm256_maddubs_epi16(one8, a1), n1));
        }
        const float da = a->d[b];
        acc += nofma((float)hsum_epi32(vi) * (h2f(blk->d) * da));
        acc -= nofma((float)hsum_epi32(vm) * (h2f(blk->dmin) * da));
    }
    return acc;
}

/* ---- Q6_K --------------------------------------------------------------------------------- */

static float dot_q6_k(const uint8_t *row, const lowbit_act *a) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q6_k *blk = (const lowbit_block_q6_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        __m256i vi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i L0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
            __m256i L1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
            __m256i H = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
            /* the two high bits of weight 32k + l sit at bits 2k of H[l]: move them to bits 4-5 */
            __m256i c[4] = {
                _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(H, 2), m30)),
            };
            for (int k = 0; k < 4; k++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(q + 128 * h + 32 * k));
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(c[k], av), _mm256_maddubs_epi16(k32, av));
                const int8_t *sc = blk->scales + 8 * h + 2 * k; /* 16-weight halves of the 32 */
                __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
                vi = _mm256_add_epi32(vi, _mm256_madd_epi16(p, sv));
            }
        }
        acc += nofma((float)hsum_epi32(vi) * (h2f(blk->d) * a->d[b]));
    }
    return acc;
}

/* ---- GEMV / GEMM (rows outside, activations inside: a row stays in L1 across the batch) ------- */

#define DEFINE_AVX2(name)                                                                          \
    static void gemv_##name##_avx2(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,       \
                                   const lowbit_act *a, float *y) {                                \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r - r0] = dot_##name((const uint8_t *)w + r * row_bytes, a);                        \
    }                                                                                              \
    static void gemm_##name##_avx2(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,       \
                                   const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {    \
        for (int64_t r = r0; r < r1; r++)                                                          \
            for (int64_t b = 0; b < batch; b++)                                                    \
                y[b * ldy + r] = dot_##name((const uint8_t *)w + r * row_bytes, &a[b]);           \
    }
DEFINE_AVX2(q5_0)
DEFINE_AVX2(q4_k)
DEFINE_AVX2(q6_k)

void lowbit_register_kquant_avx2(lowbit_kernels *k) {
    k->gemv[LOWBIT_K_Q5_0] = gemv_q5_0_avx2;
    k->gemm[LOWBIT_K_Q5_0] = gemm_q5_0_avx2;
    k->gemv[LOWBIT_K_Q4_K] = gemv_q4_k_avx2;
    k->gemm[LOWBIT_K_Q4_K] = gemm_q4_k_avx2;
    k->gemv[LOWBIT_K_Q6_K] = gemv_q6_k_avx2;
    k->gemm[LOWBIT_K_Q6_K] = gemm_q6_k_avx2;
}
