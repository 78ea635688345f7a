/* Registers the avx2 kernels in the dispatch table (entries left unset keep the fallback).
 * The kernels live in kernels_avx2.c, gemm_avx2.c (the packed GEMM) and kquant_avx2.c, compiled
 * with -mavx2 -mfma -mf16c, as this file is. */
#include "../internal.h"

void lowbit_register_avx2_kernels(lowbit_kernels *k);
void lowbit_register_gemm_avx2(lowbit_kernels *k);
void lowbit_register_kquant_avx2(lowbit_kernels *k);

void lowbit_register_float_gemv_avx2(lowbit_kernels *k); /* float_gemv_*.c: F32 / F16 GEMV */

void lowbit_fill_kernels_avx2(lowbit_kernels *k) {
    lowbit_register_avx2_kernels(k);
    lowbit_register_gemm_avx2(k);
    lowbit_register_kquant_avx2(k);
    lowbit_register_float_gemv_avx2(k);
}
