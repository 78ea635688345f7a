/* The attention loop of lowbit_attention (ops.c), compiled twice: in ops.c for the baseline ISA and
 * in x86/ops_avx2.c with AVX2 + FMA (the same C, 8 lanes wide).  It is O(T * S) per head: at prompt
 * lengths the baseline build was slower than numpy's BLAS had been.  Arguments are checked, and the
 * new keys / values stored, by lowbit_attention; p is scratch for pos + T scores. */
#ifndef LOWBIT_OPS_ATTENTION_H
#define LOWBIT_OPS_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define ATTN_LANES 8

/* 8 independent partial sums: a fixed order the compiler keeps in one vector register. */
static inline float attn_dot(const float *a, const float *b, int64_t n) {
    float acc[ATTN_LANES] = {0};
    int64_t i = 0;
    for (; i + ATTN_LANES <= n; i += ATTN_LANES)
        for (int l = 0; l < ATTN_LANES; l++) acc[l] += a[i + l] * b[i + l];
    float s = 0;
    for (; i < n; i++) s += a[i] * b[i];
    for (int l = 0; l < ATTN_LANES; l++) s += acc[l];
    return s;
}

static inline void attention_loop(const float *q, int64_t T, int64_t H, int64_t Hkv, int64_t hd,
                                  int64_t vd, const float *kc, const float *vc, int64_t ctx,
                                  int64_t pos, int64_t window, float scale, float *out, float *p) {
    const int64_t G = H / Hkv;
    for (int64_t t = 0; t < T; t++) {
        const int64_t i = pos + t;                                          /* query position */
        const int64_t lo = window > 0 && i >= window ? i - window + 1 : 0; /* keys lo..i visible */
        const int64_t n = i + 1 - lo;
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / G;
            const float *qh = q + (t * H + h) * hd;
            const float *K = kc + (kh * ctx + lo) * hd, *V = vc + (kh * ctx + lo) * vd;
            float m = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                p[j] = attn_dot(qh, K + j * hd, hd) * scale;
                m = p[j] > m ? p[j] : m;
            }
            float s = 0; /* softmax; n >= 1 (a NaN score gives NaN out, like numpy) */
            for (int64_t j = 0; j < n; j++) {
                p[j] = expf(p[j] - m);
                s += p[j];
            }
            const float inv = 1.0f / s;
            float *o = out + (t * H + h) * vd;
            memset(o, 0, (size_t)vd * sizeof(float));
            for (int64_t j = 0; j < n; j++) {
                const float pj = p[j] * inv, *Vj = V + j * vd;
                for (int64_t c = 0; c < vd; c++) o[c] += pj * Vj[c];
            }
        }
    }
}

#endif
