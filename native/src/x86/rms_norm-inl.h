/* lowbit_rms_norm's row on x86 (ops_rms_row in ../ops_common.h, the same operations): the 8
 * partial sums of squares are the 8 lanes of one ymm, then the tail and the lanes in order; the
 * products 16 lanes a step in the includer's v16 (one zmm or two ymm: twice the loads in flight
 * of the 4-lane C when w comes from DRAM, as a layer's norm weights do).  ops_avx2.c and
 * ops_avx512.c include it after their v16 ops, with RMS_ENTRY the entry's name. */
#ifndef LOWBIT_RMS_NORM_INL_H
#define LOWBIT_RMS_NORM_INL_H
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* 1 / sqrt(mean(x^2) + eps) */
static inline __attribute__((always_inline)) float rms_inv8(const float *x, int64_t n, float eps) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(v, v));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    float s = 0;
    for (; i < n; i++) s += x[i] * x[i];
    for (int l = 0; l < 8; l++) s += lanes[l];
    return 1.0f / sqrtf(s * (1.0f / (float)n) + eps);
}

void RMS_ENTRY(const float *x, const float *w, int64_t n, float eps, float *y);
void RMS_ENTRY(const float *x, const float *w, int64_t n, float eps, float *y) {
    const float inv = rms_inv8(x, n, eps);
    const v16 vi = v16_set1(inv);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const v16 v = v16_mul(v16_load(x + i), vi);
        v16_store(y + i, w ? v16_mul(v, v16_load(w + i)) : v);
    }
    for (; i < n; i++) y[i] = w ? x[i] * inv * w[i] : x[i] * inv;
}
#endif
