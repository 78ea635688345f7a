/* Shared pieces of the C test runners: pass/fail counting and a deterministic random stream. */
#ifndef LOWBIT_TEST_HARNESS_H
#define LOWBIT_TEST_HARNESS_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Sets (value) or removes (NULL) a variable of this process's environment, POSIX or Windows. */
static inline void set_env(const char *name, const char *value) {
#if defined(_WIN32)
    _putenv_s(name, value ? value : ""); /* "" removes it */
#else
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
#endif
}

static long g_pass, g_fail;

/* Count a check; print the first 40 failures with their location. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            g_pass++;                                                                              \
        } else {                                                                                   \
            if (g_fail < 40) {                                                                     \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);                                        \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
            }                                                                                      \
            g_fail++;                                                                              \
        }                                                                                          \
    } while (0)

/* xorshift64*: the same numbers on every platform, so a failure reproduces under qemu too. */
static uint64_t g_rng = 1;
static uint64_t rnd64(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1DULL;
}

/* The closing line CI reads, and the exit status. */
static int report(void) {
    printf("%ld passed, %ld failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
#endif
