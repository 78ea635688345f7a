/* Registers the avx512vnni kernels in the dispatch table (entries left unset keep the fallback). */
#include "../internal.h"

void lowbit_fill_kernels_avx512vnni(lowbit_kernels *k) { (void)k; }
