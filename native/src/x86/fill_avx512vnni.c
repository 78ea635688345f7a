/* Registers the avx512vnni kernels in the dispatch table (entries left unset keep the fallback:
 * the dispatcher fills the AVX2 kernels first, so this table is AVX2 plus what is here).
 * The kernels live in kernels_avx512vnni.c (packed GEMV) and gemm_avx512vnni.c (packed GEMM),
 * compiled with the AVX-512 flags (CMakeLists.txt), as this file is. */
#include "../internal.h"

void lowbit_register_gemv_avx512vnni(lowbit_kernels *k);
void lowbit_register_gemm_avx512vnni(lowbit_kernels *k);
void lowbit_register_q8_avx512vnni(lowbit_kernels *k); /* q8_avx512vnni.c: Q8_0 file-layout GEMV */

void lowbit_register_float_gemv_avx512(lowbit_kernels *k); /* float_gemv_*.c: F32 / F16 GEMV */
/* base3_avx512vbmi.c: the dense base-3 layout (needs VBMI; after the 2-bit GEMM, which it runs) */
void lowbit_register_base3_avx512vbmi(lowbit_kernels *k);

void lowbit_fill_kernels_avx512vnni(lowbit_kernels *k) {
    lowbit_register_gemv_avx512vnni(k);
    lowbit_register_gemm_avx512vnni(k);
    lowbit_register_q8_avx512vnni(k);
    lowbit_register_float_gemv_avx512(k);
    lowbit_register_base3_avx512vbmi(k);
}
