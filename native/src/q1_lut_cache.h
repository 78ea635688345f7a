/* The Q1_0 lookup-table GEMVs' activation tables (x86/q1_lut-inl.h, arm/q1_lut_arm-inl.h), the
 * ISA-neutral part: their layout and a cache that keeps them across calls.
 *
 * For quad m (weights 4m..4m+3, one nibble of a code byte) and x = 0..15,
 * T_m[x] = sum_t (bit t of x ? q[4m+t] : -q[4m+t]) is an exact int in [-508, 508]; T_m + 508 is
 * stored split into 5-bit halves, 32 bytes a quad: lo = v & 31 for x = 0..15, then hi = v >> 5.
 * Each half is one 16-byte lookup table, and 8 quads of either half add up below 256 in a byte.
 * The includer passes its SIMD builder to q1_lut_take. */
#ifndef LOWBIT_Q1_LUT_CACHE_H
#define LOWBIT_Q1_LUT_CACHE_H
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define Q1_LUT_BIAS 508 /* max |T_m| = 4 * 127 */

/* writes the 32 n / 4 bytes of a's tables to tab */
typedef void (*q1_lut_builder)(const lowbit_act *a, uint8_t *tab);

/* The tables outlive the call: the job layer calls a GEMV for every 64 rows, and every call of
 * one product would build the same tables (docs/PERFORMANCE.md#q1-lut).  A few caches of (codes,
 * tables) are kept in global slots (one set per kernel file); a call takes one out (exclusively: atomic exchange), uses it
 * when its codes are the activation's (memcmp: exact whatever the caller did to the buffer), else
 * rebuilds it, and puts it back.  Threads of one job end up with one cache each. */
typedef struct {
    int64_t n, cap; /* codes of the tables; room for cap codes */
    int8_t *q;      /* n codes, then the 8 n bytes of tables */
} q1_lut_cache;
#define Q1_LUT_SLOTS 4
static _Atomic(q1_lut_cache *) q1_lut_slots[Q1_LUT_SLOTS];

static void q1_lut_put(q1_lut_cache *c) {
    for (int i = 0; i < Q1_LUT_SLOTS; i++) {
        q1_lut_cache *none = NULL;
        if (atomic_compare_exchange_strong(&q1_lut_slots[i], &none, c)) return;
    }
    free(c->q);
    free(c);
}

/* A cache holding a's tables (taken out of the slots: q1_lut_put it back), NULL: no memory */
static q1_lut_cache *q1_lut_take(const lowbit_act *a, q1_lut_builder build) {
    const int64_t n = a->n;
    q1_lut_cache *spare = NULL;
    for (int i = 0; i < Q1_LUT_SLOTS; i++) {
        q1_lut_cache *c = atomic_exchange(&q1_lut_slots[i], NULL);
        if (!c) continue;
        if (c->n == n && memcmp(c->q, a->q, (size_t)n) == 0) {
            if (spare) q1_lut_put(spare);
            return c;
        }
        if (spare) q1_lut_put(c);
        else spare = c;
    }
    q1_lut_cache *c = spare ? spare : (q1_lut_cache *)calloc(1, sizeof(q1_lut_cache));
    if (!c) return NULL;
    if (c->cap < n) {
        int8_t *q = (int8_t *)malloc((size_t)(9 * n));
        if (!q) {
            q1_lut_put(c);
            return NULL;
        }
        free(c->q);
        c->q = q, c->cap = n;
    }
    memcpy(c->q, a->q, (size_t)n);
    c->n = n;
    build(a, (uint8_t *)c->q + n);
    return c;
}

/* the tables of a cache */
static inline const uint8_t *q1_lut_tables(const q1_lut_cache *c) {
    return (const uint8_t *)c->q + c->n;
}
#endif /* LOWBIT_Q1_LUT_CACHE_H */
