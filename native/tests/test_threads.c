/* The default thread count and the fallbacks of the Linux-only calls.  Built as usual it checks the
 * Linux path; built with -DLOWBIT_PORTABLE=ON (as .ci/run does once) the library takes the path of
 * systems without sysfs, sched_getaffinity, getauxval or madvise, and this checks those fallbacks;
 * built for Windows (.ci/windows.sh) it checks Windows' processor information and large blocks. */
#include <stdlib.h>
#include <string.h>
#if defined(_WIN32)
#include <windows.h>
#else
#include <unistd.h>
#endif

#include "lowbit/lowbit.h"

#include "harness.h"

/* The logical CPUs online, as the system says (not through the library). */
static long online_cpus(void) {
#if defined(_WIN32)
    return (long)GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
#else
    return sysconf(_SC_NPROCESSORS_ONLN);
#endif
}

static void test_default(void) {
    const long online = online_cpus();
    const int t = lowbit_get_threads();
    const char *why = lowbit_threads_origin();
    printf("default threads %d: %s\n", t, why);
    CHECK(t >= 1 && t <= online, "default %d outside 1..%ld", t, online);
#if defined(_WIN32)
    /* Windows' processor information, or its fallback */
    CHECK(strstr(why, "Windows processor information") != NULL || strstr(why, "no CPU topology") != NULL,
          "origin '%s'", why);
#elif defined(LOWBIT_PORTABLE) || !defined(__linux__)
#if !defined(__APPLE__)
    /* no topology to read: every online logical CPU */
    CHECK(t == online, "fallback default %d != %ld online CPUs", t, online);
    CHECK(strstr(why, "no CPU topology") != NULL, "fallback origin '%s'", why);
#endif
#else
    CHECK(strstr(why, "Linux topology") != NULL || strstr(why, "no CPU topology") != NULL,
          "origin '%s'", why);
#endif
    CHECK(lowbit_set_threads(3) == LOWBIT_OK && lowbit_get_threads() == 3, "set_threads(3)");
    CHECK(strcmp(lowbit_threads_origin(), "set_threads(3)") == 0, "origin after set: '%s'",
          lowbit_threads_origin());
    CHECK(lowbit_set_threads(0) == LOWBIT_EINVAL && lowbit_get_threads() == 3, "set_threads(0)");
}

static void test_rule_without_a_tree(void) {
    char why[256];
    CHECK(lowbit_threads_for_topology(NULL, "0-2,5", why, sizeof why) == 4, "%s", why);
    CHECK(lowbit_threads_for_topology("/nonexistent-sysfs", NULL, why, sizeof why) ==
              online_cpus(), "%s", why);
    CHECK(lowbit_threads_for_topology(NULL, "1-", why, sizeof why) == LOWBIT_EINVAL, "malformed");
    CHECK(lowbit_threads_for_topology(NULL, "0", NULL, 0) == 1, "why may be NULL");
}

/* Without getauxval (other systems' Linux-free path) an Arm build assumes no dotprod, no i8mm. */
static void test_isa_fallback(void) {
#if defined(__aarch64__) && defined(LOWBIT_PORTABLE)
    CHECK(!(lowbit_isa_supported() & (1u << LOWBIT_ISA_DOTPROD)), "dotprod without detection");
    CHECK(!(lowbit_isa_supported() & (1u << LOWBIT_ISA_I8MM)), "i8mm without detection");
    CHECK(lowbit_isa_supported() & (1u << LOWBIT_ISA_NEON), "NEON is mandatory");
#endif
    CHECK(lowbit_isa_supported() & 1u, "scalar always");
}

/* A packed matrix of 2 MB or more asks for huge pages on Linux; the fallback simply does not ask.
 * Either way the packed GEMV equals the file-layout GEMV. */
static void test_large_packed_matrix(void) {
    const int64_t rows = 1024, cols = 8192; /* TQ2_0: 2 MB of codes */
    const size_t nblocks = (size_t)(rows * cols / 256);
    lowbit_block_tq2_0 *w = malloc(nblocks * sizeof *w);
    float *x = malloc(cols * sizeof *x), *y0 = malloc(rows * sizeof *y0), *y1 = malloc(rows * sizeof *y1);
    for (size_t b = 0; b < nblocks; b++) {
        for (int i = 0; i < 64; i++) w[b].qs[i] = (uint8_t)rnd64();
        w[b].d = 0x3c00; /* fp16 1.0 */
    }
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((int)(rnd64() % 201) - 100) / 64.0f;
    int status = -1;
    lowbit_matrix *m = lowbit_matrix_pack(LOWBIT_TYPE_TQ2_0, w, rows, cols, 0, &status);
    CHECK(m != NULL && status == LOWBIT_OK, "pack status %d", status);
    if (m) {
        CHECK(lowbit_gemv(LOWBIT_TYPE_TQ2_0, w, rows, cols, x, y0, 0) == LOWBIT_OK, "gemv");
        CHECK(lowbit_matrix_gemv(m, x, y1, 0) == LOWBIT_OK, "packed gemv");
        CHECK(memcmp(y0, y1, rows * sizeof *y0) == 0, "packed != file layout");
        lowbit_matrix_free(m);
    }
    free(w);
    free(x);
    free(y0);
    free(y1);
}

static void pause_ms(int ms) {
#if defined(_WIN32)
    Sleep((DWORD)ms);
#else
    usleep((useconds_t)ms * 1000);
#endif
}

/* Holds nest and never go below zero; jobs stay correct whether a worker is asleep, spinning under
 * a hold, or woken by one (a hold taken while it sleeps). */
static void test_keep_awake(void) {
    CHECK(lowbit_pool_keep_awake(0) == 0, "release without a hold");
    CHECK(lowbit_pool_keep_awake(1) == 1 && lowbit_pool_keep_awake(1) == 2, "nested holds");
    CHECK(lowbit_pool_keep_awake(0) == 1 && lowbit_pool_keep_awake(0) == 0, "released");
    const int64_t rows = 256, cols = 1024;
    lowbit_block_tq2_0 *w = malloc((size_t)(rows * cols / 256) * sizeof *w);
    float *x = malloc(cols * sizeof *x), *y0 = malloc(rows * sizeof *y0), *y1 = malloc(rows * sizeof *y1);
    for (int64_t b = 0; b < rows * cols / 256; b++) {
        for (int i = 0; i < 64; i++) w[b].qs[i] = (uint8_t)rnd64();
        w[b].d = 0x3c00;
    }
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((int)(rnd64() % 201) - 100) / 64.0f;
    CHECK(lowbit_gemv(LOWBIT_TYPE_TQ2_0, w, rows, cols, x, y0, 2) == LOWBIT_OK, "gemv");
    for (int k = 0; k < 6; k++) {
        pause_ms(5); /* past the spin: asleep unless held */
        if (k == 2) lowbit_pool_keep_awake(1); /* wakes the sleepers */
        if (k == 4) lowbit_pool_keep_awake(0);
        memset(y1, 0, rows * sizeof *y1);
        CHECK(lowbit_gemv(LOWBIT_TYPE_TQ2_0, w, rows, cols, x, y1, 2) == LOWBIT_OK, "gemv %d", k);
        CHECK(memcmp(y0, y1, rows * sizeof *y0) == 0, "job %d after a pause differs", k);
    }
    CHECK(lowbit_pool_keep_awake(0) == 0, "holds left");
    free(w);
    free(x);
    free(y0);
    free(y1);
}

int main(void) {
    printf("liblowbit %s; thread default and Linux-only fallbacks%s\n", lowbit_version(),
#ifdef LOWBIT_PORTABLE
           " (LOWBIT_PORTABLE build)"
#else
           ""
#endif
    );
    test_default();
    test_rule_without_a_tree();
    test_isa_fallback();
    test_large_packed_matrix();
    test_keep_awake();
    return report();
}
