/* Walsh-Hadamard transform kernels: one table per ISA variant, picked from lowbit_isa_active().
 *
 * Every variant computes bit-for-bit the same result as the scalar reference in ref/fwht.c:
 * butterflies run in the same stage order (stride 1, 2, 4, ... for every element), sign flips are
 * exact (x * +-1), and the scale is one multiply after the last butterfly.  Blocking and SIMD only
 * change which elements are processed together, never the order of operations on one element.
 */
#ifndef LOWBIT_FWHT_KERNELS_H
#define LOWBIT_FWHT_KERNELS_H

#include <stdint.h>

#include "internal.h"

/* y = post * (scale * H_n (pre * x)) for one vector of n = 2^k elements (1 <= k <= 30), Sylvester
 * order, unnormalized butterflies.  src may equal dst (in place); otherwise they must not overlap.
 * pre / post (length n, values +-1) may be NULL.  Pass scale = 1 for no scaling. */
typedef void (*lowbit_fwht_run_f32_fn)(const float *src, float *dst, int64_t n, const float *pre,
                                        const float *post, float scale);
typedef void (*lowbit_fwht_run_f64_fn)(const double *src, double *dst, int64_t n,
                                        const double *pre, const double *post, double scale);

/* The m-point stage of an m * 2^k transform, in place: x holds m rows of len = 2^k elements
 * (row j at x + j * len) and becomes x[j][i] = post[j*len+i] * scale * sum_k H_m[j][k] x[k][i],
 * the sum taken as acc = 0, acc +-= x[k][i] for k = 0..m-1 (that order is part of the spec). */
typedef void (*lowbit_fwht_mstage_f32_fn)(float *x, int m, int64_t len, const float *post,
                                          float scale);
typedef void (*lowbit_fwht_mstage_f64_fn)(double *x, int m, int64_t len, const double *post,
                                          double scale);

/* 1 if every one of s[0..n) is exactly +1 or -1 (validation on the hot path, so it is a kernel). */
typedef int (*lowbit_fwht_signs_ok_f32_fn)(const float *s, int64_t n);
typedef int (*lowbit_fwht_signs_ok_f64_fn)(const double *s, int64_t n);

typedef struct lowbit_fwht_kernels {
    int isa; /* lowbit_isa of the variant that filled the last entry */
    lowbit_fwht_run_f32_fn pow2_f32;
    lowbit_fwht_run_f64_fn pow2_f64;
    lowbit_fwht_mstage_f32_fn mstage_f32;
    lowbit_fwht_mstage_f64_fn mstage_f64;
    lowbit_fwht_signs_ok_f32_fn signs_ok_f32;
    lowbit_fwht_signs_ok_f64_fn signs_ok_f64;
} lowbit_fwht_kernels;

/* Each fill function overwrites the entries it implements (start from the scalar table). */
void lowbit_fill_fwht_scalar(lowbit_fwht_kernels *k);
void lowbit_fill_fwht_avx2(lowbit_fwht_kernels *k);
void lowbit_fill_fwht_avx512(lowbit_fwht_kernels *k);
void lowbit_fill_fwht_neon(lowbit_fwht_kernels *k);

/* The table for the currently active ISA (tables built once, thread-safely; follows
 * lowbit_set_isa). */
const lowbit_fwht_kernels *lowbit_active_fwht(void);
/* The table for a given ISA, or NULL if that variant is not compiled in (tests). */
const lowbit_fwht_kernels *lowbit_fwht_kernels_for(int isa);

/* Scalar reference kernels (the spec), also used by SIMD variants for tiny sizes. */
void lowbit_fwht_pow2_f32_ref(const float *src, float *dst, int64_t n, const float *pre,
                              const float *post, float scale);
void lowbit_fwht_pow2_f64_ref(const double *src, double *dst, int64_t n, const double *pre,
                              const double *post, double scale);
void lowbit_fwht_mstage_f32_ref(float *x, int m, int64_t len, const float *post, float scale);
void lowbit_fwht_mstage_f64_ref(double *x, int m, int64_t len, const double *post, double scale);
int lowbit_fwht_signs_ok_f32_ref(const float *s, int64_t n);
int lowbit_fwht_signs_ok_f64_ref(const double *s, int64_t n);

/* The Hadamard matrix of order m (12, 20 or 28) as +-1 entries, row-major; NULL otherwise. */
const signed char *lowbit_hadamard_m(int m);

#endif /* LOWBIT_FWHT_KERNELS_H */
