/* The Gated-DeltaNet ops (lowbit/ops.h): every compiled and supported ISA variant against the
 * scalar build, bit for bit, at sizes around the 16-lane blocks, the four-row blocks and the
 * 64-token chunks, with guard words after every output and state buffer, on 1 and 2 threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lowbit/ops.h"

#define GUARD 16
static const uint32_t GUARD_BITS = 0x7fc0dead; /* a NaN no op writes */

static int g_variants[LOWBIT_ISA_COUNT], g_nvariants;

static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd64() >> 40) / (float)(1 << 24); }

/* n floats from [lo, hi) followed by GUARD guard words. */
static float *guarded_rand(int64_t n, float lo, float hi) {
    float *p = malloc((size_t)(n + GUARD) * sizeof(float));
    if (!p) exit(2);
    for (int64_t i = 0; i < n; i++) p[i] = rndf(lo, hi);
    for (int i = 0; i < GUARD; i++) memcpy(p + n + i, &GUARD_BITS, 4);
    return p;
}

static float *copy_of(const float *src, int64_t n) {
    float *p = guarded_rand(n, 0, 0);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

static int guard_ok(const float *p, int64_t n) {
    for (int i = 0; i < GUARD; i++)
        if (memcmp(p + n + i, &GUARD_BITS, 4) != 0) return 0;
    return 1;
}

static void set_isa(int isa) {
    if (lowbit_set_isa(isa) != LOWBIT_OK) {
        printf("FATAL: lowbit_set_isa(%s) refused a compiled and supported variant\n", lowbit_isa_name(isa));
        exit(2);
    }
}

/* Index of the first float whose bits differ, or -1. */
static int64_t first_diff(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) != 0) return i;
    return -1;
}

/* One gated_delta_rule case: each variant's output and state against scalar's. */
static void case_delta(int64_t T, int64_t Hk, int64_t Hv, int64_t d, int chunked, int threads) {
    const int64_t nq = T * Hk * d, nv = T * Hv * d, ng = T * Hv, ns = Hv * d * d;
    float *q = guarded_rand(nq, -1, 1), *k = guarded_rand(nq, -1, 1), *v = guarded_rand(nv, -1, 1);
    float *g = guarded_rand(ng, -2, 0), *beta = guarded_rand(ng, 0, 1), *s0 = guarded_rand(ns, -0.2f, 0.2f);
    for (int64_t r = 0; r < T * Hk; r++) { /* L2-normed keys and queries, as the decoder feeds them */
        lowbit_l2_norm(q + r * d, 1, d, 1e-6f, q + r * d);
        lowbit_l2_norm(k + r * d, 1, d, 1e-6f, k + r * d);
    }
    set_isa(LOWBIT_ISA_SCALAR);
    float *ref_s = copy_of(s0, ns), *ref_o = guarded_rand(nv, 0, 0);
    int st = lowbit_gated_delta_rule(q, k, v, g, beta, ref_s, T, Hk, Hv, d, ref_o, 1, chunked);
    CHECK(st == 0 && guard_ok(ref_s, ns) && guard_ok(ref_o, nv), "scalar delta rule T=%lld d=%lld: st=%d",
          (long long)T, (long long)d, st);
    for (int vi = 0; vi < g_nvariants; vi++) {
        set_isa(g_variants[vi]);
        float *s = copy_of(s0, ns), *o = guarded_rand(nv, 0, 0);
        st = lowbit_gated_delta_rule(q, k, v, g, beta, s, T, Hk, Hv, d, o, threads, chunked);
        const int64_t bo = first_diff(o, ref_o, nv), bs = first_diff(s, ref_s, ns);
        CHECK(st == 0 && guard_ok(s, ns) && guard_ok(o, nv) && bo < 0 && bs < 0,
              "%s delta rule T=%lld Hk=%lld Hv=%lld d=%lld chunked=%d threads=%d: st=%d out diff at %lld, "
              "state diff at %lld", lowbit_isa_name(g_variants[vi]), (long long)T, (long long)Hk,
              (long long)Hv, (long long)d, chunked, threads, st, (long long)bo, (long long)bs);
        free(s);
        free(o);
    }
    free(q), free(k), free(v), free(g), free(beta), free(s0), free(ref_s), free(ref_o);
}

/* ssm_conv, l2_norm, gated_rms_norm_silu, sigmoid_mul and gdn_gates at (T, C): outputs and the
 * conv state against scalar's. */
static void case_rows(int64_t T, int64_t C, int64_t K) {
    const int64_t n = T * C, ns = C * (K - 1);
    float *x = guarded_rand(n, -4, 4), *z = guarded_rand(n, -30, 30), *w = guarded_rand(C * K, -1, 1);
    float *wn = guarded_rand(C, 0.5f, 1.5f), *s0 = guarded_rand(ns, -4, 4);
    float *ssm_a = guarded_rand(C, -3, -0.1f), *dt = guarded_rand(C, -2, 2);
    float *ref[7], *got[7];
    int64_t len[7] = {n, ns, n, n, n, n, n};
    for (int pass = 0; pass <= g_nvariants; pass++) {
        float **r = pass == 0 ? ref : got;
        set_isa(pass == 0 ? LOWBIT_ISA_SCALAR : g_variants[pass - 1]);
        for (int i = 0; i < 7; i++) r[i] = i == 1 ? copy_of(s0, ns) : guarded_rand(len[i], 0, 0);
        int st = lowbit_ssm_conv(x, w, r[1], T, C, K, r[0]);
        st |= lowbit_l2_norm(x, T, C, 1e-6f, r[2]);
        st |= lowbit_gated_rms_norm_silu(x, wn, z, T, C, 1e-6f, r[3]);
        st |= lowbit_sigmoid_mul(x, z, n, r[4]);
        st |= lowbit_gdn_gates(z, x, ssm_a, dt, T, C, r[5], r[6]);
        const char *name = lowbit_isa_name(pass == 0 ? LOWBIT_ISA_SCALAR : g_variants[pass - 1]);
        for (int i = 0; i < 7; i++) {
            const int64_t bad = pass == 0 ? -1 : first_diff(got[i], ref[i], len[i]);
            CHECK(st == 0 && guard_ok(r[i], len[i]) && bad < 0, "%s row op %d T=%lld C=%lld K=%lld: st=%d diff at %lld",
                  name, i, (long long)T, (long long)C, (long long)K, st, (long long)bad);
        }
        if (pass > 0)
            for (int i = 0; i < 7; i++) free(got[i]);
    }
    for (int i = 0; i < 7; i++) free(ref[i]);
    free(x), free(z), free(w), free(wn), free(s0), free(ssm_a), free(dt);
}

static void test_bad_arguments(void) {
    float f[64] = {0};
    CHECK(lowbit_gated_delta_rule(f, f, f, f, f, f, 1, 3, 4, 2, f, 1, 0) == LOWBIT_EINVAL, "Hv %% Hk");
    CHECK(lowbit_gated_delta_rule(f, f, f, f, f, f, 1, 1, 1, 2, f, 1, 2) == LOWBIT_EINVAL, "chunked 2");
    CHECK(lowbit_gated_delta_rule(NULL, f, f, f, f, f, 1, 1, 1, 2, f, 1, 0) == LOWBIT_EINVAL, "NULL q");
    CHECK(lowbit_ssm_conv(f, f, NULL, 1, 4, 4, f) == LOWBIT_EINVAL, "NULL state, K = 4");
    CHECK(lowbit_ssm_conv(f, f, NULL, 1, 4, 1, f) == LOWBIT_OK, "K = 1 keeps no state");
    CHECK(lowbit_l2_norm(f, 1, 0, 1e-6f, f) == LOWBIT_EINVAL, "n = 0");
    CHECK(lowbit_l2_norm(f, 1, 4, NAN, f) == LOWBIT_EINVAL, "eps NaN");
    CHECK(lowbit_gated_rms_norm_silu(f, NULL, f, 1, 4, 1e-6f, f) == LOWBIT_EINVAL, "NULL w");
    CHECK(lowbit_sigmoid_mul(f, f, -1, f) == LOWBIT_EINVAL, "n < 0");
}

int main(void) {
    const unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    for (int i = 1; i < LOWBIT_ISA_COUNT; i++)
        if (usable & (1u << i)) g_variants[g_nvariants++] = i;
    printf("variants against scalar:");
    for (int v = 0; v < g_nvariants; v++) printf(" %s", lowbit_isa_name(g_variants[v]));
    printf("\n");
    const int saved = lowbit_isa_active();

    static const int64_t DS[] = {1, 4, 7, 15, 16, 17, 32, 33, 48, 128};
    for (size_t i = 0; i < sizeof DS / sizeof DS[0]; i++)
        for (int chunked = 0; chunked <= 1; chunked++) {
            case_delta(3, 2, 6, DS[i], chunked, 1);
            case_delta(2, 1, 3, DS[i], chunked, 2);
        }
    static const int64_t TS[] = {1, 63, 64, 65, 130};
    for (size_t i = 0; i < sizeof TS / sizeof TS[0]; i++) {
        case_delta(TS[i], 2, 4, 32, 1, 2);
        case_delta(TS[i], 1, 2, 128, 0, 2);
    }
    case_delta(1, 16, 48, 128, 0, 2); /* the Bonsai 2 decode shape, through the pool */
    static const int64_t CS[] = {1, 15, 16, 17, 63, 64, 65, 200};
    for (size_t i = 0; i < sizeof CS / sizeof CS[0]; i++) {
        case_rows(1, CS[i], 4);
        case_rows(5, CS[i], 4);
        case_rows(2, CS[i], 2);
    }
    case_rows(3, 37, 1);
    test_bad_arguments();
    lowbit_set_isa(saved);
    return report();
}
