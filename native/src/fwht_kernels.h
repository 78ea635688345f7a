/* Walsh-Hadamard transform kernels: one table per ISA variant, chosen by the kernel selector.
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

/* The kernel signatures and the table (lowbit_fwht_kernels) are in kernel_table.h; each variant's
 * table is an entry of the kernel list (role FWHT) whose function fills it. */
lowbit_fwht_sig fwht_ref, fwht_avx2, fwht_avx512, fwht_neon;

/* The table of the active ISA (the selector's, dispatch.c; follows lowbit_set_isa). */
const lowbit_fwht_kernels *lowbit_active_fwht(void);

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
