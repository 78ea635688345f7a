/* lowbit_attention's loop built with AVX2 + FMA (this file's flags); see ops_attention-inl.h.  And
 * SiLU(gate) * up and GELU(gate) * up, 8 lanes at a time.  All are kernel-list entries (role OP). */
#include <immintrin.h>

#include "../ops_attention-inl.h"

void attention_loop_avx2(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                         const float *kc, const float *vc, int64_t ctx, int64_t pos, int64_t window,
                         float scale, float *out, float *p, int64_t r0, int64_t r1);

void attention_loop_avx2(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                         const float *kc, const float *vc, int64_t ctx, int64_t pos, int64_t window,
                         float scale, float *out, float *p, int64_t r0, int64_t r1) {
    attention_loop(q, H, Hkv, hd, vd, kc, vc, ctx, pos, window, scale, out, p, r0, r1);
}

/* out[i] = silu(gate[i]) * up[i] (gelu: gelu(gate[i]) * up[i]) for the first n - n % 8 values;
 * returns how many.  The operations of ops_silu() / ops_gelu() and attn_exp() (ops_common.h,
 * ops_attention-inl.h) in their order, each rounded as there, so the result is the baseline
 * build's bit for bit; ops.c does the tail. */
static inline __attribute__((always_inline)) int64_t sigmoid_act_mul(const float *gate, const float *up,
                                                                     int64_t n, float *out, const int gelu) {
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u), one_bits = _mm256_set1_epi32(0x3f800000);
    const __m256i lim = _mm256_set1_epi32((int)0xC2AE0000u); /* -87.0f */
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 xv = _mm256_loadu_ps(gate + i);
        /* the sigmoid's argument: x, or ops_gelu_arg(x) */
        const __m256i gb = _mm256_castps_si256(
            gelu ? _mm256_mul_ps(_mm256_set1_ps(1.5957691216057308f),
                                 _mm256_add_ps(xv, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), xv), xv), xv)))
                 : xv);
        const __m256i nb = _mm256_or_si256(gb, sign); /* -|g| */
        /* nb > lim as uint32: both have the sign bit, so a signed compare of the rest decides */
        const __m256i tiny = _mm256_cmpgt_epi32(_mm256_xor_si256(nb, sign), _mm256_xor_si256(lim, sign));
        const __m256 x = _mm256_castsi256_ps(_mm256_blendv_epi8(nb, lim, tiny)); /* attn_exp's clamp */
        const __m256i k = _mm256_cvttps_epi32(
            _mm256_sub_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _mm256_set1_ps(0.5f)));
        const __m256 kf = _mm256_cvtepi32_ps(k);
        const __m256 r = _mm256_sub_ps(
            _mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(0.693145752f))),
            _mm256_mul_ps(kf, _mm256_set1_ps(1.42860677e-6f)));
        __m256 p = _mm256_set1_ps(1.0f / 720);
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120));
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24));
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6));
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
        p = _mm256_add_ps(_mm256_mul_ps(p, r), one);
        p = _mm256_add_ps(_mm256_mul_ps(p, r), one);
        const __m256 two_k = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
        const __m256 e = _mm256_mul_ps(p, two_k);
        /* the sigmoid's numerator: g < 0 ? (|g| > 87 ? 0 : e) : 1 */
        const __m256i neg = _mm256_srai_epi32(gb, 31);
        const __m256i numb = _mm256_or_si256(_mm256_andnot_si256(neg, one_bits),
                                             _mm256_and_si256(_mm256_castps_si256(e), _mm256_andnot_si256(tiny, neg)));
        const __m256 s = _mm256_div_ps(_mm256_castsi256_ps(numb), _mm256_add_ps(one, e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(xv, s), _mm256_loadu_ps(up + i)));
    }
    return i;
}

int64_t silu_mul_avx2(const float *gate, const float *up, int64_t n, float *out);
int64_t silu_mul_avx2(const float *gate, const float *up, int64_t n, float *out) {
    return sigmoid_act_mul(gate, up, n, out, 0);
}
int64_t gelu_mul_avx2(const float *gate, const float *up, int64_t n, float *out);
int64_t gelu_mul_avx2(const float *gate, const float *up, int64_t n, float *out) {
    return sigmoid_act_mul(gate, up, n, out, 1);
}
