/* lowbit_attention's loop on AVX2 + FMA (x86/attention_groups-inl.h, 16 lanes as two ymm, 4 (row,
 * key) scores a step), SiLU(gate) * up and GELU(gate) * up, 8 lanes at a time, and
 * lowbit_rms_norm's row (rms_norm-inl.h).  All are kernel-list entries (role OP). */
#include <immintrin.h>

#include "../ops_attention-inl.h"

#define AI static inline __attribute__((always_inline))

/* attn_exp's operations after its clamp, 8 lanes (x already clamped at -87) */
AI __m256 exp8_clamped(__m256 x) {
    const __m256i k = _mm256_cvttps_epi32(
        _mm256_sub_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _mm256_set1_ps(0.5f)));
    const __m256 kf = _mm256_cvtepi32_ps(k);
    const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(0.693145752f))),
                                   _mm256_mul_ps(kf, _mm256_set1_ps(1.42860677e-6f)));
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), one);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), one);
    const __m256 two_k = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(p, two_k);
}

typedef struct {
    __m256 lo, hi;
} v16;
AI v16 v16_zero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
AI v16 v16_set1(float x) { return (v16){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
AI v16 v16_load(const float *p) { return (v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
AI void v16_store(float *p, v16 x) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_storeu_ps(p + 8, x.hi);
}
AI v16 v16_add(v16 a, v16 b) { return (v16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
AI v16 v16_sub(v16 a, v16 b) { return (v16){_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
AI v16 v16_mul(v16 a, v16 b) { return (v16){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
AI v16 v16_max(v16 a, v16 b) { return (v16){_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
AI int v16_unordered(v16 a) {
    return _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(a.lo, a.lo, _CMP_UNORD_Q),
                                           _mm256_cmp_ps(a.hi, a.hi, _CMP_UNORD_Q)));
}
AI float v16_hmax(v16 a) {
    const __m256 m8 = _mm256_max_ps(a.lo, a.hi);
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}
/* attn_exp's clamp, done as an unsigned min on the bits (x is never positive here) */
AI __m256 clamp8(__m256 x) {
    return _mm256_castsi256_ps(_mm256_min_epu32(_mm256_castps_si256(x), _mm256_set1_epi32((int)0xC2AE0000u)));
}
AI v16 v16_exp(v16 x) { return (v16){exp8_clamped(clamp8(x.lo)), exp8_clamped(clamp8(x.hi))}; }

#define SLOTS 4
typedef __m128 sv;
/* fold16's steps on 4 vectors: + 8 is lo + hi; slot x lands in lane x */
AI int slot_lane(int x) { return x; }
AI sv slots_fold(const v16 a[4]) {
    __m256 t[4], u[2];
    for (int i = 0; i < 4; i++) t[i] = _mm256_add_ps(a[i].lo, a[i].hi);
    for (int i = 0; i < 2; i++) /* + 4: [a 0..3 | b 0..3] */
        u[i] = _mm256_add_ps(_mm256_permute2f128_ps(t[2 * i], t[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(t[2 * i], t[2 * i + 1], 0x31));
    /* + 2: [a 0, a 1, c 0, c 1 | b 0, b 1, d 0, d 1] */
    const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], 0x44), _mm256_shuffle_ps(u[0], u[1], 0xEE));
    /* + 1: lanes 0, 2, 4, 6 hold a, c, b, d */
    const __m256 r = _mm256_add_ps(w, _mm256_permute_ps(w, 0xB1));
    return _mm256_castps256_ps128(_mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 2, 6, 0, 4, 2, 6)));
}
AI sv sv_mul(sv s, float f) { return _mm_mul_ps(s, _mm_set1_ps(f)); }
AI void sv_store_run(float *dst, sv s, int lane0, int n) {
    if (n == 4) {
        _mm_storeu_ps(dst, s);
        return;
    }
    float t[4];
    _mm_storeu_ps(t, s);
    for (int i = 0; i < n; i++) dst[i] = t[lane0 + i];
}

#define RMS_ENTRY rms_norm_avx2
#include "rms_norm-inl.h"
#undef AI

#define PV_VECS 1
#define ATTN_ENTRY attention_loop_avx2
#include "../attention_groups-inl.h"

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
        const __m256 e = exp8_clamped(x);
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
