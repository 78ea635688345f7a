/* AVX-512 VNNI packed GEMV (the decode path). */
#include <immintrin.h>

#include "../internal.h"

void lowbit_register_gemv_avx512vnni(lowbit_kernels *k) { (void)k; }
