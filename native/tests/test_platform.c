/* The platform layer's own pieces that the library's results depend on (native/src/platform.h),
 * and the variant PYLOWBIT_ISA forces.
 *
 * lowbit_fmaf_emulated (the fmaf of mingw-w64 builds, whose C library's is not correctly rounded)
 * against the CPU's FMA instruction, one rounding by definition, on products near the halfway
 * points between floats where a second rounding shows; skipped where the CPU has no FMA. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "isa_select.h"
#include "lowbit/lowbit.h"
#include "platform.h"

#include "harness.h"

#if defined(LOWBIT_X86) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_HW_FMA_CHECK 1
__attribute__((target("fma"))) static float hw_fmaf(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
#endif

static float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A float of random sign and mantissa with an exponent in [lo, hi] (biased). */
static float random_float(int lo, int hi) {
    uint64_t r = rnd64();
    uint32_t e = (uint32_t)(lo + (int)(r % (uint64_t)(hi - lo + 1)));
    return bits_to_float((uint32_t)(r >> 32) & 0x807fffffu | e << 23);
}

static void test_fmaf(void) {
#if defined(HAVE_HW_FMA_CHECK)
    /* AVX2 in this library implies FMA (dispatch.c) */
    if (!(lowbit_isa_supported() & (1u << LOWBIT_ISA_AVX2))) {
        printf("fmaf: no FMA instruction on this CPU, not compared\n");
        return;
    }
    long bad = 0, n = 0;
    for (int i = 0; i < 400000; i++) {
        float a = random_float(100, 154), b = random_float(100, 154), c;
        switch (i % 5) {
        case 0: c = random_float(90, 164); break;           /* unrelated magnitudes */
        case 1: c = -(a * b); break;                        /* cancellation: the product's error */
        case 2: c = -(a * b) * 0.5f; break;                 /* a halfway-prone sum */
        case 3: c = random_float(0, 254) * 1e-30f; break; /* tiny, subnormal, zero */
        default: {
            /* c of odd last bit, a * b = its half ulp * (1 - k^2 2^-46): the true sum is just off
             * the halfway point, a sum rounded to double lands on it (the double-rounding trap) */
            const int k = 1 + (int)(rnd64() % 255), e = 60 + (int)(rnd64() % 130);
            const int j = (int)(rnd64() % 41) - 20;
            c = bits_to_float((uint32_t)(rnd64() >> 32) & 0x807fffffu | 1u | (uint32_t)e << 23);
            a = ldexpf(1.0f + (float)k * 0x1p-23f, j) * (rnd64() & 1 ? -1.0f : 1.0f);
            b = ldexpf(1.0f - (float)k * 0x1p-23f, e - 151 - j);
        }
        }
        const float want = hw_fmaf(a, b, c), got = lowbit_fmaf_emulated(a, b, c);
        n++;
        if (memcmp(&want, &got, 4) != 0 && !(want != want && got != got)) {
            if (bad++ < 5)
                printf("    fmaf(%a, %a, %a): want %a got %a\n", a, b, c, want, got);
        }
    }
    /* the special values */
    const float inf = bits_to_float(0x7f800000u), nan = bits_to_float(0x7fc00000u);
    const float sp[][3] = {{inf, 1, 1}, {inf, 0, 1}, {1, 1, -inf}, {inf, 1, -inf}, {nan, 1, 1},
                           {3e38f, 3e38f, -inf}, {1e-45f, 1e-45f, 0}, {-1e-45f, 1e-45f, 0},
                           {0, 0, -0.0f}, {-0.0f, 0, -0.0f}, {3e38f, 10, -3e38f}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        const float want = hw_fmaf(sp[i][0], sp[i][1], sp[i][2]);
        const float got = lowbit_fmaf_emulated(sp[i][0], sp[i][1], sp[i][2]);
        n++;
        if (memcmp(&want, &got, 4) != 0 && !(want != want && got != got)) {
            if (bad++ < 10) printf("    special %zu: want %a got %a\n", i, want, got);
        }
    }
    CHECK(bad == 0, "lowbit_fmaf_emulated: %ld of %ld differ from the FMA instruction", bad, n);
#else
    printf("fmaf: not an x86 GCC/clang build, not compared\n");
#endif
}

/* A PYLOWBIT_ISA in the environment (CI forces each variant in turn, also through wine) is the
 * variant that runs: the environment reached the library and named a usable variant. */
static void test_forced_isa(void) {
    const char *env = getenv("PYLOWBIT_ISA");
    printf("active variant %s (PYLOWBIT_ISA=%s)\n", lowbit_isa_name(lowbit_isa_active()),
           env ? env : "");
    if (!env || !*env) return;
    CHECK(lowbit_isa_env_error() == NULL, "%s", lowbit_isa_env_error());
    CHECK(lowbit_isa_active() == lowbit_isa_from_name(env), "PYLOWBIT_ISA=%s but %s is active", env,
          lowbit_isa_name(lowbit_isa_active()));
}

/* The dispatcher's choice from the CPUID / XCR0 bits of CPU families this machine is not: the
 * selection functions dispatch.c runs (isa_select.h), given made-up feature sets. */
static void test_isa_selection(void) {
    enum { FMA = 1u << 12, OSXSAVE = 1u << 27, AVX = 1u << 28, F16C = 1u << 29 };
    enum { AVX2 = 1u << 5, F512 = 1u << 16 | 1u << 17 | 1u << 30 | 1u << 31 }; /* F DQ BW VL */
    enum { VNNI512 = 1u << 11, VBMI = 1u << 1, AVXVNNI = 1u << 4 };
    const uint32_t c1 = FMA | OSXSAVE | AVX | F16C;
    const uint64_t ymm = 0x7, zmm = 0xe7;
    static const struct {
        const char *cpu;
        lowbit_x86_features f;
        int best, vbmi;
    } cases[] = {
        {"Haswell .. Raptor Lake without AVX-VNNI, Zen 2/3", {c1, AVX2, 0, 0, ymm}, LOWBIT_ISA_AVX2, 0},
        {"Alder / Raptor / Meteor / Arrow / Lunar Lake", {c1, AVX2, 0, AVXVNNI, ymm}, LOWBIT_ISA_AVXVNNI, 0},
        {"Ice Lake server", {c1, AVX2 | F512, VNNI512 | VBMI, 0, zmm}, LOWBIT_ISA_AVX512VNNI, 1},
        {"Sapphire Rapids, Zen 5 (both VNNI)", {c1, AVX2 | F512, VNNI512 | VBMI, AVXVNNI, zmm},
         LOWBIT_ISA_AVX512VNNI, 1},
        {"Zen 4", {c1, AVX2 | F512, VNNI512 | VBMI, 0, zmm}, LOWBIT_ISA_AVX512VNNI, 1},
        {"AVX-512 CPU, OS without ZMM state", {c1, AVX2 | F512, VNNI512, AVXVNNI, ymm},
         LOWBIT_ISA_AVXVNNI, 0},
        {"AVX-VNNI CPU, OS without YMM state", {c1, AVX2, 0, AVXVNNI, 0x3}, LOWBIT_ISA_SCALAR, 0},
        {"no OSXSAVE", {FMA | AVX | F16C, AVX2, 0, AVXVNNI, 0}, LOWBIT_ISA_SCALAR, 0},
        {"no AVX2 (Sandy Bridge)", {c1, 0, 0, 0, ymm}, LOWBIT_ISA_SCALAR, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned sup = lowbit_x86_supported(&cases[i].f);
        const int best = lowbit_best_isa(sup); /* as if every variant were compiled */
        CHECK(best == cases[i].best, "%s: picks %s, not %s", cases[i].cpu, lowbit_isa_name(best),
              lowbit_isa_name(cases[i].best));
        CHECK(lowbit_x86_vbmi(&cases[i].f) == cases[i].vbmi, "%s: VBMI %d", cases[i].cpu,
              lowbit_x86_vbmi(&cases[i].f));
        /* the emulated variant runs wherever AVX2 does and is never chosen */
        CHECK(((sup >> LOWBIT_ISA_AVXVNNI_EMULATED) & 1) == ((sup >> LOWBIT_ISA_AVX2) & 1),
              "%s: avxvnni_emulated supported 0x%x", cases[i].cpu, sup);
        CHECK(lowbit_best_isa(1u << LOWBIT_ISA_AVXVNNI_EMULATED | 1u) == LOWBIT_ISA_SCALAR,
              "avxvnni_emulated chosen");
    }
    printf("ISA selection: %d CPU feature sets\n", (int)(sizeof cases / sizeof cases[0]));
}

int main(void) {
    printf("liblowbit %s; the platform layer\n", lowbit_version());
    test_forced_isa();
    test_isa_selection();
    test_fmaf();
    return report();
}
