/* The attention loop of lowbit_attention (ops.c), compiled twice: in ops.c for the baseline ISA and
 * in x86/ops_avx2.c with AVX2 + FMA (the same C, 8 lanes wide); x86/ops_avx512.c does its
 * operations in its order with intrinsics.  It is O(T * S) per head: at prompt lengths the baseline
 * build was slower than numpy's BLAS had been.  Arguments are checked, and the new keys / values
 * stored, by lowbit_attention; p is scratch of attn_scratch_floats(pos, T). */
#ifndef LOWBIT_OPS_ATTENTION_H
#define LOWBIT_OPS_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A loop's scratch: ATTN_GROUP rows of pos + T scores (a SIMD loop keeps those of the query rows
 * that share a key head), and 16 floats of slack after them for its vector tails. */
#define ATTN_GROUP 4
static inline int64_t attn_scratch_floats(int64_t pos, int64_t T) { return ATTN_GROUP * (pos + T) + 16; }

/* Fold 16 partial sums: lanes l and l + 8, then l + 4, l + 2, l + 1 (the halving steps of a vector
 * reduction, which a SIMD build can also run on 16 sums at once, transposed). */
static inline float fold16(const float *acc) {
    float r[8];
    for (int l = 0; l < 8; l++) r[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) r[l] = r[l] + r[l + 4];
    for (int l = 0; l < 2; l++) r[l] = r[l] + r[l + 2];
    return r[0] + r[1];
}

/* sum a[i] b[i]: 16 partial sums over the full blocks (one zmm, two ymm, four xmm), folded, then
 * the tail in order. */
static inline float dot16(const float *restrict a, const float *restrict b, int64_t n) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[i + l] * b[i + l];
    float s = fold16(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* e^x for x <= 0, not NaN (scores minus their max), branch-free so that loops over it vectorize (libm's
 * expf is a scalar call: it was a third of the loop at prompt lengths).  Cody-Waite reduction
 * x = k ln2 + r, |r| <= ln2 / 2, and a degree-6 Taylor polynomial of e^r: relative error < 2e-7
 * (tested against float64 in tests/test_ops.py).  Below -87 it returns e^-87 ~ 1.6e-38, not 0. */
static inline float attn_exp(float x) {
    /* clamp at -87 on the bits (for x <= 0 a larger magnitude is a larger uint32; -inf -> -87):
     * an integer select vectorizes, a float compare does not under -ftrapping-math */
    uint32_t u;
    memcpy(&u, &x, 4);
    u = u > 0xC2AE0000u ? 0xC2AE0000u : u; /* -87.0f */
    memcpy(&x, &u, 4);
    const int32_t k = (int32_t)(x * 1.44269504f - 0.5f); /* round(x / ln2), x <= 0 */
    const float kf = (float)k;
    const float r = (x - kf * 0.693145752f) - kf * 1.42860677e-6f; /* ln2 split: kf * hi exact */
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t bits = (uint32_t)(k + 127) << 23; /* 2^k, k in -126..0 */
    float two_k;
    memcpy(&two_k, &bits, 4);
    return p * two_k;
}

/* p[j] = e^(p[j] - m) for j < n; returns their sum (16 partial sums as dot16). */
static inline float attn_exp_sum(float *restrict p, float m, int64_t n) {
    for (int64_t j = 0; j < n; j++) p[j] = attn_exp(p[j] - m);
    float acc[16] = {0};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += p[j + l];
    float s = fold16(acc);
    for (; j < n; j++) s += p[j];
    return s;
}

/* o += a * v; restrict: o is never v, and the compiler may vectorize without run-time checks. */
static inline void attn_axpy(float *restrict o, float a, const float *restrict v, int64_t n) {
    for (int64_t c = 0; c < n; c++) o[c] += a * v[c];
}

/* Columns of o summed in registers per pass over the keys: 8 ymm (AVX2) / 8 xmm (baseline). */
#ifdef __AVX2__
#define ATTN_PV_BLOCK 64
#else
#define ATTN_PV_BLOCK 32
#endif

/* o[c] = sum over j < n, in order, of (p[j] * inv) * V[j][c]: the sums of attn_axpy from o = 0,
 * but a block of columns at a time kept in registers across the keys instead of o loaded and
 * stored once per key (the loop was half loads and stores). */
static inline void attn_pv(float *restrict o, const float *restrict p, float inv,
                           const float *restrict V, int64_t n, int64_t vd) {
    int64_t c0 = 0;
    for (; c0 + ATTN_PV_BLOCK <= vd; c0 += ATTN_PV_BLOCK) {
        float acc[ATTN_PV_BLOCK] = {0};
        for (int64_t j = 0; j < n; j++) {
            const float a = p[j] * inv, *v = V + j * vd + c0;
            for (int c = 0; c < ATTN_PV_BLOCK; c++) acc[c] += a * v[c];
        }
        memcpy(o + c0, acc, sizeof acc);
    }
    if (c0 < vd) {
        memset(o + c0, 0, (size_t)(vd - c0) * sizeof(float));
        for (int64_t j = 0; j < n; j++) attn_axpy(o + c0, p[j] * inv, V + j * vd + c0, vd - c0);
    }
}

/* Rows r0 .. r1 - 1 of the (T, H) query rows, r = t * H + h: each row's result depends on that row
 * only, so a split of the rows over threads gives the same bits. */
static inline void attention_loop(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                                  const float *kc, const float *vc, int64_t ctx, int64_t pos,
                                  int64_t window, float scale, float *out, float *p, int64_t r0,
                                  int64_t r1) {
    const int64_t G = H / Hkv;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t t = r / H, h = r % H;
        const int64_t i = pos + t;                                          /* query position */
        const int64_t lo = window > 0 && i >= window ? i - window + 1 : 0; /* keys lo..i visible */
        const int64_t n = i + 1 - lo;
        const int64_t kh = h / G;
        const float *qh = q + r * hd;
        const float *K = kc + (kh * ctx + lo) * hd, *V = vc + (kh * ctx + lo) * vd;
        float m = -INFINITY;
        int nan = 0;
        for (int64_t j = 0; j < n; j++) {
            p[j] = dot16(qh, K + j * hd, hd) * scale;
            m = p[j] > m ? p[j] : m;
            nan |= p[j] != p[j];
        }
        float *o = out + r * vd;
        if (nan || !(m > -INFINITY && m < INFINITY)) { /* NaN / inf scores: NaN out, as numpy */
            for (int64_t c = 0; c < vd; c++) o[c] = NAN;
            continue;
        }
        attn_pv(o, p, 1.0f / attn_exp_sum(p, m, n), V, n, vd);
    }
}

#endif
