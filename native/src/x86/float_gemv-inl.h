/* The float GEMV's row loops, shared by float_gemv_avx2.c and float_gemv_avx512.c (each compiled
 * with its own flags), in the reference's order (ref/dot.c, DEFINE_FLOAT_DOT): 16 fused lane
 * sums, lane l taking w[j] * x[j] for j = l mod 16, folded as l + 8, l + 4, l + 2, l + 1, then the
 * last cols % 16 products fused in order; four rows at a time share each x load.  The includer
 * defines vec16 (16 float lanes), vec16_zero, vec16_loadx (16 floats of x), vec16_fmadd (w * x +
 * acc, lane by lane), vec16_fold (the folds above) and the weight loaders its DEFINE_GEMV uses. */
#ifndef LOWBIT_FLOAT_GEMV_INL_H
#define LOWBIT_FLOAT_GEMV_INL_H

static inline float to_f32(float v) { return v; }

/* name(w, cols, r0, r1, x, y): y[r - r0] = W[r] . x for the weights of type T, 16 read by LOAD16,
 * one by TOF.  PF > 0: software prefetch PF bytes ahead, into the cache level of HINT.  Four rows
 * are one contiguous run of 4 cols elements read as four streams side by side; it is prefetched as one run in address
 * order, 64 elements (16 of each row) per step from PF bytes past the run's start, so each line
 * is asked for once and, for rows up to PF / 3 bytes long, before any of the four streams reads it
 * (a prefetch past the matrix's end is harmless).  The prefetch changes no arithmetic: every
 * variant stays bit-identical. */
#define DEFINE_GEMV_PF_HINT(name, T, LOAD16, TOF, PF, HINT)                                         \
    void name(const T *w, int64_t cols, int64_t r0, int64_t r1, const float *x, float *y) {        \
        const int64_t c16 = cols & ~(int64_t)15;                                                   \
        int64_t r = r0;                                                                            \
        for (; r + 4 <= r1; r += 4) {                                                              \
            const T *row[4] = {w + r * cols, w + (r + 1) * cols, w + (r + 2) * cols,               \
                               w + (r + 3) * cols};                                                \
            vec16 a[4];                                                                            \
            for (int i = 0; i < 4; i++) a[i] = vec16_zero();                                       \
            const char *pf = (const char *)row[0] + (PF);                                          \
            for (int64_t j = 0; j < c16; j += 16) {                                                \
                if (PF)                                                                            \
                    for (int l = 0; l < 64 * (int)sizeof(T); l += 64)                              \
                        _mm_prefetch(pf + 4 * j * (int64_t)sizeof(T) + l, HINT);                   \
                const vec16 xv = vec16_loadx(x + j);                                               \
                for (int i = 0; i < 4; i++) a[i] = vec16_fmadd(LOAD16(row[i] + j), xv, a[i]);      \
            }                                                                                      \
            for (int i = 0; i < 4; i++) {                                                          \
                float s = vec16_fold(a[i]);                                                        \
                for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[i][j]), x[j], s);            \
                y[r + i - r0] = s;                                                                 \
            }                                                                                      \
        }                                                                                          \
        for (; r < r1; r++) {                                                                      \
            const T *row = w + r * cols;                                                           \
            vec16 a = vec16_zero();                                                                \
            for (int64_t j = 0; j < c16; j += 16)                                                  \
                a = vec16_fmadd(LOAD16(row + j), vec16_loadx(x + j), a);                           \
            float s = vec16_fold(a);                                                               \
            for (int64_t j = c16; j < cols; j++) s = fmaf(TOF(row[j]), x[j], s);                   \
            y[r - r0] = s;                                                                         \
        }                                                                                          \
    }
#define DEFINE_GEMV_PF(name, T, LOAD16, TOF, PF) DEFINE_GEMV_PF_HINT(name, T, LOAD16, TOF, PF, _MM_HINT_T1)
#define DEFINE_GEMV(name, T, LOAD16, TOF) DEFINE_GEMV_PF(name, T, LOAD16, TOF, 0)

#endif /* LOWBIT_FLOAT_GEMV_INL_H */
