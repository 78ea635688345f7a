/* Registers the avx2 kernels in the dispatch table (entries left unset keep the fallback). */
#include "../internal.h"

void lowbit_fill_kernels_avx2(lowbit_kernels *k) { (void)k; }
