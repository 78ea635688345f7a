/* The compiler-dependent side of platform.h: CPUID and XGETBV through what each compiler offers
 * (<cpuid.h> and inline assembly on GCC and clang, <intrin.h> on MSVC and clang-cl). */
#include "platform.h"

#if defined(LOWBIT_X86)
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif

void lowbit_cpuid(unsigned leaf, unsigned subleaf, unsigned r[4]) {
#if defined(_MSC_VER)
    int v[4];
    __cpuidex(v, (int)leaf, (int)subleaf);
    for (int i = 0; i < 4; i++) r[i] = (unsigned)v[i];
#else
    __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
#endif
}

unsigned lowbit_cpuid_max(void) {
    unsigned r[4];
    lowbit_cpuid(0, 0, r);
    return r[0];
}

uint64_t lowbit_xgetbv0(void) {
#if defined(_MSC_VER)
    return _xgetbv(0);
#else
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
#endif
}
#else
typedef int lowbit_platform_unused; /* ISO C: a translation unit declares something */
#endif
