/* The software prefetch of the AMD entries of the GEMVs that stream their codes one run of memory
 * at a time (no two ranges side by side): each line LOWBIT_PF_L1_AMD bytes ahead in the run, into
 * L1.  The hardware prefetchers alone leave such a run short of the memory's rate there; nearer
 * than a few KB the prefetches only repeat the hardware's.  Any x86 variant's files include it. */
#ifndef LOWBIT_X86_PF_L1_INL_H
#define LOWBIT_X86_PF_L1_INL_H

#include <immintrin.h>

#ifndef LOWBIT_PF_L1_AMD
#define LOWBIT_PF_L1_AMD 12288
#endif

/* The line LOWBIT_PF_L1_AMD bytes past p, into L1 */
static inline __attribute__((always_inline)) void lowbit_pf_l1_amd(const void *p) {
    _mm_prefetch((const char *)p + LOWBIT_PF_L1_AMD, _MM_HINT_T0);
}

#endif
