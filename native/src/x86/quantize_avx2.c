/* The AVX2 A8 activation quantizer, bit-exact with lowbit_quantize_act_ref for every rule. */
#include "avx2-inl.h"

/* Codes of v = x * id, unclamped: the fast path only runs when |x * id| <= 127 * (1 + 2^-23)
 * (finite id, amax the true max), so no product reaches 127.5 and the clamp is dead -- except for
 * NaN, which converts to INT_MIN and is fixed to -127 after packing (max_epi8), like the clamp.
 * Half to even (Q8_0, Q8_K): cvtps rounds with MXCSR, as rintf does.  Half away (A8):
 * trunc(v + copysign(0.5 - 2^-25, v)) equals roundf(v) for every float in the default
 * round-to-nearest mode (checked exhaustively for |v| <= 128): exact halves round up through the
 * sum's own tie, just-below-halves do not. */
AI __m256i act_codes(__m256 v, const int even) {
    if (even) return _mm256_cvtps_epi32(v);
    const __m256 h = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(0.49999997f));
    return _mm256_cvttps_epi32(_mm256_add_ps(v, h));
}

/* max x and -min x over lanes of one group (G % 32 == 0).  Not max|x|: the larger of the two also
 * gives Q8_K the sign of its max element without a rescan (unless +m and -m both occur).
 * max_ps(x, acc) keeps acc if x is NaN: NaN never wins, like the reference; acc starts at +0.
 * 4 chains each, so a small group's latency stays short. */
AI void group_max_min(const float *xg, const int64_t G, __m256 *P, __m256 *N) {
    __m256 hi0 = _mm256_setzero_ps(), hi1 = hi0, hi2 = hi0, hi3 = hi0;
    __m256 lo0 = hi0, lo1 = hi0, lo2 = hi0, lo3 = hi0;
    for (int64_t j = 0; j < G; j += 32) {
        __m256 v0 = _mm256_loadu_ps(xg + j), v1 = _mm256_loadu_ps(xg + j + 8);
        __m256 v2 = _mm256_loadu_ps(xg + j + 16), v3 = _mm256_loadu_ps(xg + j + 24);
        hi0 = _mm256_max_ps(v0, hi0), lo0 = _mm256_min_ps(v0, lo0);
        hi1 = _mm256_max_ps(v1, hi1), lo1 = _mm256_min_ps(v1, lo1);
        hi2 = _mm256_max_ps(v2, hi2), lo2 = _mm256_min_ps(v2, lo2);
        hi3 = _mm256_max_ps(v3, hi3), lo3 = _mm256_min_ps(v3, lo3);
    }
    *P = _mm256_max_ps(_mm256_max_ps(hi0, hi1), _mm256_max_ps(hi2, hi3));
    *N = _mm256_xor_ps(_mm256_min_ps(_mm256_min_ps(lo0, lo1), _mm256_min_ps(lo2, lo3)),
                       _mm256_set1_ps(-0.0f));
}

/* lane g of the result = max over the 8 lanes of v[g] */
AI __m256 hmax_8x8(const __m256 *v) {
#define PAIR(a, b) _mm256_max_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b))
#define QUAD(a, b) _mm256_max_ps(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xee))
    __m256 u0 = QUAD(PAIR(v[0], v[1]), PAIR(v[2], v[3])), u1 = QUAD(PAIR(v[4], v[5]), PAIR(v[6], v[7]));
#undef PAIR
#undef QUAD
    return _mm256_max_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Codes of one group with inverse scale id; returns the code sums in 8 int32 lanes. */
AI __m256i group_codes(const float *xg, const int64_t G, const int even, float id, int8_t *q) {
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i m127 = _mm256_set1_epi8(-127), ones8 = _mm256_set1_epi8(1);
    __m256i sum = _mm256_setzero_si256();
    for (int64_t j0 = 0; j0 < G; j0 += 256) {
        __m256i s16 = _mm256_setzero_si256(); /* <= 8 x 2 x 127 per lane: no int16 overflow */
        for (int64_t j = j0; j < j0 + 256 && j < G; j += 32) {
            __m256i i0 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j), vid), even);
            __m256i i1 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 8), vid), even);
            __m256i i2 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 16), vid), even);
            __m256i i3 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 24), vid), even);
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            p = _mm256_max_epi8(_mm256_permutevar8x32_epi32(p, order), m127);
            _mm256_storeu_si256((__m256i *)(q + j), p);
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(ones8, p));
        }
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
    }
    return sum;
}

/* ng <= 8 groups of G floats (G % 32 == 0, a constant for the common sizes).  The 8 scales come
 * out of one transpose-reduce and one divps, with the reference's formulas lane by lane (IEEE
 * quotients are the same in any lane), so the groups' reduce-divide latency chains overlap. */
AI void quantize_8groups(const float *x, const int64_t G, const int rule, const int ng, int8_t *q,
                         float *d, int32_t *s) {
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    __m256 P[8], N[8];
    for (int g = 0; g < 8; g++) {
        P[g] = N[g] = zero;
        if (g < ng) group_max_min(x + g * G, G, &P[g], &N[g]);
        if (rule != LOWBIT_RULE_Q8_K) P[g] = _mm256_max_ps(N[g], P[g]); /* N > P ? N : P */
    }
    const __m256 Pv = hmax_8x8(P);
    __m256 amax, id, dg;
    if (rule == LOWBIT_RULE_Q8_K) {
        const __m256 Nv = hmax_8x8(N);
        amax = _mm256_max_ps(Nv, Pv); /* +0 when both are zero (N may be -0) */
        const __m256 nz = _mm256_cmp_ps(amax, zero, _CMP_NEQ_OQ);
        __m256 smax = _mm256_blendv_ps(_mm256_xor_ps(Nv, sign), Pv, _mm256_cmp_ps(Pv, Nv, _CMP_GT_OQ));
        int tie = _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(Pv, Nv, _CMP_EQ_OQ), nz));
        if (tie) { /* +m and -m both occur: the first one decides */
            float sm[8], am[8];
            _mm256_storeu_ps(sm, smax), _mm256_storeu_ps(am, amax);
            for (int g = 0; g < ng; g++)
                if (tie >> g & 1)
                    for (const float *xg = x + g * G;; xg++)
                        if (fabsf(*xg) == am[g]) {
                            sm[g] = *xg;
                            break;
                        }
            smax = _mm256_loadu_ps(sm);
        }
        id = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(-127.0f), smax), nz);
        dg = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), id), nz);
    } else {
        amax = Pv;
        dg = _mm256_div_ps(amax, _mm256_set1_ps(127.0f));
        const __m256 nz = _mm256_cmp_ps(rule == LOWBIT_RULE_Q8_0 ? amax : dg, zero, _CMP_NEQ_OQ);
        id = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(127.0f), amax), nz);
        if (rule == LOWBIT_RULE_Q8_0) /* fp16 round trip, RNE, as the reference */
            dg = _mm256_cvtph_ps(_mm256_cvtps_ph(dg, _MM_FROUND_TO_NEAREST_INT));
    }
    /* 127 / amax overflowed (amax < ~4e-37): the clamps matter there, the reference does it */
    const int slow = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, id),
                                                      _mm256_set1_ps(3.4028235e38f), _CMP_GT_OQ));
    float ids[8];
    _mm256_storeu_ps(ids, id);
    __m256i S[8];
    for (int g = 0; g < 8; g++)
        S[g] = g < ng && !(slow >> g & 1) ? group_codes(x + g * G, G, rule != LOWBIT_RULE_A8, ids[g], q + g * G)
                                          : _mm256_setzero_si256();
    const __m256i sv = hsum_8x8(S);
    if (ng == 8) {
        _mm256_storeu_ps(d, dg);
        _mm256_storeu_si256((__m256i *)s, sv);
    } else {
        float dt[8];
        int32_t st[8];
        _mm256_storeu_ps(dt, dg);
        _mm256_storeu_si256((__m256i *)st, sv);
        memcpy(d, dt, (size_t)ng * sizeof(float));
        memcpy(s, st, (size_t)ng * sizeof(int32_t));
    }
    for (int g = 0; g < ng; g++)
        if (slow >> g & 1) lowbit_quantize_act_ref(x + g * G, G, G, rule, q + g * G, d + g, s + g);
}

/* P2 / S8 (I2_S, group 128): one scale for the whole vector (internal.h). */
static void quantize_vector_avx2(const float *x, int64_t n, int rule, int8_t *q, float *d, int32_t *s) {
    __m256 P, N;
    group_max_min(x, n, &P, &N);
    P = _mm256_max_ps(N, P);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(P), _mm256_extractf128_ps(P, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    if (!(amax <= 3.4028235e38f)) { /* inf: the reference's clamp decides the codes */
        lowbit_quantize_act_ref(x, n, 128, rule, q, d, s);
        return;
    }
    float dg, id;
    lowbit_act_vector_scale(rule, amax, &dg, &id);
    const int64_t ng = n / 128;
    for (int64_t g0 = 0; g0 < ng; g0 += 8) {
        const int k = ng - g0 < 8 ? (int)(ng - g0) : 8;
        __m256i S[8];
        for (int g = 0; g < 8; g++)
            S[g] = g < k ? group_codes(x + (g0 + g) * 128, 128, 0, id, q + (g0 + g) * 128)
                         : _mm256_setzero_si256();
        int32_t st[8];
        _mm256_storeu_si256((__m256i *)st, hsum_8x8(S));
        for (int g = 0; g < k; g++) d[g0 + g] = dg, s[g0 + g] = st[g];
    }
}

void quantize_act_avx2(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                              float *d, int32_t *s) {
    const int whole = rule == LOWBIT_RULE_P2 || rule == LOWBIT_RULE_S8;
    if (whole && group == 128) {
        quantize_vector_avx2(x, n, rule, q, d, s);
        return;
    }
    if (group % 32 || whole) {
        lowbit_quantize_act_ref(x, n, group, rule, q, d, s);
        return;
    }
    const int64_t ng = n / group;
#define QGROUPS(G, RULE)                                                                           \
    for (int64_t g = 0; g < ng; g += 8)                                                            \
        quantize_8groups(x + g * G, G, RULE, ng - g < 8 ? (int)(ng - g) : 8, q + g * G, d + g, s + g)
    /* the weight formats' (size, rule) pairs as constants; anything else generic */
    if (group == 32 && rule == LOWBIT_RULE_Q8_0)
        QGROUPS(32, LOWBIT_RULE_Q8_0);
    else if (group == 128 && rule == LOWBIT_RULE_Q8_K)
        QGROUPS(128, LOWBIT_RULE_Q8_K);
    else if (group == 256 && rule == LOWBIT_RULE_Q8_K)
        QGROUPS(256, LOWBIT_RULE_Q8_K);
    else if (rule == LOWBIT_RULE_Q8_K)
        QGROUPS(group, LOWBIT_RULE_Q8_K);
    else if (rule == LOWBIT_RULE_Q8_0)
        QGROUPS(group, LOWBIT_RULE_Q8_0);
    else
        QGROUPS(group, LOWBIT_RULE_A8);
#undef QGROUPS
}
