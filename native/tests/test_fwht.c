/* Walsh-Hadamard transform: every compiled and supported variant against the scalar reference,
 * bit for bit, through the public API (lowbit_set_isa + lowbit_fwht_*), with guard words after
 * and before every buffer.  Also runs under qemu-aarch64 for the NEON variant.
 *
 * Sizes: every power of two 2 .. 2^21, m * 2^k for m in {12, 20, 28}, several blocks per row, with
 * and without signs in both orders, float32 and float64, 1 and 2 threads; the fused
 * FWHT + A8 quantizer against lowbit_fwht_f32 followed by lowbit_quantize_act. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowbit/lowbit.h"

#include "harness.h"

#define GUARD 16
static const uint32_t GUARD_BITS = 0x7fc0dead; /* a NaN payload no kernel writes */

/* Uniform in [-1, 1) from the harness's platform-independent stream. */
static double urand(void) { return (double)(rnd64() >> 11) / 4503599627370496.0 - 1.0; }

/* A buffer of n elements of `size` bytes with GUARD guard words on each side. */
static void *guarded(int64_t n, size_t size) {
    uint32_t *p = (uint32_t *)malloc((size_t)n * size + 2 * GUARD * sizeof(uint32_t));
    for (int i = 0; i < GUARD; i++) p[i] = GUARD_BITS;
    uint8_t *end = (uint8_t *)(p + GUARD) + (size_t)n * size;
    for (int i = 0; i < GUARD; i++) memcpy(end + 4 * i, &GUARD_BITS, 4);
    return p + GUARD;
}
static int guards_ok(void *b, int64_t n, size_t size) {
    uint32_t *p = (uint32_t *)b - GUARD;
    uint8_t *end = (uint8_t *)b + (size_t)n * size;
    for (int i = 0; i < GUARD; i++) {
        uint32_t v;
        memcpy(&v, end + 4 * i, 4);
        if (p[i] != GUARD_BITS || v != GUARD_BITS) return 0;
    }
    return 1;
}
static void unguard(void *b) { free((uint32_t *)b - GUARD); }

static int variants[LOWBIT_ISA_COUNT], nvariants = 0;

static void check_f32(int64_t rows, int64_t n, int64_t block, int with_signs) {
    const int64_t total = rows * n;
    float *x = (float *)malloc((size_t)total * 4), *s = (float *)malloc((size_t)n * 4);
    float *ref = (float *)guarded(total, 4), *got = (float *)guarded(total, 4);
    for (int64_t i = 0; i < total; i++) x[i] = (float)urand();
    for (int64_t i = 0; i < n; i++) s[i] = urand() < 0 ? -1.0f : 1.0f;
    for (int order = 0; order < 2; order++)
        for (int norm = 0; norm < 2; norm++) {
            lowbit_set_isa(LOWBIT_ISA_SCALAR);
            memcpy(ref, x, (size_t)total * 4);
            int st = lowbit_fwht_f32(ref, rows, n, block, norm, with_signs ? s : NULL, order, 1);
            CHECK(st == LOWBIT_OK, "scalar f32 rows=%ld n=%ld block=%ld status %d", (long)rows,
                  (long)n, (long)block, st);
            for (int v = 0; v < nvariants; v++)
                for (int threads = 1; threads <= 2; threads++) {
                    lowbit_set_isa(variants[v]);
                    memcpy(got, x, (size_t)total * 4);
                    st = lowbit_fwht_f32(got, rows, n, block, norm, with_signs ? s : NULL, order,
                                         threads);
                    CHECK(!st && !memcmp(ref, got, (size_t)total * 4) && guards_ok(got, total, 4),
                          "%s f32 rows=%ld n=%ld block=%ld signs=%d order=%d norm=%d thr=%d",
                          lowbit_isa_name(variants[v]), (long)rows, (long)n, (long)block,
                          with_signs, order, norm, threads);
                }
        }
    free(x);
    free(s);
    unguard(ref);
    unguard(got);
}

static void check_f64(int64_t rows, int64_t n, int64_t block) {
    const int64_t total = rows * n;
    double *x = (double *)malloc((size_t)total * 8), *s = (double *)malloc((size_t)n * 8);
    double *ref = (double *)guarded(total, 8), *got = (double *)guarded(total, 8);
    for (int64_t i = 0; i < total; i++) x[i] = urand();
    for (int64_t i = 0; i < n; i++) s[i] = urand() < 0 ? -1.0 : 1.0;
    lowbit_set_isa(LOWBIT_ISA_SCALAR);
    memcpy(ref, x, (size_t)total * 8);
    lowbit_fwht_f64(ref, rows, n, block, 1, s, 0, 1);
    for (int v = 0; v < nvariants; v++) {
        lowbit_set_isa(variants[v]);
        memcpy(got, x, (size_t)total * 8);
        int st = lowbit_fwht_f64(got, rows, n, block, 1, s, 0, 2);
        CHECK(!st && !memcmp(ref, got, (size_t)total * 8) && guards_ok(got, total, 8),
              "%s f64 rows=%ld n=%ld block=%ld", lowbit_isa_name(variants[v]), (long)rows, (long)n,
              (long)block);
    }
    free(x);
    free(s);
    unguard(ref);
    unguard(got);
}

/* Fused path == transform (scalar) then lowbit_quantize_act (scalar), in every variant. */
static void check_fused(int64_t n, int64_t block, int64_t group) {
    const int64_t ng = n / group;
    float *x = (float *)malloc((size_t)n * 4), *s = (float *)malloc((size_t)n * 4);
    float *y = (float *)malloc((size_t)n * 4);
    int8_t *q_ref = (int8_t *)malloc((size_t)n), *q = (int8_t *)guarded((n + 3) / 4, 4);
    float *d_ref = (float *)malloc((size_t)ng * 4), *d = (float *)guarded(ng, 4);
    int32_t *s_ref = (int32_t *)malloc((size_t)ng * 4), *sm = (int32_t *)guarded(ng, 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(urand() * (i % 3 == 0 ? 40.0 : 1.0));
    for (int64_t i = 0; i < block && i < n; i++) x[i] = 0.0f; /* an all-zero block */
    for (int64_t i = 0; i < n; i++) s[i] = urand() < 0 ? -1.0f : 1.0f;
    lowbit_set_isa(LOWBIT_ISA_SCALAR);
    memcpy(y, x, (size_t)n * 4);
    lowbit_fwht_f32(y, 1, n, block, 1, s, 0, 1);
    lowbit_quantize_act(y, n, group, q_ref, d_ref, s_ref);
    for (int v = 0; v < nvariants; v++) {
        lowbit_set_isa(variants[v]);
        int st = lowbit_fwht_quantize_act(x, n, block, s, group, q, d, sm);
        CHECK(!st && !memcmp(q, q_ref, (size_t)n) && !memcmp(d, d_ref, (size_t)ng * 4) &&
                  !memcmp(sm, s_ref, (size_t)ng * 4) && guards_ok(d, ng, 4) &&
                  guards_ok(sm, ng, 4) && ((n % 4) != 0 || guards_ok(q, n / 4, 4)),
              "%s fused n=%ld block=%ld group=%ld", lowbit_isa_name(variants[v]), (long)n,
              (long)block, (long)group);
    }
    free(x);
    free(s);
    free(y);
    free(q_ref);
    free(d_ref);
    free(s_ref);
    unguard(q);
    unguard(d);
    unguard(sm);
}

static void check_errors(void) {
    float x[64] = {0}, s[64];
    for (int i = 0; i < 64; i++) s[i] = 1.0f;
    CHECK(lowbit_fwht_f32(x, 1, 64, 48, 1, NULL, 0, 1) == LOWBIT_ESIZE, "64 %% 48 accepted");
    CHECK(lowbit_fwht_f32(x, 1, 36, 36, 1, NULL, 0, 1) == LOWBIT_ESIZE, "36 accepted");
    CHECK(lowbit_fwht_f32(x, 1, 1, 1, 1, NULL, 0, 1) == LOWBIT_ESIZE, "1 accepted");
    CHECK(lowbit_fwht_f32(NULL, 1, 64, 64, 1, NULL, 0, 1) == LOWBIT_EINVAL, "NULL accepted");
    CHECK(lowbit_fwht_f32(x, 1, 64, 64, 1, NULL, 7, 1) == LOWBIT_EINVAL, "order 7 accepted");
    s[9] = 0.5f;
    CHECK(lowbit_fwht_f32(x, 1, 64, 64, 1, s, 0, 1) == LOWBIT_EINVAL, "sign 0.5 accepted");
    s[9] = NAN;
    CHECK(lowbit_fwht_f32(x, 1, 64, 64, 1, s, 0, 1) == LOWBIT_EINVAL, "sign NaN accepted");
    int8_t q[64];
    float d[2];
    int32_t sm[2];
    CHECK(lowbit_fwht_quantize_act(x, 64, 64, NULL, 48, q, d, sm) == LOWBIT_ESIZE,
          "group 48 accepted");
}

int main(void) {
    unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    for (int i = 1; i < LOWBIT_ISA_COUNT; i++)
        if (usable & (1u << i)) variants[nvariants++] = i;
    printf("variants against scalar:");
    for (int v = 0; v < nvariants; v++) printf(" %s", lowbit_isa_name(variants[v]));
    printf("\n");
    const int saved = lowbit_isa_active();

    for (int k = 1; k <= 21; k++) {
        const int64_t n = (int64_t)1 << k;
        check_f32(k <= 12 ? 3 : 1, n, n, k % 2);
        if (k <= 18) check_f64(k <= 12 ? 2 : 1, n, n);
    }
    static const int MS[3] = {12, 20, 28};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k <= 9; k++) {
            const int64_t n = (int64_t)MS[i] << k;
            check_f32(2, n, n, 1);
            check_f64(1, n, n);
        }
    /* blocks: several per row, rows that give the thread split a tail */
    check_f32(5, 3 * 1024, 1024, 1);
    check_f32(33, 512, 64, 1);
    check_f32(3, 8 * 96, 96, 1);
    check_f32(2, 4 * 2, 2, 1);
    check_f32(70, 1 << 12, 1 << 10, 0); /* > 2^16 elements: goes through the thread pool */
    check_f64(9, 4 * 256, 256);

    check_fused(1024, 1024, 128);
    check_fused(4096, 1024, 64);
    check_fused(3 * 1024, 1024, 32);
    check_fused(512, 128, 256);
    check_fused(96 * 4, 96, 32);
    check_fused(1 << 14, 1 << 14, 128);
    check_fused(48, 48, 16); /* group not a SIMD multiple: reference path */
    check_errors();

    lowbit_set_isa(saved);
    return report();
}
