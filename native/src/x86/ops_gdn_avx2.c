/* The Gated-DeltaNet ops' loops (ops_gdn-inl.h) built with AVX2 + FMA flags (FMA contraction stays
 * off), and the token-by-token delta rule written with intrinsics for d a multiple of 16: the
 * operations of gdn_row in their order, GDN_LANES = 16 lanes as two ymm (lanes 0-7, 8-15), folded
 * in gdn_fold's tree, four rows side by side.  The scalar bits. */
#include <immintrin.h>

#include "../ops_gdn-inl.h"

/* gdn_fold: lanes l + (l + 8) (the two registers), then + 4, + 2, + 1. */
static inline float fold16(__m256 lo, __m256 hi) {
    const __m256 r8 = _mm256_add_ps(lo, hi);
    const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
    const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
    return _mm_cvtss_f32(_mm_add_ss(r2, _mm_shuffle_ps(r2, r2, 1)));
}

#define R 4 /* rows at once: independent add chains */
/* Prefetch the state PF_ROWS rows (8 KiB at d = 128) ahead, one line per 16 floats: the out-of-order
 * window spans less than one block of R rows, so without it the loads of the next block wait for the
 * arithmetic of this one.  Past the head's last row it reads the next head's state (a prefetch
 * never faults). */
#define PF_ROWS 16

/* gdn_row on rows s, s + d, .., s + (R - 1) d; prefetch: the rows PF_ROWS ahead too. */
static inline void rows16(float *restrict s, const float *restrict k, const float *restrict q,
                          __m256 alpha, float beta, const float *restrict v, float scale, int64_t d,
                          float *restrict o, int prefetch) {
    __m256 lo[R], hi[R];
    for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
        const __m256 k0 = _mm256_loadu_ps(k + i), k1 = _mm256_loadu_ps(k + i + 8);
        for (int r = 0; r < R; r++) {
            float *p = s + r * d + i;
            if (prefetch) _mm_prefetch((const char *)(p + PF_ROWS * d), _MM_HINT_T0);
            const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(p), alpha);
            const __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(p + 8), alpha);
            _mm256_storeu_ps(p, x0);
            _mm256_storeu_ps(p + 8, x1);
            lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(x0, k0));
            hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(x1, k1));
        }
    }
    __m256 delta[R];
    for (int r = 0; r < R; r++) {
        delta[r] = _mm256_set1_ps(beta * (v[r] - fold16(lo[r], hi[r])));
        lo[r] = hi[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < d; i += 16) {
        const __m256 k0 = _mm256_loadu_ps(k + i), k1 = _mm256_loadu_ps(k + i + 8);
        const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
        for (int r = 0; r < R; r++) {
            float *p = s + r * d + i;
            const __m256 x0 = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_mul_ps(k0, delta[r]));
            const __m256 x1 = _mm256_add_ps(_mm256_loadu_ps(p + 8), _mm256_mul_ps(k1, delta[r]));
            _mm256_storeu_ps(p, x0);
            _mm256_storeu_ps(p + 8, x1);
            lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(x0, q0));
            hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(x1, q1));
        }
    }
    for (int r = 0; r < R; r++) o[r] = fold16(lo[r], hi[r]) * scale;
}

/* gdn_delta_rule's loops (rows outside, blocks of tokens inside) over rows16. */
static void delta_rule(const gdn_args *a, int64_t h) {
    const int64_t d = a->d, kh = h % a->Hk, Hk = a->Hk, Hv = a->Hv;
    if (d % 16 || d % R) {
        gdn_delta_rule(a, h);
        return;
    }
    float *S = a->state + h * d * d;
    float alpha[GDN_TOKEN_BLOCK], o[R];
    for (int64_t t0 = 0; t0 < a->T; t0 += GDN_TOKEN_BLOCK) {
        const int64_t n = a->T - t0 < GDN_TOKEN_BLOCK ? a->T - t0 : GDN_TOKEN_BLOCK;
        gdn_alphas(a, h, t0, n, alpha);
        for (int64_t j = 0; j < d; j += R)
            for (int64_t t = t0; t < t0 + n; t++) {
                const float *k = a->k + (t * Hk + kh) * d, *q = a->q + (t * Hk + kh) * d;
                float *out = a->out + (t * Hv + h) * d + j;
                rows16(S + j * d, k, q, _mm256_set1_ps(alpha[t - t0]), a->beta[t * Hv + h],
                       a->v + (t * Hv + h) * d + j, a->scale, d, o, t == t0);
                for (int r = 0; r < R; r++) out[r] = o[r];
            }
    }
}

const gdn_kernels lowbit_gdn_kernels__avx2 = {gdn_ssm_conv, gdn_l2_norm, delta_rule,
                                              gdn_delta_rule_chunked, gdn_gated_rms_norm_silu,
                                              gdn_sigmoid_mul};
