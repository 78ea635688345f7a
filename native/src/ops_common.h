/* Float helpers shared by the decoder ops of ops.c and the Gated-DeltaNet ops of ops_gdn-inl.h, so
 * that an op built from them (the GDN output norm) gives the bits of the ops it fuses (lowbit_rms_norm
 * then lowbit_act_mul silu).  Plain C that the compiler vectorizes; see ops_attention-inl.h for attn_exp. */
#ifndef LOWBIT_OPS_COMMON_H
#define LOWBIT_OPS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops_attention-inl.h"

/* sum of x[i]^2: 8 independent partial sums (a fixed order the compiler may keep in one vector
 * register), then the tail, then the partial sums in lane order. */
static inline float ops_sum_sq(const float *x, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[i + l] * x[i + l];
    float s = 0;
    for (; i < n; i++) s += x[i] * x[i];
    for (int l = 0; l < 8; l++) s += acc[l];
    return s;
}

/* lowbit_rms_norm of one row: the sum of squares in ops_sum_sq's order, then x * inv * w left to
 * right (the SIMD rows in x86/ops_avx2.c, ops_avx512.c: the same operations). */
static inline void ops_rms_row(const float *x, const float *w, int64_t n, float eps, float *y) {
    const float inv = 1.0f / sqrtf(ops_sum_sq(x, n) * (1.0f / (float)n) + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv;
    }
}

/* sigmoid(g) = 1 / (1 + e) for g >= 0, e / (1 + e) below, with e = e^-|g| from attn_exp (<= 1: no
 * overflow), and 0 below -87 (where attn_exp stops at e^-87).  Selects are on the bits (integer
 * selects vectorize). */
static inline float ops_sigmoid(float g) {
    uint32_t gb, eb;
    memcpy(&gb, &g, 4);
    const uint32_t nb = gb | 0x80000000u; /* -|g| */
    float x, e, num;
    memcpy(&x, &nb, 4);
    e = attn_exp(x);
    memcpy(&eb, &e, 4);
    const uint32_t neg = 0u - (gb >> 31), tiny = nb > 0xC2AE0000u ? ~0u : 0u; /* g < 0, |g| > 87 */
    const uint32_t numb = (0x3f800000u & ~neg) | (eb & neg & ~tiny);       /* 1, e or 0 */
    memcpy(&num, &numb, 4);
    return num / (1.0f + e);
}

/* silu(g) = g * sigmoid(g): silu(-1e30) is -0, not -1e30 * e^-87.  x86/ops_avx2.c has these
 * operations written out 8 lanes wide, in this order. */
static inline float ops_silu(float g) { return g * ops_sigmoid(g); }

/* GELU, tanh form: 0.5 * x * (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2 / pi) * (x + 0.044715
 * * x^3), so it takes ops_sigmoid's vectorizable exp instead of libm's tanhf (x86/ops_avx2.c: the
 * same operations 8 lanes wide). */
static inline float ops_gelu_arg(float x) { return 1.5957691216057308f * (x + 0.044715f * x * x * x); }
static inline float ops_gelu(float x) { return x * ops_sigmoid(ops_gelu_arg(x)); }

/* out[i] = silu(gate[i]) * up[i] / gelu(gate[i]) * up[i]; return n.  The scalar entries, ops.c's
 * tails, and the AVX-512 entries (x86/ops_avx512.c: this loop under its flags, which the compiler
 * vectorizes as fast as written-out intrinsics) */
static inline int64_t ops_silu_mul(const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = ops_silu(gate[i]) * up[i];
    return n;
}
static inline int64_t ops_gelu_mul(const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = ops_gelu(gate[i]) * up[i];
    return n;
}

#endif
