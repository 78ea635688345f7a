/* Registers the avx2 kernels in the dispatch table (entries left unset keep the fallback).
 * The kernels live in kernels_avx2.c and gemm_avx2.c (the packed GEMM), compiled with
 * -mavx2 -mfma -mf16c, as this file is. */
#include "../internal.h"

void lowbit_register_avx2_kernels(lowbit_kernels *k);
void lowbit_register_avx2_gemm(lowbit_kernels *k);

void lowbit_fill_kernels_avx2(lowbit_kernels *k) {
    lowbit_register_avx2_kernels(k);
    lowbit_register_avx2_gemm(k);
}
