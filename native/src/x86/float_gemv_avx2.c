/* F32 / F16 / BF16 GEMV (the tied-embedding LM head) with AVX2 + F16C, in the reference's order (ref/dot.c,
 * DEFINE_FLOAT_DOT): 16 fused lane sums, lane l taking w[j] * x[j] for j = l mod 16, folded as
 * l + 8, l + 4, l + 2, l + 1, then the last cols % 16 products fused in order.  Here lanes 0-7 are
 * one register and 8-15 another, so the first fold is one add; four rows at a time share each x
 * load.  (FMA against a product and a sum: the same bytes/s from DRAM, faster in cache.) */
#include <immintrin.h>

#include "../internal.h"

static inline __m256 load_f32(const float *p) { return _mm256_loadu_ps(p); }
static inline __m256 load_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 load_bf16(const uint16_t *p) { /* BF16: the upper half of a float32 */
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline float to_f32(float v) { return v; }

/* The folds l + 4, l + 2, l + 1 of the 8 lanes left after the first. */
static inline float fold8(__m256 t8) {
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

#define DEFINE_GEMV(name, T, LOAD, TOF)                                                            \
    void name(const T *w, int64_t cols, int64_t r0, int64_t r1, const float *x, float *y) {        \
        const int64_t c16 = cols & ~(int64_t)15;                                                   \
        int64_t r = r0;                                                                            \
        for (; r + 4 <= r1; r += 4) {                                                              \
            const T *row[4] = {w + r * cols, w + (r + 1) * cols, w + (r + 2) * cols,               \
                               w + (r + 3) * cols};                                                \
            __m256 a[4], b[4];                                                                     \
            for (int i = 0; i < 4; i++) a[i] = b[i] = _mm256_setzero_ps();                         \
            for (int64_t j = 0; j < c16; j += 16) {                                                \
                const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);         \
                for (int i = 0; i < 4; i++) {                                                      \
                    a[i] = _mm256_fmadd_ps(LOAD(row[i] + j), x0, a[i]);               \
                    b[i] = _mm256_fmadd_ps(LOAD(row[i] + j + 8), x1, b[i]);           \
                }                                                                                  \
            }                                                                                      \
            for (int i = 0; i < 4; i++) {                                                          \
                float s = fold8(_mm256_add_ps(a[i], b[i]));                                        \
                for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[i][j]), x[j], s);                   \
                y[r + i - r0] = s;                                                                 \
            }                                                                                      \
        }                                                                                          \
        for (; r < r1; r++) {                                                                      \
            const T *row = w + r * cols;                                                           \
            __m256 a = _mm256_setzero_ps(), b = a;                                                 \
            for (int64_t j = 0; j < c16; j += 16) {                                                \
                a = _mm256_fmadd_ps(LOAD(row + j), _mm256_loadu_ps(x + j), a);        \
                b = _mm256_fmadd_ps(LOAD(row + j + 8), _mm256_loadu_ps(x + j + 8), b);\
            }                                                                                      \
            float s = fold8(_mm256_add_ps(a, b));                                                  \
            for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[j]), x[j], s);                          \
            y[r - r0] = s;                                                                         \
        }                                                                                          \
    }

DEFINE_GEMV(gemv_f32_avx2, float, load_f32, to_f32)
DEFINE_GEMV(gemv_f16_avx2, uint16_t, load_f16, _cvtsh_ss)
DEFINE_GEMV(gemv_bf16_avx2, uint16_t, load_bf16, lowbit_bf16_to_fp32)

