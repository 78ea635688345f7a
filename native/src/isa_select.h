/* Which variants a CPU's feature bits make usable, and which of them the dispatcher picks: pure
 * functions of the bits (dispatch.c reads them from CPUID / XGETBV), so that a test can hand them
 * the bits of CPUs the machine is not (native/tests/test_platform.c). */
#ifndef LOWBIT_ISA_SELECT_H
#define LOWBIT_ISA_SELECT_H

#include <stdint.h>

#include "lowbit/lowbit.h"

/* The x86 feature registers the variants depend on (0 where the leaf does not exist) */
typedef struct {
    uint32_t leaf1_ecx;   /* CPUID.1:ECX: FMA (12), OSXSAVE (27), AVX (28), F16C (29) */
    uint32_t leaf7_ebx;   /* CPUID.(7,0):EBX: AVX2 (5), AVX512F (16) / DQ (17) / BW (30) / VL (31) */
    uint32_t leaf7_ecx;   /* CPUID.(7,0):ECX: AVX512_VBMI (1), AVX512_VNNI (11) */
    uint32_t leaf7_1_eax; /* CPUID.(7,1):EAX: AVX-VNNI (4) */
    uint64_t xcr0;        /* the register state the OS saves (XGETBV 0; 0 without OSXSAVE) */
} lowbit_x86_features;

#define LOWBIT_BIT(r, n) (((r) >> (n)) & 1u)

/* The x86 variants (LOWBIT_ISA_* bits) the CPU and OS support, scalar included */
static inline unsigned lowbit_x86_supported(const lowbit_x86_features *f) {
    unsigned m = 1u << LOWBIT_ISA_SCALAR;
    const unsigned c1 = f->leaf1_ecx, b7 = f->leaf7_ebx, c7 = f->leaf7_ecx;
    if (!LOWBIT_BIT(c1, 27) || !LOWBIT_BIT(c1, 28)) return m; /* no OSXSAVE or no AVX */
    const int os_ymm = (f->xcr0 & 0x6) == 0x6;   /* SSE + AVX state saved */
    const int os_zmm = (f->xcr0 & 0xe6) == 0xe6; /* + opmask, ZMM_Hi256, Hi16_ZMM */
    const int avx2 = os_ymm && LOWBIT_BIT(b7, 5) && LOWBIT_BIT(c1, 12) && LOWBIT_BIT(c1, 29);
    if (!avx2) return m;
    m |= 1u << LOWBIT_ISA_AVX2;
    m |= 1u << LOWBIT_ISA_AVXVNNI_EMULATED; /* AVX2 code */
    if (LOWBIT_BIT(f->leaf7_1_eax, 4)) m |= 1u << LOWBIT_ISA_AVXVNNI;
    if (os_zmm && LOWBIT_BIT(b7, 16) && LOWBIT_BIT(b7, 17) && LOWBIT_BIT(b7, 30) &&
        LOWBIT_BIT(b7, 31) && LOWBIT_BIT(c7, 11))
        m |= 1u << LOWBIT_ISA_AVX512VNNI;
    return m;
}

/* AVX512_VBMI usable (the list's `needs` VBMI): within the avx512vnni variant */
static inline int lowbit_x86_vbmi(const lowbit_x86_features *f) {
    return (lowbit_x86_supported(f) >> LOWBIT_ISA_AVX512VNNI & 1) && LOWBIT_BIT(f->leaf7_ecx, 1);
}

/* The variant the dispatcher runs among the usable ones (compiled and supported): the widest.
 * AVX-512 VNNI before AVX-VNNI (a CPU with both runs the 512-bit kernels); avxvnni_emulated
 * never (it exists to be forced in tests). */
static inline int lowbit_best_isa(unsigned usable) {
    static const int order[] = {LOWBIT_ISA_AVX512VNNI, LOWBIT_ISA_AVXVNNI, LOWBIT_ISA_AVX2,
                                LOWBIT_ISA_I8MM, LOWBIT_ISA_DOTPROD, LOWBIT_ISA_NEON};
    for (unsigned i = 0; i < sizeof order / sizeof order[0]; i++)
        if (usable & (1u << order[i])) return order[i];
    return LOWBIT_ISA_SCALAR;
}

#undef LOWBIT_BIT
#endif /* LOWBIT_ISA_SELECT_H */
