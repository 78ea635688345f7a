/* Registers the neon kernels in the dispatch table (entries left unset keep the fallback). */
#include "../internal.h"

void lowbit_fill_kernels_neon(lowbit_kernels *k) { (void)k; }
