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
#include "isa_select.h"
#include "platform.h" /* LOWBIT_X86, CPUID, once */
#if defined(__aarch64__) && defined(LOWBIT_LINUX)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

static const char *const ISA_NAMES[LOWBIT_ISA_COUNT] = {
    "scalar", "avx2", "avx512vnni", "neon", "dotprod", "avxvnni", "avxvnni_emulated", "i8mm"};

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
#ifdef LOWBIT_HAVE_AVXVNNI
    m |= 1u << LOWBIT_ISA_AVXVNNI;
#endif
#ifdef LOWBIT_HAVE_AVXVNNI_EMULATED
    m |= 1u << LOWBIT_ISA_AVXVNNI_EMULATED;
#endif
#ifdef LOWBIT_HAVE_I8MM
    m |= 1u << LOWBIT_ISA_I8MM;
#endif
    return m;
}

/* an Intel core; an AMD one; an L1 data cache of 48 KB or more; AVX512_VBMI usable (the list's
 * `needs`) */
static int g_intel, g_amd, g_l1_48k, g_vbmi;

/* Whether CPUID leaf 0 names this vendor (its 12 characters: EBX, EDX, ECX) */
static int cpu_vendor_is(const char *name) {
#ifdef LOWBIT_X86
    unsigned r[4];
    char v[12];
    lowbit_cpuid(0, 0, r);
    memcpy(v, &r[1], 4), memcpy(v + 4, &r[3], 4), memcpy(v + 8, &r[2], 4);
    return !memcmp(v, name, 12);
#else
    (void)name;
    return 0;
#endif
}

/* The L1 data cache in KB, from AMD's extended leaf 0x80000005 (ECX bits 31-24); 0 where not
 * reported there (Intel reports it elsewhere: no entry needs it on Intel) */
static int amd_l1d_kb(void) {
#ifdef LOWBIT_X86
    unsigned r[4];
    lowbit_cpuid(0x80000000u, 0, r);
    if (r[0] < 0x80000005u) return 0;
    lowbit_cpuid(0x80000005u, 0, r);
    return (int)(r[2] >> 24);
#else
    return 0;
#endif
}

#if defined(__aarch64__) && defined(__APPLE__)
static int apple_feature(const char *name) { /* a hw.optional.arm.FEAT_* sysctl: 1 if present */
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v;
}
#endif

static unsigned detect_supported(void) {
    unsigned m = 1u << LOWBIT_ISA_SCALAR;
#ifdef LOWBIT_X86
    const unsigned max_leaf = lowbit_cpuid_max();
    unsigned r[4];
    lowbit_x86_features f = {0};
    if (max_leaf < 1) return m;
    lowbit_cpuid(1, 0, r);
    f.leaf1_ecx = r[2];
    if ((f.leaf1_ecx >> 27) & 1) f.xcr0 = lowbit_xgetbv0(); /* OSXSAVE: XGETBV exists */
    if (max_leaf >= 7) {
        lowbit_cpuid(7, 0, r);
        f.leaf7_ebx = r[1], f.leaf7_ecx = r[2];
        if (r[0] >= 1) { /* the highest subleaf of leaf 7 */
            lowbit_cpuid(7, 1, r);
            f.leaf7_1_eax = r[0];
        }
    }
    m = lowbit_x86_supported(&f);
    g_vbmi = lowbit_x86_vbmi(&f);
#elif defined(__aarch64__)
    m |= 1u << LOWBIT_ISA_NEON; /* Advanced SIMD is mandatory on AArch64 */
    /* i8mm builds on dotprod (its chain falls back to dotprod's kernels): both are required */
#if defined(LOWBIT_LINUX)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) {
        m |= 1u << LOWBIT_ISA_DOTPROD;
        if (getauxval(AT_HWCAP2) & HWCAP2_I8MM) m |= 1u << LOWBIT_ISA_I8MM;
    }
#elif defined(__APPLE__)
    if (apple_feature("hw.optional.arm.FEAT_DotProd")) {
        m |= 1u << LOWBIT_ISA_DOTPROD;
        if (apple_feature("hw.optional.arm.FEAT_I8MM")) m |= 1u << LOWBIT_ISA_I8MM;
    }
#endif /* elsewhere (Windows on Arm, a LOWBIT_PORTABLE build): NEON only, nothing is assumed */
#endif
    return m;
}

static unsigned g_supported;
static lowbit_kernels g_tables[LOWBIT_ISA_COUNT];
static _Atomic int g_active = -1;
static char g_env_error[256];
static lowbit_once g_once = LOWBIT_ONCE_INIT;

static void init_once(void);
static void ensure_init(void) { lowbit_once_run(&g_once, init_once); }

/* ---- the selector ----------------------------------------------------------------------------- */

/* Where each variant looks for a kernel, in order: its own entries, then those of the variants it
 * builds on.  The one place the fallback order is written. */
#define CHAIN_MAX 4
static const int FALLBACK[LOWBIT_ISA_COUNT][CHAIN_MAX] = {
    [LOWBIT_ISA_SCALAR] = {LOWBIT_ISA_SCALAR, -1, -1, -1},
    [LOWBIT_ISA_AVX2] = {LOWBIT_ISA_AVX2, LOWBIT_ISA_SCALAR, -1, -1},
    [LOWBIT_ISA_AVX512VNNI] = {LOWBIT_ISA_AVX512VNNI, LOWBIT_ISA_AVX2, LOWBIT_ISA_SCALAR, -1},
    [LOWBIT_ISA_NEON] = {LOWBIT_ISA_NEON, LOWBIT_ISA_SCALAR, -1, -1},
    [LOWBIT_ISA_DOTPROD] = {LOWBIT_ISA_DOTPROD, LOWBIT_ISA_NEON, LOWBIT_ISA_SCALAR, -1},
    [LOWBIT_ISA_I8MM] = {LOWBIT_ISA_I8MM, LOWBIT_ISA_DOTPROD, LOWBIT_ISA_NEON, LOWBIT_ISA_SCALAR},
    [LOWBIT_ISA_AVXVNNI] = {LOWBIT_ISA_AVXVNNI, LOWBIT_ISA_AVX2, LOWBIT_ISA_SCALAR, -1},
    [LOWBIT_ISA_AVXVNNI_EMULATED] = {LOWBIT_ISA_AVXVNNI_EMULATED, LOWBIT_ISA_AVX2,
                                     LOWBIT_ISA_SCALAR, -1},
};

static int g_prefer = -1; /* lowbit_kernel_prefer's entry */

static int fits(const lowbit_kernel_entry *e, int type, int layout, int role,
                const lowbit_matrix *m) {
    return e->layout == layout && e->role == role && (e->type == -1 || e->type == type) &&
           (!m || e->accepts(m));
}

/* Whether this CPU has what `needs` asks beyond the ISA (LOWBIT_NEEDS_*) */
static int needs_met(int needs) {
    return (!(needs & LOWBIT_NEEDS_INTEL) || g_intel) && (!(needs & LOWBIT_NEEDS_AMD) || g_amd) &&
           (!(needs & LOWBIT_NEEDS_L1_48K) || g_l1_48k) &&
           (!(needs & LOWBIT_NEEDS_NOT_AMD_L1_48K) || !g_l1_48k) &&
           (!(needs & LOWBIT_NEEDS_VBMI) || g_vbmi);
}

/* The first entry of isa's chain for (layout, role) that reads `type` (or any type) and takes m
 * (packed entries; NULL: not asked), whose needs this CPU meets; -1 if none. */
static int select_entry(int isa, int type, int layout, int role, const lowbit_matrix *m) {
    /* a preferred entry runs on any vendor and cache size, never without an instruction set it
     * needs */
    if (g_prefer >= 0 && fits(&lowbit_kernel_list[g_prefer], type, layout, role, m) &&
        needs_met(lowbit_kernel_list[g_prefer].needs &
                  ~(LOWBIT_NEEDS_INTEL | LOWBIT_NEEDS_AMD | LOWBIT_NEEDS_L1_48K |
                    LOWBIT_NEEDS_NOT_AMD_L1_48K)))
        for (int c = 0; c < CHAIN_MAX && FALLBACK[isa][c] >= 0; c++)
            if (lowbit_kernel_list[g_prefer].isa == FALLBACK[isa][c]) return g_prefer;
    for (int c = 0; c < CHAIN_MAX && FALLBACK[isa][c] >= 0; c++)
        for (int i = 0; i < lowbit_kernel_list_count; i++) {
            const lowbit_kernel_entry *e = &lowbit_kernel_list[i];
            if (e->isa != FALLBACK[isa][c] || !fits(e, type, layout, role, m)) continue;
            if (!needs_met(e->needs)) continue;
            return i;
        }
    return -1;
}

static lowbit_kernel_fn entry_fn(int i) {
    return i >= 0 ? lowbit_kernel_list[i].fn : (lowbit_kernel_fn){0};
}

static void build_table(int isa, lowbit_kernels *k) {
    k->isa = isa;
#define SLOT(K, T, name)                                                                           \
    k->gemv[K] = entry_fn(select_entry(isa, T, LOWBIT_LAYOUT_FILE, LOWBIT_ROLE_GEMV, NULL)).gemv;    \
    k->gemm[K] = entry_fn(select_entry(isa, T, LOWBIT_LAYOUT_FILE, LOWBIT_ROLE_GEMM, NULL)).gemm;
    LOWBIT_FOR_EACH_QUANT_TYPE(SLOT)
    LOWBIT_FOR_EACH_KQUANT(SLOT)
#undef SLOT
    k->quantize_act = entry_fn(select_entry(isa, -1, LOWBIT_LAYOUT_NONE, LOWBIT_ROLE_QUANTIZE, NULL)).quantize;
    k->read_bytes = entry_fn(select_entry(isa, -1, LOWBIT_LAYOUT_NONE, LOWBIT_ROLE_READ, NULL)).read;
    const int fl = LOWBIT_LAYOUT_FILE, fg = LOWBIT_ROLE_FLOAT_GEMV;
    k->gemv_f32 = entry_fn(select_entry(isa, LOWBIT_TYPE_F32, fl, fg, NULL)).gemv_f32;
    k->gemv_f16 = entry_fn(select_entry(isa, LOWBIT_TYPE_F16, fl, fg, NULL)).gemv_u16;
    k->gemv_bf16 = entry_fn(select_entry(isa, LOWBIT_TYPE_BF16, fl, fg, NULL)).gemv_u16;
    entry_fn(select_entry(isa, -1, LOWBIT_LAYOUT_NONE, LOWBIT_ROLE_FWHT, NULL)).fwht(&k->fwht);
    const int no = LOWBIT_LAYOUT_NONE, op = LOWBIT_ROLE_OP;
    k->attention = entry_fn(select_entry(isa, LOWBIT_OP_ATTENTION, no, op, NULL)).attention;
    k->silu_mul = entry_fn(select_entry(isa, LOWBIT_OP_SILU_MUL, no, op, NULL)).gate_mul;
    k->gelu_mul = entry_fn(select_entry(isa, LOWBIT_OP_GELU_MUL, no, op, NULL)).gate_mul;
    k->rms_norm = entry_fn(select_entry(isa, LOWBIT_OP_RMS_NORM, no, op, NULL)).rms_norm;
    k->gdn = entry_fn(select_entry(isa, LOWBIT_OP_GDN, no, op, NULL)).gdn();
}

static int usable(int isa) {
    return isa >= 0 && isa < LOWBIT_ISA_COUNT &&
           (g_supported & lowbit_isa_compiled() & (1u << isa));
}

void lowbit_plan_packed(lowbit_matrix *m) {
    ensure_init();
    const int L = m->base3f   ? LOWBIT_LAYOUT_BASE3F
                  : m->base3  ? LOWBIT_LAYOUT_BASE3
                  : m->rows16 ? LOWBIT_LAYOUT_ROWS16
                  : m->rows64 ? LOWBIT_LAYOUT_ROWS64
                  : m->q8rows ? LOWBIT_LAYOUT_Q8ROWS
                              : LOWBIT_LAYOUT_PACKED;
    for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++) {
        if (!usable(isa)) continue;
        lowbit_packed_plan *p = &m->plan[isa];
        p->gemv = entry_fn(select_entry(isa, m->type, L, LOWBIT_ROLE_GEMV, m)).packed_gemv;
        p->pair = entry_fn(select_entry(isa, m->type, L, LOWBIT_ROLE_PAIR_GEMV, m)).pair;
        p->gemm = entry_fn(select_entry(isa, m->type, L, LOWBIT_ROLE_GEMM, m)).packed_gemm;
    }
}

/* The shape fields of a packed matrix of `type` with rows of `cols` in `layout` (PACKED, BASE3 and
 * BASE3F: TQ1_0 / PTQ1_0 only, ROWS16; ROWS64: Q1_0, which has no other;
 * Q8ROWS: Q8_0, the same), or 0. */
static int describe_packed(int type, int layout, int64_t cols, lowbit_matrix *m) {
    if ((layout == LOWBIT_LAYOUT_BASE3 || layout == LOWBIT_LAYOUT_BASE3F) && !lowbit_type_base3(type))
        return 0;
    if (!lowbit_type_file_repack_fits(type, layout)) return 0;
    if (lowbit_matrix_describe(type, cols, m) != LOWBIT_OK || !m->packed) return 0;
    lowbit_matrix_set_layout(m, layout);
    return 1;
}

/* Where entry i's variant stands in isa's fallback chain (0: isa itself) */
static int chain_pos(int isa, int i) {
    int c = 0;
    while (c < CHAIN_MAX && FALLBACK[isa][c] >= 0 && FALLBACK[isa][c] != lowbit_kernel_list[i].isa) c++;
    return c;
}

int lowbit_layout_has_kernel(const lowbit_matrix *m, int layout) {
    ensure_init();
    const int isa = lowbit_isa_active();
    lowbit_matrix in = *m;
    lowbit_matrix_set_layout(&in, layout);
    const int i = select_entry(isa, in.type, layout, LOWBIT_ROLE_GEMV, &in);
    if (i < 0 || lowbit_kernel_list[i].isa == LOWBIT_ISA_SCALAR ||
        (lowbit_kernel_list[i].needs & LOWBIT_NEEDS_ASKED))
        return 0;
    /* not a layout whose GEMV only a variant further down the chain has, where the variant runs the
     * matrix's own layout (the file's, or the 2-bit row groups) itself: an AVX-512 core keeps its
     * 512-bit kernels rather than take a 256-bit one with a layout */
    const int own_layout =
        lowbit_type_file_repack(m->type) >= 0 ? LOWBIT_LAYOUT_FILE : LOWBIT_LAYOUT_PACKED;
    lowbit_matrix own = *m;
    lowbit_matrix_set_layout(&own, LOWBIT_LAYOUT_PACKED);
    const int j = select_entry(isa, own.type, own_layout, LOWBIT_ROLE_GEMV,
                               own_layout == LOWBIT_LAYOUT_FILE ? NULL : &own);
    return j < 0 || chain_pos(isa, i) <= chain_pos(isa, j);
}

static void init_once(void) {
    g_supported = detect_supported();
    /* the test-only variant runs on any AVX2 CPU, but counts as supported only where it is built:
     * callers walk the supported list to run every variant */
    if (!(lowbit_isa_compiled() & (1u << LOWBIT_ISA_AVXVNNI_EMULATED)))
        g_supported &= ~(1u << LOWBIT_ISA_AVXVNNI_EMULATED);
    g_intel = cpu_vendor_is("GenuineIntel");
    g_amd = cpu_vendor_is("AuthenticAMD");
    g_l1_48k = g_amd && amd_l1d_kb() >= 48;
    unsigned usable = g_supported & lowbit_isa_compiled();
    for (int i = 0; i < LOWBIT_ISA_COUNT; i++)
        if (usable & (1u << i)) build_table(i, &g_tables[i]);
    int isa = lowbit_best_isa(usable);
    const char *env = getenv("PYLOWBIT_ISA");
    if (env && *env) {
        int want = lowbit_isa_from_name(env);
        if (want < 0) {
            int n = snprintf(g_env_error, sizeof g_env_error,
                             "PYLOWBIT_ISA=%s is not a known variant (", env);
            for (int i = 0; i < LOWBIT_ISA_COUNT && n > 0 && n < (int)sizeof g_env_error; i++)
                n += snprintf(g_env_error + n, sizeof g_env_error - (size_t)n, "%s%s",
                              ISA_NAMES[i], i + 1 < LOWBIT_ISA_COUNT ? ", " : ")");
        }
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

/* ---- the list, enumerated ---------------------------------------------------------------------- */

int lowbit_kernel_count(void) { return lowbit_kernel_list_count; }

int lowbit_kernel_get(int i, lowbit_kernel_info *info) {
    static const char *const NEEDS_NAMES[] = {[LOWBIT_NEEDS_ANY] = "", [LOWBIT_NEEDS_INTEL] = "intel",
                                              [LOWBIT_NEEDS_VBMI] = "vbmi",
                                              [LOWBIT_NEEDS_INTEL_VBMI] = "intel,vbmi",
                                              [LOWBIT_NEEDS_ASKED] = "asked",
                                              [LOWBIT_NEEDS_AMD] = "amd",
                                              [LOWBIT_NEEDS_AMD_L1_48K] = "amd,l1-48k",
                                              [LOWBIT_NEEDS_NOT_AMD_L1_48K] = "not amd,l1-48k",
                                              [LOWBIT_NEEDS_AMD_NOT_L1_48K] = "amd,not l1-48k"};
    if (i < 0 || i >= lowbit_kernel_list_count || !info) return LOWBIT_EINVAL;
    const lowbit_kernel_entry *e = &lowbit_kernel_list[i];
    *info = (lowbit_kernel_info){.name = e->name, .isa = e->isa, .type = e->type,
                                 .layout = e->layout, .role = e->role,
                                 .requires = NEEDS_NAMES[e->needs],
                                 .when = e->when};
    return LOWBIT_OK;
}

const char *lowbit_role_name(int role) {
    static const char *const NAMES[LOWBIT_ROLE_COUNT] = {
        [LOWBIT_ROLE_GEMV] = "gemv",         [LOWBIT_ROLE_PAIR_GEMV] = "pair_gemv",
        [LOWBIT_ROLE_GEMM] = "gemm",         [LOWBIT_ROLE_QUANTIZE] = "quantize",
        [LOWBIT_ROLE_FLOAT_GEMV] = "float_gemv", [LOWBIT_ROLE_READ] = "read",
        [LOWBIT_ROLE_FWHT] = "fwht",         [LOWBIT_ROLE_OP] = "op"};
    return role >= 0 && role < LOWBIT_ROLE_COUNT ? NAMES[role] : NULL;
}

const char *lowbit_op_name(int op) {
    static const char *const NAMES[LOWBIT_OP_COUNT] = {
        [LOWBIT_OP_ATTENTION] = "attention", [LOWBIT_OP_SILU_MUL] = "silu_mul",
        [LOWBIT_OP_GELU_MUL] = "gelu_mul",   [LOWBIT_OP_GDN] = "gdn",
        [LOWBIT_OP_RMS_NORM] = "rms_norm"};
    return op >= 0 && op < LOWBIT_OP_COUNT ? NAMES[op] : NULL;
}

const char *lowbit_layout_name(int layout) {
    static const char *const NAMES[] = {[LOWBIT_LAYOUT_NONE] = "none", [LOWBIT_LAYOUT_FILE] = "file",
                                        [LOWBIT_LAYOUT_PACKED] = "packed",
                                        [LOWBIT_LAYOUT_BASE3] = "base3",
                                        [LOWBIT_LAYOUT_ROWS16] = "rows16",
                                        [LOWBIT_LAYOUT_BASE3F] = "base3f",
                                        [LOWBIT_LAYOUT_ROWS64] = "rows64",
                                        [LOWBIT_LAYOUT_Q8ROWS] = "q8rows"};
    return layout >= 0 && layout <= LOWBIT_LAYOUT_Q8ROWS ? NAMES[layout] : NULL;
}

int lowbit_kernel_selected(int isa, int type, int layout, int role, int64_t cols) {
    ensure_init();
    if (isa < 0 || isa >= LOWBIT_ISA_COUNT) return LOWBIT_EINVAL;
    if (role < 0 || role >= LOWBIT_ROLE_COUNT || !lowbit_layout_name(layout) || cols < 0)
        return LOWBIT_EINVAL;
    if (!usable(isa)) return LOWBIT_EISA;
    if (layout != LOWBIT_LAYOUT_PACKED && layout != LOWBIT_LAYOUT_BASE3 &&
        layout != LOWBIT_LAYOUT_ROWS16 && layout != LOWBIT_LAYOUT_BASE3F &&
        layout != LOWBIT_LAYOUT_ROWS64 &&
        layout != LOWBIT_LAYOUT_Q8ROWS)
        return select_entry(isa, type, layout, role, NULL);
    lowbit_matrix m;
    return describe_packed(type, layout, cols, &m) ? select_entry(isa, type, layout, role, &m) : -1;
}

int lowbit_kernel_prefer(int i) {
    ensure_init();
    if (i < -1 || i >= lowbit_kernel_list_count) return LOWBIT_EINVAL;
    g_prefer = i;
    for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++)
        if (usable(isa)) build_table(isa, &g_tables[isa]);
    return LOWBIT_OK;
}
