/* AVX-512 VNNI packed GEMM (the prompt path). */
#include <immintrin.h>

#include "../internal.h"

void lowbit_register_gemm_avx512vnni(lowbit_kernels *k) { (void)k; }
