/* C test of lowbit_matrix_gemm_multi / lowbit_matrix_gemm_glu (several matrices on one input, one
 * pool job): in every compiled-and-supported variant, bit for bit lowbit_matrix_gemm on each matrix
 * (and lowbit_act_mul after it for GLU), for packed and borrowed (Q8_0, F32) matrices, mixed
 * activation groups in one call, row counts off the 4-row group and 64-row task, batch 1 and 3,
 * 1 to 3 threads; guard words after every output; bad arguments give a status.  Prints
 * "N passed, N failed"; exit status 1 on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "lowbit/ops.h"

#include "harness.h"

#define GUARD 8
#define GUARD_VAL 1234.5f
#define COLS 512

static float frand(void) { return (float)((int64_t)(rnd64() >> 40) - (1 << 23)) / (1 << 22); }

static lowbit_matrix *random_matrix(int type, int64_t rows, void **buf) {
    float *x = (float *)malloc((size_t)(rows * COLS) * 4);
    for (int64_t i = 0; i < rows * COLS; i++) x[i] = frand();
    int64_t n = lowbit_tensor_bytes(type, rows * COLS);
    *buf = malloc((size_t)n); /* block data needs only its struct's alignment (lowbit.h) */
    int st = lowbit_quantize(type, x, rows * COLS, *buf);
    CHECK(st == LOWBIT_OK, "quantize %s: %d", lowbit_type_name(type), st);
    free(x);
    lowbit_matrix *m = lowbit_matrix_pack(type, *buf, rows, COLS, 1, &st);
    CHECK(m != NULL, "pack %s: %d", lowbit_type_name(type), st);
    return m;
}

static float *guarded(int64_t n) {
    float *y = (float *)malloc((size_t)(n + GUARD) * 4);
    for (int64_t i = 0; i < n + GUARD; i++) y[i] = GUARD_VAL;
    return y;
}

static int diff(const float *y, const float *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += memcmp(&y[i], &ref[i], 4) != 0;
    for (int64_t i = n; i < n + GUARD; i++) bad += y[i] != GUARD_VAL;
    return bad;
}

/* Matrices of these (type, rows) in one call: groups 256, 32, 128 and float weights mixed, and
 * group 128 by two rules (I2_S: P2, PQ2_0 / PTQ1_0: Q8_K): each must get its own codes.  Paired
 * tiles (api.c) in TQ2_0, Q2_0 (4 tiles, a partial last twin) and TQ1_0. */
static const struct {
    int type;
    int64_t rows;
} PARTS[] = {{LOWBIT_TYPE_TQ2_0, 133}, {LOWBIT_TYPE_Q2_0, 198}, {LOWBIT_TYPE_I2_S, 5},
             {LOWBIT_TYPE_PQ2_0, 37},  {LOWBIT_TYPE_Q8_0, 70},  {LOWBIT_TYPE_F32, 3},
             {LOWBIT_TYPE_PTQ1_0, 9},  {LOWBIT_TYPE_TQ1_0, 200}};
#define NPARTS (int)(sizeof PARTS / sizeof PARTS[0])

static void test_variant(int isa) {
    lowbit_set_isa(isa);
    lowbit_matrix *ms[NPARTS];
    void *bufs[NPARTS];
    for (int j = 0; j < NPARTS; j++) ms[j] = random_matrix(PARTS[j].type, PARTS[j].rows, &bufs[j]);
    for (int64_t batch = 1; batch <= 3; batch += 2) {
        float *x = (float *)malloc((size_t)(batch * COLS) * 4);
        for (int64_t i = 0; i < batch * COLS; i++) x[i] = frand();
        float *ref[NPARTS], *ys[NPARTS];
        for (int j = 0; j < NPARTS; j++) {
            ref[j] = guarded(batch * PARTS[j].rows);
            CHECK(lowbit_matrix_gemm(ms[j], x, batch, ref[j], 1) == LOWBIT_OK, "ref");
        }
        for (int threads = 1; threads <= 3; threads++) {
            for (int n = 1; n <= NPARTS; n++) { /* the first n parts in one call */
                for (int j = 0; j < n; j++) ys[j] = guarded(batch * PARTS[j].rows);
                /* a read-ahead hint for this very call: no effect on its results */
                CHECK(lowbit_matrix_readahead((const lowbit_matrix *const *)ms, n, -1, threads) ==
                      LOWBIT_OK, "readahead");
                CHECK(lowbit_matrix_gemm_multi((const lowbit_matrix *const *)ms, n, x, batch, ys,
                                               threads) == LOWBIT_OK, "multi");
                for (int j = 0; j < n; j++) {
                    int bad = diff(ys[j], ref[j], batch * PARTS[j].rows);
                    CHECK(!bad, "multi %s n %d part %d (%s) batch %lld threads %d: %d wrong",
                          lowbit_isa_name(isa), n, j, lowbit_type_name(PARTS[j].type),
                          (long long)batch, threads, bad);
                    free(ys[j]);
                }
            }
            /* GLU on two matrices of the same shape, every activation */
            for (int act = LOWBIT_ACT_SILU; act <= LOWBIT_ACT_GELU_TANH; act++) {
                const int64_t n = batch * PARTS[0].rows;
                float *want = (float *)malloc((size_t)n * 4);
                lowbit_act_mul(act, ref[0], ref[0], n, want);
                float *y = guarded(n), *yu = guarded(n);
                const lowbit_matrix *gu[2] = {ms[0], ms[0]};
                CHECK(lowbit_matrix_readahead(gu, 2, act, threads) == LOWBIT_OK, "readahead glu");
                CHECK(lowbit_matrix_gemm_glu(ms[0], ms[0], act, x, batch, y, yu, threads) ==
                          LOWBIT_OK, "glu");
                int bad = diff(y, want, n) + diff(yu, ref[0], n);
                CHECK(!bad, "glu %s act %d batch %lld threads %d: %d wrong", lowbit_isa_name(isa),
                      act, (long long)batch, threads, bad);
                free(want), free(y), free(yu);
            }
        }
        for (int j = 0; j < NPARTS; j++) free(ref[j]);
        free(x);
    }
    for (int j = 0; j < NPARTS; j++) lowbit_matrix_free(ms[j]), free(bufs[j]);
}

static void test_errors(void) {
    void *b1, *b2;
    lowbit_matrix *a = random_matrix(LOWBIT_TYPE_TQ2_0, 8, &b1);
    lowbit_matrix *c = random_matrix(LOWBIT_TYPE_TQ2_0, 16, &b2);
    float x[COLS] = {0}, y[16], yu[16];
    const lowbit_matrix *ms[LOWBIT_MULTI_MAX + 1];
    float *ys[LOWBIT_MULTI_MAX + 1];
    for (int j = 0; j <= LOWBIT_MULTI_MAX; j++) ms[j] = a, ys[j] = y;
    CHECK(lowbit_matrix_gemm_multi(ms, 0, x, 1, ys, 1) == LOWBIT_EINVAL, "n = 0");
    CHECK(lowbit_matrix_gemm_multi(ms, LOWBIT_MULTI_MAX + 1, x, 1, ys, 1) == LOWBIT_EINVAL, "n > max");
    CHECK(lowbit_matrix_gemm_multi(NULL, 1, x, 1, ys, 1) == LOWBIT_EINVAL, "null list");
    CHECK(lowbit_matrix_gemm_multi(ms, 1, NULL, 1, ys, 1) == LOWBIT_EINVAL, "null x");
    CHECK(lowbit_matrix_gemm_multi(ms, 1, x, -1, ys, 1) == LOWBIT_EINVAL, "negative batch");
    ys[1] = NULL;
    CHECK(lowbit_matrix_gemm_multi(ms, 2, x, 1, ys, 1) == LOWBIT_EINVAL, "null output");
    ys[1] = y;
    ms[1] = NULL;
    CHECK(lowbit_matrix_gemm_multi(ms, 2, x, 1, ys, 1) == LOWBIT_EINVAL, "null matrix");
    CHECK(lowbit_matrix_gemm_multi(ms, 1, x, 0, ys, 1) == LOWBIT_OK, "batch 0");
    CHECK(lowbit_matrix_gemm_glu(a, c, LOWBIT_ACT_SILU, x, 1, y, yu, 1) == LOWBIT_ESIZE, "rows");
    CHECK(lowbit_matrix_gemm_glu(a, a, 3, x, 1, y, yu, 1) == LOWBIT_EINVAL, "act");
    CHECK(lowbit_matrix_gemm_glu(a, a, -1, x, 1, y, yu, 1) == LOWBIT_EINVAL, "act < 0");
    CHECK(lowbit_matrix_gemm_glu(a, a, LOWBIT_ACT_SILU, x, 1, y, y, 1) == LOWBIT_EINVAL, "y == y_up");
    CHECK(lowbit_matrix_gemm_glu(NULL, a, LOWBIT_ACT_SILU, x, 1, y, yu, 1) == LOWBIT_EINVAL, "null");
    /* read-ahead: the checks of the call it announces */
    ms[1] = a;
    CHECK(lowbit_matrix_readahead(ms, 0, -1, 2) == LOWBIT_EINVAL, "readahead n = 0");
    CHECK(lowbit_matrix_readahead(ms, LOWBIT_MULTI_MAX + 1, -1, 2) == LOWBIT_EINVAL, "readahead n > max");
    CHECK(lowbit_matrix_readahead(NULL, 1, -1, 2) == LOWBIT_EINVAL, "readahead null list");
    CHECK(lowbit_matrix_readahead(ms, 2, 3, 2) == LOWBIT_EINVAL, "readahead act");
    CHECK(lowbit_matrix_readahead(ms, 2, -2, 2) == LOWBIT_EINVAL, "readahead act < -1");
    CHECK(lowbit_matrix_readahead(ms, 3, LOWBIT_ACT_SILU, 2) == LOWBIT_EINVAL, "readahead glu of 3");
    const lowbit_matrix *ac[2] = {a, c};
    CHECK(lowbit_matrix_readahead(ac, 2, LOWBIT_ACT_SILU, 2) == LOWBIT_ESIZE, "readahead glu rows");
    ms[1] = NULL;
    CHECK(lowbit_matrix_readahead(ms, 2, -1, 2) == LOWBIT_EINVAL, "readahead null matrix");
    /* hints for 1 to 8 threads (at 8, more spans than the pool keeps), each followed by the call:
     * the same bits as one thread without hints */
    void *b3;
    lowbit_matrix *big = random_matrix(LOWBIT_TYPE_TQ2_0, 1000, &b3); /* 16 tiles: paired */
    for (int j = 0; j <= LOWBIT_MULTI_MAX; j++) ms[j] = big;
    float *y1 = (float *)malloc(1000 * 4), *yt = (float *)malloc(1000 * 4);
    for (int i = 0; i < COLS; i++) x[i] = frand();
    CHECK(lowbit_matrix_gemm_multi(ms, 1, x, 1, &y1, 1) == LOWBIT_OK, "ref");
    for (int threads = 1; threads <= 8; threads++) {
        CHECK(lowbit_matrix_readahead(ms, LOWBIT_MULTI_MAX, -1, threads) == LOWBIT_OK, "readahead");
        CHECK(lowbit_matrix_gemm_multi(ms, 1, x, 1, &yt, threads) == LOWBIT_OK, "multi");
        CHECK(!memcmp(y1, yt, 1000 * 4), "readahead then multi, %d threads", threads);
    }
    free(y1), free(yt), lowbit_matrix_free(big), free(b3);
    lowbit_matrix_free(a), lowbit_matrix_free(c), free(b1), free(b2);
}

int main(void) {
    g_rng = 777;
    unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    printf("liblowbit %s; gemm_multi / gemm_glu vs one gemm per matrix, variants 0x%x\n",
           lowbit_version(), usable);
    for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++)
        if (usable & (1u << isa)) test_variant(isa);
    test_errors();
    return report();
}
