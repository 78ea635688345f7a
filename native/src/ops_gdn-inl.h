/* The Gated-DeltaNet ops' loops (lowbit_ssm_conv .. lowbit_sigmoid_mul, ops_gdn.c), compiled three
 * times: in ops_gdn.c for the baseline ISA, in x86/ops_gdn_avx2.c and x86/ops_gdn_avx512.c with
 * those files' flags.  Plain C, no -ffast-math and no FMA contraction (-ffp-contract=off): every
 * build does the same float operations in the same order, so every variant gives the scalar bits.
 * Sums are split into GDN_LANES independent partial sums (one zmm, two ymm, four xmm) folded in a
 * fixed tree.  Arguments are checked by ops_gdn.c. */
#ifndef LOWBIT_OPS_GDN_INL_H
#define LOWBIT_OPS_GDN_INL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops_common.h"

#define GDN_LANES 16 /* fold16's partial sums */
#define GDN_CHUNK 64 /* tokens per block of the chunked delta rule */

/* The arguments of lowbit_gated_delta_rule (shapes in lowbit/ops.h). */
typedef struct {
    const float *q, *k, *v, *g, *beta;
    float *state, *out;
    int64_t T, Hk, Hv, d;
    float scale; /* 1 / sqrt(d) */
} gdn_args;

/* Scratch floats of one chunked task (gdn_chunk_floats(d) per thread task). */
static inline int64_t gdn_chunk_floats(int64_t d) {
    return 4 * GDN_CHUNK + 2 * GDN_CHUNK * GDN_CHUNK + 5 * GDN_CHUNK * d;
}

/* One build's loops: each build's table is a kernel-list entry (role OP, LOWBIT_OP_GDN). */
typedef struct gdn_kernels {
    void (*ssm_conv)(const float *x, const float *w, float *state, int64_t T, int64_t C, int64_t K,
                     float *out);
    void (*l2_norm)(const float *x, int64_t rows, int64_t n, float eps, float *y);
    void (*delta_rule)(const gdn_args *a, int64_t h);                 /* head h, token by token */
    void (*delta_rule_chunked)(const gdn_args *a, int64_t h, float *scratch); /* the same, WY form */
    void (*gated_rms_norm_silu)(const float *o, const float *w, const float *z, int64_t rows,
                                int64_t n, float eps, float *out);
    void (*sigmoid_mul)(const float *x, const float *gate, int64_t n, float *out);
} gdn_kernels;

/* ---- conv, norms, gates ------------------------------------------------------------------- */

/* One token with the model's four taps (a decode step): the same sums channel by channel, each
 * channel's taps and state contiguous, which the compiler vectorizes across channels with AVX2
 * permutes (the general loop's strided tap reads it does not).  Only with AVX2 or later: the
 * baseline x86 build's deinterleave of those strides ran slower than the general loop
 * (docs/PERFORMANCE.md#conv-one-token). */
#ifdef __AVX2__
static inline void gdn_ssm_conv1_k4(const float *restrict x, const float *restrict w,
                                    float *restrict state, int64_t C, float *restrict out) {
    for (int64_t c = 0; c < C; c++) {
        const float *wc = w + 4 * c;
        float *sc = state + 3 * c;
        const float s0 = sc[0], s1 = sc[1], s2 = sc[2], xc = x[c];
        float acc = 0;
        acc += wc[0] * s0;
        acc += wc[1] * s1;
        acc += wc[2] * s2;
        acc += wc[3] * xc;
        out[c] = ops_silu(acc);
        sc[0] = s1;
        sc[1] = s2;
        sc[2] = xc;
    }
}
#endif

/* out[t, c] = silu(sum_i w[c, i] * win_c[t + i]), win_c = state[c, :] then x[:, c], the sum from 0
 * in tap order; then state[c] = the last K - 1 entries of win_c.  Channels in blocks so that the
 * taps of a block are summed across channels (w and state read at strides of K and K - 1). */
#define GDN_CONV_BLOCK 64
static inline void gdn_ssm_conv(const float *x, const float *w, float *state, int64_t T, int64_t C,
                                int64_t K, float *out) {
    const int64_t Ks = K - 1;
#ifdef __AVX2__
    if (T == 1 && K == 4) {
        gdn_ssm_conv1_k4(x, w, state, C, out);
        return;
    }
#endif
    for (int64_t c0 = 0; c0 < C; c0 += GDN_CONV_BLOCK) {
        const int64_t nc = C - c0 < GDN_CONV_BLOCK ? C - c0 : GDN_CONV_BLOCK;
        for (int64_t t = 0; t < T; t++) {
            float acc[GDN_CONV_BLOCK] = {0};
            for (int64_t i = 0; i < K; i++) {
                const int64_t p = t + i; /* window position */
                if (p < Ks) {
                    for (int64_t c = 0; c < nc; c++)
                        acc[c] += w[(c0 + c) * K + i] * state[(c0 + c) * Ks + p];
                } else {
                    const float *xr = x + (p - Ks) * C + c0;
                    for (int64_t c = 0; c < nc; c++) acc[c] += w[(c0 + c) * K + i] * xr[c];
                }
            }
            float *o = out + t * C + c0;
            for (int64_t c = 0; c < nc; c++) o[c] = ops_silu(acc[c]);
        }
        /* new state: window positions T .. T + K - 2; ascending j reads position T + j >= j + 1 of
         * the old state (when T < K - 1) before anything overwrites it */
        for (int64_t c = c0; c < c0 + nc; c++)
            for (int64_t j = 0; j < Ks; j++) {
                const int64_t p = T + j;
                state[c * Ks + j] = p < Ks ? state[c * Ks + p] : x[(p - Ks) * C + c];
            }
    }
}

/* y = x / sqrt(sum(x^2) + eps) per row of n, as y = x * (1 / sqrt(...)) (lowbit_rms_norm's form). */
static inline void gdn_l2_norm(const float *x, int64_t rows, int64_t n, float eps, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        const float inv = 1.0f / sqrtf(ops_sum_sq(xr, n) + eps);
        for (int64_t i = 0; i < n; i++) yr[i] = xr[i] * inv;
    }
}

/* Per row of n: normed = (o * inv) * w with inv = 1 / sqrt(sum_sq(o) / n + eps) (lowbit_rms_norm's
 * operations), then out = silu(z) * normed (lowbit_act_mul silu with gate z, up normed): the bits
 * of those two calls. */
static inline void gdn_gated_rms_norm_silu(const float *o, const float *w, const float *z,
                                           int64_t rows, int64_t n, float eps, float *out) {
    const float inv_n = 1.0f / (float)n;
    for (int64_t r = 0; r < rows; r++) {
        const float *orow = o + r * n, *zr = z + r * n;
        float *y = out + r * n;
        const float inv = 1.0f / sqrtf(ops_sum_sq(orow, n) * inv_n + eps);
        for (int64_t i = 0; i < n; i++) y[i] = ops_silu(zr[i]) * (orow[i] * inv * w[i]);
    }
}

static inline void gdn_sigmoid_mul(const float *x, const float *gate, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * ops_sigmoid(gate[i]);
}

/* ---- the gated delta rule, token by token -------------------------------------------------- */

/* One state row s = S[:, j] (d keys, contiguous) for one token, in one pass over it:
 *   s *= alpha;  e = s . k;  delta = beta * (v - e);  s += k * delta;  returns (s . q) * scale.
 * Each row depends on its own values only, so the rows of a head are independent. */
static inline float gdn_row(float *restrict s, const float *restrict k, const float *restrict q,
                            float alpha, float beta, float v, float scale, int64_t d) {
    float acc[GDN_LANES] = {0};
    int64_t i = 0;
    for (; i + GDN_LANES <= d; i += GDN_LANES)
        for (int l = 0; l < GDN_LANES; l++) {
            const float x = s[i + l] * alpha;
            s[i + l] = x;
            acc[l] += x * k[i + l];
        }
    float e = fold16(acc);
    for (; i < d; i++) {
        s[i] *= alpha;
        e += s[i] * k[i];
    }
    const float delta = beta * (v - e);
    float acc2[GDN_LANES] = {0};
    for (i = 0; i + GDN_LANES <= d; i += GDN_LANES)
        for (int l = 0; l < GDN_LANES; l++) {
            const float x = s[i + l] + k[i + l] * delta;
            s[i + l] = x;
            acc2[l] += x * q[i + l];
        }
    float o = fold16(acc2);
    for (; i < d; i++) {
        s[i] += k[i] * delta;
        o += s[i] * q[i];
    }
    return o * scale;
}

/* Tokens per pass over a head's state in the token-by-token form: their keys and queries (16 KiB
 * at d = 128) stay in L1 beside the rows while every row of the head goes through them. */
#define GDN_TOKEN_BLOCK 16

/* alpha[t] = expf(g) of V head h at tokens t0 .. t0 + n - 1: libm, the same call in every build. */
static inline void gdn_alphas(const gdn_args *a, int64_t h, int64_t t0, int64_t n, float *alpha) {
    for (int64_t t = 0; t < n; t++) alpha[t] = expf(a->g[(t0 + t) * a->Hv + h]);
}

/* V head h (K head h % Hk) over all T tokens.  The rows of S are independent, so the loop runs
 * over rows outside and tokens inside, in blocks of GDN_TOKEN_BLOCK tokens: each row stays in L1
 * across a block's tokens, and the d x d state is read and written once per block (once per
 * token when decoding). */
static inline void gdn_delta_rule(const gdn_args *a, int64_t h) {
    const int64_t d = a->d, kh = h % a->Hk, Hk = a->Hk, Hv = a->Hv;
    float *S = a->state + h * d * d;
    float alpha[GDN_TOKEN_BLOCK];
    for (int64_t t0 = 0; t0 < a->T; t0 += GDN_TOKEN_BLOCK) {
        const int64_t n = a->T - t0 < GDN_TOKEN_BLOCK ? a->T - t0 : GDN_TOKEN_BLOCK;
        gdn_alphas(a, h, t0, n, alpha);
        for (int64_t j = 0; j < d; j++)
            for (int64_t t = t0; t < t0 + n; t++) {
                const float *k = a->k + (t * Hk + kh) * d, *q = a->q + (t * Hk + kh) * d;
                a->out[(t * Hv + h) * d + j] = gdn_row(S + j * d, k, q, alpha[t - t0], a->beta[t * Hv + h],
                                                       a->v[(t * Hv + h) * d + j], a->scale, d);
            }
    }
}

/* ---- the gated delta rule, chunked (WY form) ----------------------------------------------- */

/* x += a * y over n (restrict: the compiler vectorizes without overlap checks). */
static inline void gdn_axpy(float *restrict x, float a, const float *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += a * y[i];
}

/* The same recurrence over blocks of n <= GDN_CHUNK tokens t (local index, g_t, beta_t), with
 * gam_t = g_0 + .. + g_t, L = n - 1 and S the state entering the block:
 *   A[t][u] = beta_t e^(gam_t - gam_u) k_t . k_u  (u < t)      M[t][u] = e^(gam_t - gam_u) q_t . k_u  (u <= t)
 *   U_t = beta_t v_t - sum_{u<t} A[t][u] U_u                   W_t = beta_t e^gam_t k_t - sum_{u<t} A[t][u] W_u
 *   ~U_t = U_t - W_t S       o_t = scale (e^gam_t q_t S + sum_{u<=t} M[t][u] ~U_u)
 *   S <- e^gam_L S + sum_t e^(gam_L - gam_t) k_t ~U_t^T
 * (the forward substitutions solve (I + A) U = diag(beta) V).  Per state row j everything is a
 * product over the block's tokens held in GDN_CHUNK-wide vectors: no horizontal sums, the row read
 * and written once per block.  Tokens n .. GDN_CHUNK - 1 of the transposed tables are zeros and
 * their lanes are never stored. */
static inline void gdn_delta_rule_chunked(const gdn_args *a, int64_t h, float *scratch) {
    enum { CS = GDN_CHUNK };
    const int64_t d = a->d, kh = h % a->Hk, Hk = a->Hk, Hv = a->Hv;
    float *S = a->state + h * d * d;
    float *gam = scratch, *eg = gam + CS, *egl = eg + CS, *bt = egl + CS;
    float *A = bt + CS;           /* [t][u] */
    float *Mt = A + CS * CS;      /* transposed: [u][t] */
    float *U = Mt + CS * CS;      /* [t][d] */
    float *W = U + CS * d;        /* [t][d] */
    float *Wt = W + CS * d;       /* [i][t] */
    float *Qt = Wt + CS * d;      /* [i][t] */
    float *kd = Qt + CS * d;      /* [t][i]: e^(gam_L - gam_t) k_t */
    float accW[CS], accQ[CS], om[CS]; /* locals: the compiler may keep them in registers */
    for (int64_t t0 = 0; t0 < a->T; t0 += CS) {
        const int64_t n = a->T - t0 < CS ? a->T - t0 : CS;
#define GDN_K(t) (a->k + ((t0 + (t)) * Hk + kh) * d)
#define GDN_Q(t) (a->q + ((t0 + (t)) * Hk + kh) * d)
        float cum = 0;
        for (int64_t t = 0; t < n; t++) {
            cum += a->g[(t0 + t) * Hv + h];
            gam[t] = cum;
            bt[t] = a->beta[(t0 + t) * Hv + h];
        }
        for (int64_t t = 0; t < CS; t++) { /* eg: zeros past the block (lanes of om never stored) */
            eg[t] = t < n ? expf(gam[t]) : 0.0f;
            egl[t] = t < n ? expf(gam[n - 1] - gam[t]) : 0.0f;
        }
        memset(Mt, 0, sizeof(float) * CS * CS);
        for (int64_t t = 0; t < n; t++)
            for (int64_t u = 0; u <= t; u++) {
                const float dec = expf(gam[t] - gam[u]);
                if (u < t) A[t * CS + u] = bt[t] * dec * dot16(GDN_K(t), GDN_K(u), d);
                Mt[u * CS + t] = dec * dot16(GDN_Q(t), GDN_K(u), d);
            }
        for (int64_t t = 0; t < n; t++) {
            float *Ut = U + t * d, *Wr = W + t * d;
            const float *v = a->v + ((t0 + t) * Hv + h) * d, *k = GDN_K(t);
            const float bw = bt[t] * eg[t];
            for (int64_t i = 0; i < d; i++) {
                Ut[i] = bt[t] * v[i];
                Wr[i] = bw * k[i];
            }
            for (int64_t u = 0; u < t; u++) {
                gdn_axpy(Ut, -A[t * CS + u], U + u * d, d);
                gdn_axpy(Wr, -A[t * CS + u], W + u * d, d);
            }
        }
        memset(Wt, 0, sizeof(float) * CS * d);
        memset(Qt, 0, sizeof(float) * CS * d);
        for (int64_t t = 0; t < n; t++) {
            const float *k = GDN_K(t), *q = GDN_Q(t);
            for (int64_t i = 0; i < d; i++) {
                Wt[i * CS + t] = W[t * d + i];
                Qt[i * CS + t] = q[i];
                kd[t * d + i] = egl[t] * k[i];
            }
        }
        const float egL = eg[n - 1];
        for (int64_t j = 0; j < d; j++) {
            float *restrict Sj = S + j * d;
            for (int t = 0; t < CS; t++) accW[t] = accQ[t] = 0;
            for (int64_t i = 0; i < d; i++) { /* W_t S and q_t S at column j, all t at once */
                const float s = Sj[i], *wi = Wt + i * CS, *qi = Qt + i * CS;
                for (int t = 0; t < CS; t++) {
                    accW[t] += s * wi[t];
                    accQ[t] += s * qi[t];
                }
            }
            for (int64_t t = 0; t < n; t++) accW[t] = U[t * d + j] - accW[t]; /* ~U[t][j] */
            for (int t = 0; t < CS; t++) om[t] = eg[t] * accQ[t];
            for (int64_t u = 0; u < n; u++) gdn_axpy(om, accW[u], Mt + u * CS, CS);
            for (int64_t t = 0; t < n; t++) a->out[((t0 + t) * Hv + h) * d + j] = om[t] * a->scale;
            for (int64_t i = 0; i < d; i++) Sj[i] *= egL;
            for (int64_t t = 0; t < n; t++) gdn_axpy(Sj, accW[t], kd + t * d, d);
        }
#undef GDN_K
#undef GDN_Q
    }
}

/* The table of the baseline build (ops_gdn.c); the x86 builds swap in their own delta_rule. */
#define GDN_KERNELS_WITH(DELTA_RULE)                                                               \
    {.ssm_conv = gdn_ssm_conv, .l2_norm = gdn_l2_norm, .delta_rule = DELTA_RULE,                   \
     .delta_rule_chunked = gdn_delta_rule_chunked, .gated_rms_norm_silu = gdn_gated_rms_norm_silu, \
     .sigmoid_mul = gdn_sigmoid_mul}
#define GDN_KERNELS GDN_KERNELS_WITH(gdn_delta_rule)

#endif
