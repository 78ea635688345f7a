/* C test runner: the A8 activation quantizer of every compiled-and-supported ISA variant against the
 * scalar reference, bit for bit (codes, scales and group sums), through the public API
 * (lowbit_quantize_act, lowbit_quantize_act_for): groups of every size the formats use and odd
 * ones, hostile groups (NaN, inf, ties, overflowing inverses), each type's own group and rule.
 *
 * Environment: LOWBIT_TEST_SEED (default 1); LOWBIT_TEST_VARIANTS as for test_kernels.c.
 * Prints "N passed, N failed" last; exit status 1 on any failure. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* fp16 helpers (static inline) and lowbit.h */

#include "runner.h"

/* ---- A8 activation quantizer: bit-exact ------------------------------------------------------ */

static void test_quantize_act(void) {
    static const int GROUPS[] = {32, 64, 128, 16, 48, 256, 7, 1};
    const int NG = (int)(sizeof GROUPS / sizeof GROUPS[0]);
    for (int gi = 0; gi < NG; gi++) {
        const int64_t G = GROUPS[gi];
        for (int m = 1; m <= 9; m++) {
            const int64_t n = G * m;
            float *x = (float *)malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) x[i] = rndf(-3.0f, 3.0f);
            /* Group 0: max 127 and halves, so x * (127/amax) hits exact ties (round away);
             * group 1 (if any): all zero (scale 0, codes 0); a tiny-magnitude group last. */
            for (int64_t j = 0; j < G; j++)
                x[j] = j == 0 ? 127.0f : (float)rndi(-126, 126) + (rnd64() & 1 ? 0.5f : 0.0f);
            if (m > 1)
                for (int64_t j = 0; j < G; j++) x[G + j] = 0.0f;
            if (m > 2)
                for (int64_t j = 0; j < G; j++) x[(m - 1) * G + j] = rndf(-1e-30f, 1e-30f);
            const int64_t ng = m;
            int8_t *q0 = (int8_t *)malloc((size_t)n);
            float *d0 = (float *)malloc((size_t)ng * sizeof(float));
            int32_t *s0 = (int32_t *)malloc((size_t)ng * sizeof(int32_t));
            set_isa(LOWBIT_ISA_SCALAR);
            CHECK(lowbit_quantize_act(x, n, G, q0, d0, s0) == 0, "scalar quantize_act");
            for (int v = 0; v < g_nvariants; v++) {
                /* one allocation, guard bytes after each of the three outputs */
                const size_t qb = ((size_t)n + GUARD + 15) / 16 * 16, db = ((size_t)ng + GUARD) * 4;
                uint8_t *mem = (uint8_t *)malloc(qb + 2 * db);
                memset(mem, 0xA5, qb + 2 * db);
                int8_t *q = (int8_t *)mem;
                float *d = (float *)(mem + qb);
                int32_t *s = (int32_t *)(mem + qb + db);
                set_isa(g_variants[v]);
                int st = lowbit_quantize_act(x, n, G, q, d, s);
                int ok = st == 0 && memcmp(q, q0, (size_t)n) == 0 &&
                         memcmp(d, d0, (size_t)ng * 4) == 0 && memcmp(s, s0, (size_t)ng * 4) == 0;
                int gok = 1;
                for (size_t i = (size_t)n; i < qb; i++) gok &= mem[i] == 0xA5;
                for (int i = 0; i < GUARD * 4; i++)
                    gok &= mem[qb + ng * 4 + i] == 0xA5 && mem[qb + db + ng * 4 + i] == 0xA5;
                CHECK(ok && gok, "%s quantize_act n=%lld group=%lld: %s",
                      lowbit_isa_name(g_variants[v]), (long long)n, (long long)G,
                      !ok ? "differs from scalar" : "guard overwritten");
                free(mem);
            }
            free(x);
            free(q0);
            free(d0);
            free(s0);
        }
    }
}

/* The weight type whose activations lowbit_quantize_act_for makes with 128-groups of Q8_K's rule
 * (not lowbit_quantize_act's P2 at 128), or -1 for the other group sizes. */
static int q8k_type_of_group(int64_t G) { return G == 128 ? LOWBIT_TYPE_PQ2_0 : -1; }

/* lowbit_quantize_act, or with via_type lowbit_quantize_act_for of the type of q8k_type_of_group */
static int quantize_via(int via_type, const float *x, int64_t n, int64_t G, int8_t *q, float *d,
                        int32_t *s) {
    return via_type ? lowbit_quantize_act_for(q8k_type_of_group(G), x, n, q, d, s)
                    : lowbit_quantize_act(x, n, G, q, d, s);
}

/* Hostile groups, bit-exact with scalar: NaN / +-inf, +m and -m ties (Q8_K takes the first one's
 * sign), tiny groups whose 127 / amax overflows (clamps matter), denormals, exact halves at every
 * scale, and group counts around the SIMD variants' 8-group batches, for large groups too; group
 * 128 by both rules it has (P2 through lowbit_quantize_act, Q8_K through lowbit_quantize_act_for
 * of PQ2_0). */
static void test_quantize_act_edges(void) {
    static const int GROUPS[] = {32, 128, 256, 64, 96, 512, 1024};
    static const int COUNTS[] = {1, 3, 7, 8, 9, 16, 17};
    for (int gi = 0; gi < (int)(sizeof GROUPS / sizeof GROUPS[0]); gi++)
        for (int ci = 0; ci < (int)(sizeof COUNTS / sizeof COUNTS[0]); ci++) {
            const int64_t G = GROUPS[gi], m = COUNTS[ci], n = G * m;
            float *x = (float *)malloc((size_t)n * sizeof(float));
            int8_t *q0 = (int8_t *)malloc((size_t)n), *q = (int8_t *)malloc((size_t)n);
            float *d0 = (float *)malloc((size_t)m * 4), *d = (float *)malloc((size_t)m * 4);
            int32_t *s0 = (int32_t *)malloc((size_t)m * 4), *s = (int32_t *)malloc((size_t)m * 4);
            for (int64_t g = 0; g < m; g++) {
                float *xg = x + g * G;
                const int kind = (int)((g + gi + ci) % 9);
                const float mag = kind == 5 ? 1e-38f : kind == 6 ? 3e-37f : kind == 7 ? 1e-44f : 4.0f;
                for (int64_t j = 0; j < G; j++) xg[j] = rndf(-mag, mag);
                const int64_t a = rndi(0, (int)G - 1), b = rndi(0, (int)G - 1);
                switch (kind) {
                case 0: xg[a] = NAN; break;
                case 1: xg[a] = INFINITY, xg[b] = -2.0f; break;
                case 2: xg[a] = 5.0f, xg[b] = -5.0f; break; /* tie: the first decides */
                case 3: xg[a] = -5.0f, xg[b] = 5.0f, xg[(a + 1) % G] = NAN; break;
                case 4: /* amax 127 and halves: ties at scale 1 */
                    for (int64_t j = 0; j < G; j++) xg[j] = (float)rndi(-126, 126) + 0.5f;
                    xg[a] = rnd64() & 1 ? 127.0f : -127.0f;
                    break;
                case 8: memset(xg, 0, (size_t)G * sizeof(float)), xg[a] = -0.0f; break;
                default: break;
                }
            }
            for (int via = 0; via <= (q8k_type_of_group(G) >= 0); via++) {
                set_isa(LOWBIT_ISA_SCALAR);
                CHECK(quantize_via(via, x, n, G, q0, d0, s0) == 0, "scalar quantize_act");
                for (int v = 0; v < g_nvariants; v++) {
                    set_isa(g_variants[v]);
                    int st = quantize_via(via, x, n, G, q, d, s);
                    CHECK(st == 0 && !memcmp(q, q0, (size_t)n) && !memcmp(d, d0, (size_t)m * 4) &&
                              !memcmp(s, s0, (size_t)m * 4),
                          "%s quantize_act%s edges n=%lld group=%lld differ from scalar",
                          lowbit_isa_name(g_variants[v]), via ? "_for" : "", (long long)n,
                          (long long)G);
                }
            }
            free(x), free(q0), free(q), free(d0), free(d), free(s0), free(s);
        }
}

/* lowbit_quantize_act_for: the group of lowbit_act_group(type) and the type's rule -- the same
 * codes as lowbit_quantize_act(group) except for PQ2_0 / PTQ1_0, whose 128-groups take Q8_K's rule
 * (not P2: group scales differ, and d = 1 / iscale < 0 for a positive largest element); bad
 * arguments give a status. */
static void test_quantize_act_for(void) {
    static const int TYPES[] = {LOWBIT_TYPE_TQ1_0, LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_I2_S,
                                LOWBIT_TYPE_Q1_0,  LOWBIT_TYPE_Q2_0,  LOWBIT_TYPE_PQ2_0,
                                LOWBIT_TYPE_PTQ1_0, LOWBIT_TYPE_Q8_0, LOWBIT_TYPE_Q5_0,
                                LOWBIT_TYPE_Q4_K,  LOWBIT_TYPE_Q6_K};
    enum { N = 1024 };
    float x[N];
    int8_t q[N], q0[N];
    float d[N / 32], d0[N / 32];
    int32_t s[N / 32], s0[N / 32];
    for (int i = 0; i < N; i++) x[i] = rndf(-2.0f, 2.0f) + (i % 128 == 5 ? 9.0f : 0.0f);
    for (int v = -1; v < g_nvariants; v++) { /* -1: scalar */
        const int isa = v < 0 ? LOWBIT_ISA_SCALAR : g_variants[v];
        set_isa(isa);
        for (int t = 0; t < (int)(sizeof TYPES / sizeof TYPES[0]); t++) {
            const int type = TYPES[t];
            const int64_t G = lowbit_act_group(type);
            const int q8k128 = type == LOWBIT_TYPE_PQ2_0 || type == LOWBIT_TYPE_PTQ1_0;
            /* I2_S: bitnet.cpp's S8 by default, quantize_act(128) is P2 (its option) */
            const int other = q8k128 || type == LOWBIT_TYPE_I2_S;
            CHECK(lowbit_quantize_act_for(type, x, N, q, d, s) == LOWBIT_OK, "quantize_act_for %s",
                  lowbit_type_name(type));
            CHECK(lowbit_quantize_act(x, N, G, q0, d0, s0) == LOWBIT_OK, "quantize_act");
            const int same = !memcmp(q, q0, N) && !memcmp(d, d0, (size_t)(N / G) * 4) &&
                             !memcmp(s, s0, (size_t)(N / G) * 4);
            CHECK(same == !other, "%s quantize_act_for %s: %s lowbit_quantize_act(%lld)",
                  lowbit_isa_name(isa), lowbit_type_name(type),
                  same ? "equals" : "differs from", (long long)G);
            if (q8k128) /* Q8_K: the largest element (+9 at 5) gets code -127, d = -9 / 127 */
                for (int64_t g = 0; g < N / G; g++)
                    CHECK(q[g * G + 5] == -127 && d[g] < 0.0f, "%s %s group %lld: not Q8_K's rule",
                          lowbit_isa_name(isa), lowbit_type_name(type), (long long)g);
            if (type == LOWBIT_TYPE_I2_S) { /* S8: one d = 1 / (float)(127 / max|x|) everywhere */
                CHECK(lowbit_set_i2s_act_scale(LOWBIT_I2S_ACT_POW2) == LOWBIT_I2S_ACT_BITNET, "i2s mode");
                CHECK(lowbit_quantize_act_for(type, x, N, q0, d0, s0) == LOWBIT_OK, "pow2 quantize");
                lowbit_set_i2s_act_scale(LOWBIT_I2S_ACT_BITNET);
                float amax = 0.0f;
                for (int i = 0; i < N; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
                const float id = (float)(127.0 / (double)amax);
                for (int64_t g = 0; g < N / G; g++)
                    CHECK(d[g] == 1.0f / id, "%s i2_s group %lld: d is not bitnet.cpp's",
                          lowbit_isa_name(isa), (long long)g);
                CHECK(q[5] == (int8_t)roundf(x[5] * id), "%s i2_s: code not bitnet.cpp's",
                      lowbit_isa_name(isa));
                CHECK(memcmp(d0, d, 4) != 0, "%s i2_s pow2: same d as the default", lowbit_isa_name(isa));
            }
        }
    }
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_F32, x, N, q, d, s) == LOWBIT_ETYPE, "f32");
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_F16, x, N, q, d, s) == LOWBIT_ETYPE, "f16");
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_Q8_K, x, N, q, d, s) == LOWBIT_ETYPE, "q8_k");
    CHECK(lowbit_quantize_act_for(9999, x, N, q, d, s) == LOWBIT_ETYPE, "unknown type");
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_PQ2_0, x, 96, q, d, s) == LOWBIT_ESIZE, "n %% 128");
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_PQ2_0, NULL, N, q, d, s) == LOWBIT_EINVAL, "null x");
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_PQ2_0, x, -128, q, d, s) == LOWBIT_EINVAL, "n < 0");
    CHECK(lowbit_quantize_act_for(LOWBIT_TYPE_PQ2_0, x, 0, q, d, s) == LOWBIT_OK, "n = 0");
}

int main(void) {
    init_variants();
    test_quantize_act();
    test_quantize_act_edges();
    test_quantize_act_for();
    return report();
}
