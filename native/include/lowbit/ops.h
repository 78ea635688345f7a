/* liblowbit decoder ops: the per-token float32 work between the matrix products (RMSNorm, RoPE,
 * attention over a KV cache, gated activations, residual adds), and the Gated-DeltaNet ops of
 * qwen35 (conv, L2 norm, gates, delta rule, gated norm).
 *
 * Plain C the compiler vectorizes: these ops are a few percent of a token, the point is to take them
 * out of the Python interpreter.  The attention loop has an AVX2 build and the Gated-DeltaNet ops
 * AVX2 and AVX-512 builds (dispatched at run time).  Same conventions as lowbit.h: C-contiguous
 * float32 arrays, a lowbit_status return, never an abort.  Results follow the numpy forward pass of
 * pylowbit.model to float32 rounding (sums are taken in another order).
 */
#ifndef LOWBIT_OPS_H
#define LOWBIT_OPS_H

#include "lowbit/lowbit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w   for r < rows; w may be NULL (no scale).
 * y may equal x. */
LOWBIT_API int lowbit_rms_norm(const float *x, const float *w, int64_t rows, int64_t n, float eps,
                               float *y);

/* Rotary embedding in place.  x: (T, heads, hd); cos, sin: (T, half) for the 2 * half <= hd
 * rotated dims of each head.  neox: pairs (i, i + half); otherwise (GPT-J) pairs (2i, 2i + 1). */
LOWBIT_API int lowbit_rope(float *x, int64_t T, int64_t heads, int64_t hd, const float *cos,
                           const float *sin, int64_t half, int neox);

/* Softmax of each row of x (rows, n) in place; -inf entries get 0 (a row of only -inf: EINVAL). */
LOWBIT_API int lowbit_softmax(float *x, int64_t rows, int64_t n);

/* Causal attention with grouped KV heads over a cache, storing the new keys / values first.
 *   q: (T, H, hd) queries of positions pos .. pos + T - 1;  k: (T, Hkv, hd), v: (T, Hkv, vd) new.
 *   kc: (Hkv, ctx, hd), vc: (Hkv, ctx, vd) caches; k, v are written at positions pos .. pos + T - 1.
 *   out: (T, H, vd).  Query head h reads KV head h / (H / Hkv).  Query i sees key j iff j <= i and,
 *   with window > 0, i - j < window.  scores = scale * q . k, softmax, then the weighted sum of v. */
LOWBIT_API int lowbit_attention(const float *q, const float *k, const float *v, int64_t T,
                                int64_t H, int64_t Hkv, int64_t hd, int64_t vd, float *kc,
                                float *vc, int64_t ctx, int64_t pos, int64_t window, float scale,
                                float *out);
/* The same on up to `threads` threads of the library's pool (<= 0: its default), the query rows
 * (t, h) split among them; every row is computed as lowbit_attention computes it, so the result is
 * the same bits for any thread count.  Small problems (a decode step at a short context) stay on
 * the calling thread. */
LOWBIT_API int lowbit_attention_mt(const float *q, const float *k, const float *v, int64_t T,
                                   int64_t H, int64_t Hkv, int64_t hd, int64_t vd, float *kc,
                                   float *vc, int64_t ctx, int64_t pos, int64_t window, float scale,
                                   float *out, int threads);

/* Gated activations: out[i] = act(gate[i]) * up[i]; out may equal gate or up. */
typedef enum lowbit_act_kind {
    LOWBIT_ACT_SILU = 0,      /* x / (1 + e^-x) */
    LOWBIT_ACT_RELU2 = 1,     /* max(x, 0)^2 */
    LOWBIT_ACT_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} lowbit_act_kind;
LOWBIT_API int lowbit_act_mul(int act, const float *gate, const float *up, int64_t n, float *out);

/* out[i] = a[i] + b[i]; out may equal a or b. */
LOWBIT_API int lowbit_add(const float *a, const float *b, int64_t n, float *out);

/* ---- Gated DeltaNet (qwen35) --------------------------------------------------------------
 * Built once per ISA (AVX2, AVX-512) from the same plain C and dispatched; every variant gives the
 * scalar build's bits. */

/* Causal depthwise conv + SiLU.  x: (T, C) raw inputs; w: (C, K), tap K - 1 multiplies the current
 * input; state: (C, K - 1) the previous K - 1 inputs per channel, oldest first (zeros for a new
 * sequence), updated to the last K - 1 of them (also for T < K - 1).  out: (T, C),
 * out[t, c] = silu(sum_i w[c, i] * win_c[t + i]) with win_c = state[c, :] then x[:, c].  None of
 * out, state and x / w may overlap. */
LOWBIT_API int lowbit_ssm_conv(const float *x, const float *w, float *state, int64_t T, int64_t C,
                               int64_t K, float *out);

/* y[r, :] = x[r, :] / sqrt(sum(x[r, :]^2) + eps) for r < rows; y may equal x. */
LOWBIT_API int lowbit_l2_norm(const float *x, int64_t rows, int64_t n, float eps, float *y);

/* Gates of T tokens x Hv heads (all (T, Hv) but ssm_a, dt_bias (Hv,)): beta = sigmoid(b),
 * g = ssm_a[h] * softplus(a + dt_bias[h]), softplus(x) = log1p(e^x), x itself above 20. */
LOWBIT_API int lowbit_gdn_gates(const float *b, const float *a, const float *ssm_a,
                                const float *dt_bias, int64_t T, int64_t Hv, float *beta, float *g);

/* The gated delta rule over T tokens.  q, k: (T, Hk, d); v: (T, Hv, d); g (log-decay), beta:
 * (T, Hv); state: (Hv, d, d), state[h, j, i] = S_h[i][j] (key i contiguous), updated in place;
 * out: (T, Hv, d), overlapping no input.  V head h uses K head h % Hk.  Per token and head:
 *   S <- e^g S;  e_j = sum_i S[i][j] k_i;  S[i][j] += k_i beta (v_j - e_j);
 *   o_j = (1 / sqrt(d)) sum_i S[i][j] q_i.
 * On up to `threads` pool threads (<= 0: the default), split by V heads: the same bits for any
 * count.  chunked: 1 = the chunked (WY) form over blocks of 64 tokens (equal within float
 * rounding), 0 = token by token, -1 = choose (token by token). */
LOWBIT_API int lowbit_gated_delta_rule(const float *q, const float *k, const float *v,
                                       const float *g, const float *beta, float *state, int64_t T,
                                       int64_t Hk, int64_t Hv, int64_t d, float *out, int threads,
                                       int chunked);

/* Per row of n: out = silu(z) * (o / sqrt(mean(o^2) + eps) * w), the bits of lowbit_rms_norm(o, w)
 * followed by lowbit_act_mul(LOWBIT_ACT_SILU, z, normed).  out may equal o or z. */
LOWBIT_API int lowbit_gated_rms_norm_silu(const float *o, const float *w, const float *z,
                                          int64_t rows, int64_t n, float eps, float *out);

/* out[i] = x[i] * sigmoid(gate[i]) (the sigmoid of lowbit_act_mul's SiLU); out may equal x or gate. */
LOWBIT_API int lowbit_sigmoid_mul(const float *x, const float *gate, int64_t n, float *out);

#ifdef __cplusplus
}
#endif

#endif
