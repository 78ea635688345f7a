/* CPU detection and the dispatch table.
 *
 * Variants are compiled per source file with their own ISA flags (see CMakeLists.txt) and
 * announced by LOWBIT_HAVE_<ISA> definitions.  Detection checks OS support, not just CPUID bits
 * (an OS that does not save ZMM/YMM state makes AVX-512/AVX2 unusable even if the CPU has them).
 * The table is filled once, thread-safely, in priority order; PYLOWBIT_ISA forces a variant. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h" /* LOWBIT_LINUX */
#include "platform.h" /* LOWBIT_X86, CPUID, once */
#if defined(__aarch64__) && defined(LOWBIT_LINUX)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

static const char *const ISA_NAMES[LOWBIT_ISA_COUNT] = {"scalar", "avx2", "avx512vnni", "neon",
                                                        "dotprod"};

const char *lowbit_isa_name(int isa) {
    return isa >= 0 && isa < LOWBIT_ISA_COUNT ? ISA_NAMES[isa] : NULL;
}

int lowbit_isa_from_name(const char *name) {
    if (!name) return LOWBIT_EISA;
    for (int i = 0; i < LOWBIT_ISA_COUNT; i++)
        if (strcmp(ISA_NAMES[i], name) == 0) return i;
    return LOWBIT_EISA;
}

unsigned lowbit_isa_compiled(void) {
    unsigned m = 1u << LOWBIT_ISA_SCALAR;
#ifdef LOWBIT_HAVE_AVX2
    m |= 1u << LOWBIT_ISA_AVX2;
#endif
#ifdef LOWBIT_HAVE_AVX512VNNI
    m |= 1u << LOWBIT_ISA_AVX512VNNI;
#endif
#ifdef LOWBIT_HAVE_NEON
    m |= 1u << LOWBIT_ISA_NEON;
#endif
#ifdef LOWBIT_HAVE_DOTPROD
    m |= 1u << LOWBIT_ISA_DOTPROD;
#endif
    return m;
}

int lowbit_cpu_is_intel(void) {
#ifdef LOWBIT_X86
    unsigned r[4];
    lowbit_cpuid(0, 0, r);
    return r[1] == 0x756e6547u && r[3] == 0x49656e69u && r[2] == 0x6c65746eu; /* "Genu" "ineI" "ntel" */
#else
    return 0;
#endif
}

static unsigned detect_supported(void) {
    unsigned m = 1u << LOWBIT_ISA_SCALAR;
#ifdef LOWBIT_X86
    const unsigned max_leaf = lowbit_cpuid_max();
    unsigned r[4];
    if (max_leaf < 1) return m;
    lowbit_cpuid(1, 0, r);
    unsigned b, c = r[2];
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return m;
    uint64_t xcr0 = lowbit_xgetbv0();
    const int os_ymm = (xcr0 & 0x6) == 0x6;   /* SSE + AVX state saved */
    const int os_zmm = (xcr0 & 0xe6) == 0xe6; /* + opmask, ZMM_Hi256, Hi16_ZMM */
    if (max_leaf < 7) return m;
    lowbit_cpuid(7, 0, r);
    b = r[1], c = r[2];
    const int avx2 = (b >> 5) & 1;
    const int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1,
              avx512vl = (b >> 31) & 1;
    const int avx512vnni = (c >> 11) & 1;
    if (os_ymm && avx2 && fma && f16c) m |= 1u << LOWBIT_ISA_AVX2;
    if (os_zmm && avx2 && fma && f16c && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni)
        m |= 1u << LOWBIT_ISA_AVX512VNNI;
#elif defined(__aarch64__)
    m |= 1u << LOWBIT_ISA_NEON; /* Advanced SIMD is mandatory on AArch64 */
#if defined(LOWBIT_LINUX)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) m |= 1u << LOWBIT_ISA_DOTPROD;
#elif defined(__APPLE__)
    int v = 0;
    size_t len = sizeof v;
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &len, NULL, 0) == 0 && v)
        m |= 1u << LOWBIT_ISA_DOTPROD;
#endif /* elsewhere (or a LOWBIT_PORTABLE build): NEON only, dotprod is not assumed */
#endif
    return m;
}

static unsigned g_supported;
static lowbit_kernels g_tables[LOWBIT_ISA_COUNT];
static _Atomic int g_active = -1;
static char g_env_error[256];
static lowbit_once g_once = LOWBIT_ONCE_INIT;

/* Scalar first, then each variant on top, so a variant only overrides what it implements. */
static void build_table(int isa, lowbit_kernels *k) {
    lowbit_fill_kernels_scalar(k);
    switch (isa) {
#ifdef LOWBIT_HAVE_AVX2
    case LOWBIT_ISA_AVX2: lowbit_fill_kernels_avx2(k); break;
#endif
#ifdef LOWBIT_HAVE_AVX512VNNI
    case LOWBIT_ISA_AVX512VNNI:
        lowbit_fill_kernels_avx2(k); /* AVX-512 machines run the AVX2 kernels it lacks */
        lowbit_fill_kernels_avx512vnni(k);
        break;
#endif
#ifdef LOWBIT_HAVE_NEON
    case LOWBIT_ISA_NEON: lowbit_fill_kernels_neon(k); break;
#endif
#ifdef LOWBIT_HAVE_DOTPROD
    case LOWBIT_ISA_DOTPROD:
        lowbit_fill_kernels_neon(k);
        lowbit_fill_kernels_dotprod(k);
        break;
#endif
    default: break;
    }
}

static int best_isa(unsigned usable) {
    static const int order[] = {LOWBIT_ISA_AVX512VNNI, LOWBIT_ISA_AVX2, LOWBIT_ISA_DOTPROD,
                                LOWBIT_ISA_NEON};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (usable & (1u << order[i])) return order[i];
    return LOWBIT_ISA_SCALAR;
}

static void init_once(void) {
    g_supported = detect_supported();
    unsigned usable = g_supported & lowbit_isa_compiled();
    for (int i = 0; i < LOWBIT_ISA_COUNT; i++)
        if (usable & (1u << i)) build_table(i, &g_tables[i]);
    int isa = best_isa(usable);
    const char *env = getenv("PYLOWBIT_ISA");
    if (env && *env) {
        int want = lowbit_isa_from_name(env);
        if (want < 0)
            snprintf(g_env_error, sizeof g_env_error,
                     "PYLOWBIT_ISA=%s is not a known variant (scalar, avx2, avx512vnni, neon, dotprod)",
                     env);
        else if (!(lowbit_isa_compiled() & (1u << want)))
            snprintf(g_env_error, sizeof g_env_error,
                     "PYLOWBIT_ISA=%s: this build does not contain that variant", env);
        else if (!(g_supported & (1u << want)))
            snprintf(g_env_error, sizeof g_env_error,
                     "PYLOWBIT_ISA=%s: this CPU (or OS) does not support that variant", env);
        else
            isa = want;
    }
    atomic_store(&g_active, isa);
}

static void ensure_init(void) { lowbit_once_run(&g_once, init_once); }

unsigned lowbit_isa_supported(void) {
    ensure_init();
    return g_supported;
}

int lowbit_isa_active(void) {
    ensure_init();
    return atomic_load(&g_active);
}

const char *lowbit_isa_env_error(void) {
    ensure_init();
    return g_env_error[0] ? g_env_error : NULL;
}

int lowbit_set_isa(int isa) {
    ensure_init();
    if (isa < 0 || isa >= LOWBIT_ISA_COUNT) return LOWBIT_EISA;
    if (!(lowbit_isa_compiled() & g_supported & (1u << isa))) return LOWBIT_EISA;
    atomic_store(&g_active, isa);
    return LOWBIT_OK;
}

const lowbit_kernels *lowbit_active_kernels(void) {
    ensure_init();
    return &g_tables[atomic_load(&g_active)];
}
