/* lowbit_rms_norm's row on x86 (ops_rms_row in ../ops_common.h, the same operations): the 8
 * partial sums of squares are the 8 lanes of one ymm, then the tail and the lanes in order.
 * Shared by ops_avx2.c and ops_avx512.c, which multiply 8 or 16 lanes wide. */
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
#endif
