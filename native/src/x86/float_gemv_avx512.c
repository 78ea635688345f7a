/* F32 / F16 / BF16 GEMV with AVX-512, in the reference's order (ref/dot.c, DEFINE_FLOAT_DOT; see
 * float_gemv_avx2.c): the 16 lane sums are one register, the first fold its two halves. */
#include <immintrin.h>

#include "../internal.h"

static inline __m512 load_f32(const float *p) { return _mm512_loadu_ps(p); }
static inline __m512 load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline __m512 load_bf16(const uint16_t *p) { /* BF16: the upper half of a float32 */
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
static inline float to_f32(float v) { return v; }

static inline float fold16(__m512 a) {
    const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
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
            __m512 a[4];                                                                           \
            for (int i = 0; i < 4; i++) a[i] = _mm512_setzero_ps();                                \
            for (int64_t j = 0; j < c16; j += 16) {                                                \
                const __m512 xv = _mm512_loadu_ps(x + j);                                          \
                for (int i = 0; i < 4; i++) a[i] = _mm512_fmadd_ps(LOAD(row[i] + j), xv, a[i]); \
            }                                                                                      \
            for (int i = 0; i < 4; i++) {                                                          \
                float s = fold16(a[i]);                                                            \
                for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[i][j]), x[j], s);                   \
                y[r + i - r0] = s;                                                                 \
            }                                                                                      \
        }                                                                                          \
        for (; r < r1; r++) {                                                                      \
            const T *row = w + r * cols;                                                           \
            __m512 a = _mm512_setzero_ps();                                                        \
            for (int64_t j = 0; j < c16; j += 16)                                                  \
                a = _mm512_fmadd_ps(LOAD(row + j), _mm512_loadu_ps(x + j), a);        \
            float s = fold16(a);                                                                   \
            for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[j]), x[j], s);                          \
            y[r - r0] = s;                                                                         \
        }                                                                                          \
    }

DEFINE_GEMV(gemv_f32_avx512, float, load_f32, to_f32)
DEFINE_GEMV(gemv_f16_avx512, uint16_t, load_f16, _cvtsh_ss)
DEFINE_GEMV(gemv_bf16_avx512, uint16_t, load_bf16, lowbit_bf16_to_fp32)

