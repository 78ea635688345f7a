/* What the kernel test runners (test_kernels.c, test_quantize.c) share: the ISA variants they check
 * against scalar, random numbers for their inputs, the guard after every output buffer.  Include
 * after internal.h. */
#ifndef LOWBIT_TEST_RUNNER_H
#define LOWBIT_TEST_RUNNER_H

#include <string.h>

#include "harness.h"

#define GUARD 16 /* elements after every output buffer that must stay untouched */

static int g_variants[LOWBIT_ISA_COUNT], g_nvariants; /* non-scalar variants to test */

static inline float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd64() >> 40) / 16777216.0f; }
static inline int rndi(int lo, int hi) { return lo + (int)(rnd64() % (uint64_t)(hi - lo + 1)); }

static inline void set_isa(int isa) {
    if (lowbit_set_isa(isa) != LOWBIT_OK) {
        printf("FATAL: lowbit_set_isa(%s) refused a compiled and supported variant\n",
               lowbit_isa_name(isa));
        exit(2);
    }
}

/* Seeds the generator (LOWBIT_TEST_SEED, default 1), lists every compiled and supported non-scalar
 * variant in g_variants, checks that the others are refused and, when LOWBIT_TEST_VARIANTS is set,
 * that they are exactly the ones it names. */
static inline void init_variants(void) {
    const char *seed = getenv("LOWBIT_TEST_SEED");
    g_rng = seed && *seed ? strtoull(seed, NULL, 10) * 2654435761ULL + 1 : 1;
    const unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    printf("liblowbit %s; variants compiled 0x%x, supported 0x%x; testing against scalar:",
           lowbit_version(), lowbit_isa_compiled(), lowbit_isa_supported());
    for (int i = 1; i < LOWBIT_ISA_COUNT; i++)
        if (usable & (1u << i)) {
            g_variants[g_nvariants++] = i;
            printf(" %s", lowbit_isa_name(i));
        }
    printf("%s\n", g_nvariants ? "" : " (none: scalar only)");

    /* A variant the CPU lacks must be refused. */
    for (int i = 0; i < LOWBIT_ISA_COUNT; i++)
        if (!(usable & (1u << i))) CHECK(lowbit_set_isa(i) == LOWBIT_EISA, "set_isa(%s) accepted", lowbit_isa_name(i));

    const char *want = getenv("LOWBIT_TEST_VARIANTS");
    if (want) {
        char buf[256];
        unsigned mask = 0;
        snprintf(buf, sizeof buf, "%s", want);
        for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", ")) {
            int isa = lowbit_isa_from_name(tok);
            CHECK(isa > 0, "LOWBIT_TEST_VARIANTS: unknown variant %s", tok);
            if (isa > 0) mask |= 1u << isa;
        }
        CHECK(mask == (usable & ~1u), "LOWBIT_TEST_VARIANTS=%s but this CPU/build gives 0x%x", want,
              usable & ~1u);
    }
}

#endif /* LOWBIT_TEST_RUNNER_H */
