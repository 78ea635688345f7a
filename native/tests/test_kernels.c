/* C test runner: every compiled-and-supported ISA variant against the scalar reference, in one
 * process, through the public API (lowbit_set_isa, lowbit_gemm_act, lowbit_gemm, ...).
 *
 *   - exact:  integer activations with unit scales (A8 codes, d = 1) and unit weight scales, so
 *             every float in the computation is an integer below 2^24: results must be
 *             bit-identical, which checks the int32 sums of every kernel exactly;
 *   - float:  random weight scales and float activations quantized by the variant itself, file
 *             layout (lowbit_gemm) and packed layout (lowbit_matrix_gemm) against the scalar
 *             file layout: |y - y_ref| <= 1e-6 * sum |w||x| (only the float combination order
 *             may differ; the worst ratio seen is printed);
 *   - (the A8 quantizer: test_quantize.c);
 *   - F32/F16/BF16 GEMV bit-identical to scalar, scalar within summation rounding of the exact sum;
 *   - codec round trips (scalar codecs, once).
 * Sizes hit every tail: cols = k * block (k = 1..9), rows 1..70 around the 64-row task chunks,
 * batch 1..9.  Every output buffer has guard words after it that must stay untouched, and every
 * output element must be written.  Weight codes are random bytes, so code 3 of the 2-bit formats
 * and -128 of Q8_0 are covered.
 *
 * Environment: LOWBIT_TEST_SEED (default 1); LOWBIT_TEST_VARIANTS="neon,dotprod,i8mm" (the non-scalar
 * variants that must be tested, exactly: CI uses it to prove what the emulated CPU exposed).
 * Prints "N passed, N failed" last; exit status 1 on any failure. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* fp16 helpers (static inline) and lowbit.h */

#include "runner.h"

/* ---- guarded output buffers ------------------------------------------------------------------ */

static const uint32_t SENTINEL = 0x7fbadbadu; /* a NaN no kernel computes */

static float *guarded(int64_t n) {
    float *p = (float *)malloc((size_t)(n + GUARD) * sizeof(float));
    if (!p) abort();
    for (int64_t i = 0; i < n + GUARD; i++) memcpy(p + i, &SENTINEL, 4);
    return p;
}
/* 1 if every one of the n outputs was written and the guard is intact. */
static int guard_ok(const float *p, int64_t n, const char **why) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(p + i, &SENTINEL, 4) == 0) {
            *why = "output element not written";
            return 0;
        }
    for (int64_t i = n; i < n + GUARD; i++)
        if (memcmp(p + i, &SENTINEL, 4) != 0) {
            *why = "guard after the output overwritten";
            return 0;
        }
    *why = "";
    return 1;
}

/* ---- weight types ---------------------------------------------------------------------------- */

typedef struct {
    int type;
    int scale_off;   /* byte offset of the fp16 scale inside a block, -1: none (I2_S) */
    int scale2_off;  /* a second fp16 scale (Q4_K's dmin), 0: none */
    int decode_only; /* ggml's formats: lowbit_quantize refuses them */
} wtype;

static const wtype WTYPES[] = {
    {LOWBIT_TYPE_TQ1_0, offsetof(lowbit_block_tq1_0, d)},
    {LOWBIT_TYPE_TQ2_0, offsetof(lowbit_block_tq2_0, d)},
    {LOWBIT_TYPE_I2_S, -1},
    {LOWBIT_TYPE_Q1_0, offsetof(lowbit_block_q1_0, d)},
    {LOWBIT_TYPE_Q2_0, offsetof(lowbit_block_q2_0, d)},
    {LOWBIT_TYPE_PQ2_0, offsetof(lowbit_block_pq2_0, d)},
    {LOWBIT_TYPE_PTQ1_0, offsetof(lowbit_block_ptq1_0, d)},
    {LOWBIT_TYPE_Q8_0, offsetof(lowbit_block_q8_0, d)},
    {LOWBIT_TYPE_Q5_0, offsetof(lowbit_block_q5_0, d), 0, 1},
    {LOWBIT_TYPE_Q4_K, offsetof(lowbit_block_q4_k, d), offsetof(lowbit_block_q4_k, dmin), 1},
    {LOWBIT_TYPE_Q6_K, offsetof(lowbit_block_q6_k, d), 0, 1},
};
#define NWTYPES ((int)(sizeof WTYPES / sizeof WTYPES[0]))

/* A weight tensor of random code bytes; scales 1 (exact mode) or random in +-[2^-8, 2). */
static uint8_t *make_weights(const wtype *t, int64_t rows, int64_t cols, int exact) {
    const int64_t bytes = lowbit_tensor_bytes(t->type, rows * cols);
    uint8_t *w = (uint8_t *)malloc((size_t)bytes);
    if (!w) abort();
    for (int64_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd64();
    const int64_t nblk = rows * cols / lowbit_type_block_size(t->type);
    const int64_t bb = lowbit_type_block_bytes(t->type);
    for (int64_t b = 0; b < nblk && t->scale_off >= 0; b++) {
        float v = exact ? 1.0f : ldexpf(rndf(1.0f, 2.0f), rndi(-8, 0)) * (rnd64() & 1 ? -1.0f : 1.0f);
        uint16_t h = lowbit_fp32_to_fp16(v);
        memcpy(w + b * bb + t->scale_off, &h, 2);
        if (t->scale2_off) {
            h = lowbit_fp32_to_fp16(exact ? 1.0f : v * rndf(0.0f, 1.0f));
            memcpy(w + b * bb + t->scale2_off, &h, 2);
        }
    }
    if (t->type == LOWBIT_TYPE_I2_S) { /* per-tensor fp32 scale after the codes */
        float d = exact ? 1.0f : rndf(0.25f, 2.0f);
        memcpy(w + rows * lowbit_row_bytes(t->type, cols), &d, 4);
    }
    return w;
}

/* ---- quantized GEMV/GEMM, exact mode --------------------------------------------------------- */

/* One (type, cols, rows, batch) case: integer activations with unit scales via lowbit_gemm_act. */
static void case_exact(const wtype *t, const uint8_t *w, int64_t rows, int64_t cols, int64_t batch,
                       const lowbit_act *acts, int threads) {
    const int64_t n = batch * rows;
    float *ref = guarded(n);
    set_isa(LOWBIT_ISA_SCALAR);
    int st = lowbit_gemm_act(t->type, w, rows, cols, acts, batch, ref, 1);
    const char *why;
    CHECK(st == 0 && guard_ok(ref, n, &why), "scalar %s exact r=%lld c=%lld b=%lld: st=%d",
          lowbit_type_name(t->type), (long long)rows, (long long)cols, (long long)batch, st);
    for (int v = 0; v < g_nvariants; v++) {
        float *y = guarded(n);
        set_isa(g_variants[v]);
        st = lowbit_gemm_act(t->type, w, rows, cols, acts, batch, y, threads);
        int ok = st == 0 && guard_ok(y, n, &why);
        int64_t bad = -1;
        for (int64_t i = 0; ok && i < n; i++)
            if (memcmp(&y[i], &ref[i], 4) != 0) {
                bad = i;
                ok = 0;
            }
        CHECK(ok, "%s %s exact rows=%lld cols=%lld batch=%lld threads=%d: st=%d %s%s",
              lowbit_isa_name(g_variants[v]), lowbit_type_name(t->type), (long long)rows,
              (long long)cols, (long long)batch, threads, st, why, bad >= 0 ? " value differs" : "");
        if (bad >= 0)
            printf("    at batch %lld row %lld: got %.9g want %.9g\n", (long long)(bad / rows),
                   (long long)(bad % rows), y[bad], ref[bad]);
        free(y);
    }
    free(ref);
}

static void test_exact(void) {
    static const int ROWS[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70};
    const int NR = (int)(sizeof ROWS / sizeof ROWS[0]), MAXR = 70, MAXB = 9;
    for (int ti = 0; ti < NWTYPES; ti++) {
        const wtype *t = &WTYPES[ti];
        const int64_t bs = lowbit_type_block_size(t->type), G = lowbit_act_group(t->type);
        for (int k = 1; k <= 9; k++) {
            const int64_t cols = k * bs, ng = cols / G;
            uint8_t *w = make_weights(t, MAXR, cols, 1);
            /* MAXB activation vectors: codes in [-127, 127], scale 1, exact code sums. */
            int8_t *q = (int8_t *)malloc((size_t)(MAXB * cols));
            float *d = (float *)malloc((size_t)(MAXB * ng) * sizeof(float));
            int32_t *s = (int32_t *)malloc((size_t)(MAXB * ng) * sizeof(int32_t));
            lowbit_act acts[9];
            for (int b = 0; b < MAXB; b++) {
                for (int64_t g = 0; g < ng; g++) {
                    int32_t sum = 0;
                    for (int64_t j = 0; j < G; j++) {
                        int v = rndi(-127, 127);
                        q[b * cols + g * G + j] = (int8_t)v;
                        sum += v;
                    }
                    d[b * ng + g] = 1.0f;
                    s[b * ng + g] = sum;
                }
                acts[b] = (lowbit_act){q + b * cols, d + b * ng, s + b * ng, cols, G};
            }
            /* I2_S keeps its per-tensor scale right after the rows it has: build it per size. */
            for (int ri = 0; ri < NR; ri++) {
                const int64_t rows = ROWS[ri];
                const uint8_t *wr = w;
                uint8_t *wcopy = NULL;
                if (t->type == LOWBIT_TYPE_I2_S) {
                    const int64_t rb = lowbit_row_bytes(t->type, cols);
                    wcopy = (uint8_t *)malloc((size_t)(rows * rb + 32));
                    memcpy(wcopy, w, (size_t)(rows * rb));
                    const float one = 1.0f;
                    memcpy(wcopy + rows * rb, &one, 4);
                    wr = wcopy;
                }
                for (int64_t batch = 1; batch <= MAXB; batch++)
                    case_exact(t, wr, rows, cols, batch, acts, 1 + (int)((rows + batch) % 2));
                free(wcopy);
            }
            free(w);
            free(q);
            free(d);
            free(s);
        }
    }
}

/* ---- quantized GEMV/GEMM, float mode (lowbit_gemm quantizes activations itself) --------------- */

static double g_worst_ratio; /* max |y - ref| / sum|w||x| seen */

/* 1 if every y[i] is within 1e-6 * sum_j |w_rj x_bj| of ref[i]; tracks the worst ratio. */
static int within_tolerance(const float *y, const float *ref, const float *wf, const float *x,
                            int64_t rows, int64_t cols, int64_t batch, int64_t *bad) {
    for (int64_t i = 0; i < batch * rows; i++) {
        const int64_t b = i / rows, r = i % rows;
        double mag = 0;
        for (int64_t j = 0; j < cols; j++) mag += fabs((double)wf[r * cols + j] * x[b * cols + j]);
        const double err = fabs((double)y[i] - ref[i]);
        if (mag > 0 && err / mag > g_worst_ratio) g_worst_ratio = err / mag;
        if (!(err <= 1e-6 * mag)) {
            *bad = i;
            return 0;
        }
    }
    return 1;
}

/* File layout (lowbit_gemm) and packed layout (lowbit_matrix_gemm) of every variant against the
 * scalar file-layout result. */
static void test_float(void) {
    static const int ROWS[] = {1, 3, 4, 7, 16, 33, 64, 65, 70};
    static const int BATCH[] = {1, 2, 5, 9};
    const int NR = (int)(sizeof ROWS / sizeof ROWS[0]), NB = (int)(sizeof BATCH / sizeof BATCH[0]);
    for (int ti = 0; ti < NWTYPES; ti++) {
        const wtype *t = &WTYPES[ti];
        const int64_t bs = lowbit_type_block_size(t->type);
        for (int k = 1; k <= 9; k += (k < 3 ? 1 : 3)) { /* 1, 2, 3, 6, 9 */
            const int64_t cols = k * bs;
            for (int ri = 0; ri < NR; ri++) {
                const int64_t rows = ROWS[ri];
                uint8_t *w = make_weights(t, rows, cols, 0);
                float *wf = (float *)malloc((size_t)(rows * cols) * sizeof(float));
                lowbit_dequantize(t->type, w, rows * cols, wf);
                int pst;
                lowbit_matrix *m = lowbit_matrix_pack(t->type, w, rows, cols, 1, &pst);
                CHECK(m && pst == 0, "%s pack rows=%lld cols=%lld: st=%d", lowbit_type_name(t->type),
                      (long long)rows, (long long)cols, pst);
                const int64_t maxb = BATCH[NB - 1];
                float *x = (float *)malloc((size_t)(maxb * cols) * sizeof(float));
                for (int64_t i = 0; i < maxb * cols; i++)
                    x[i] = rndf(-1.0f, 1.0f) * (rnd64() % 16 == 0 ? 8.0f : 1.0f);
                for (int bi = 0; bi < NB; bi++) {
                    const int64_t batch = BATCH[bi], n = batch * rows;
                    float *ref = guarded(n);
                    set_isa(LOWBIT_ISA_SCALAR);
                    int st = lowbit_gemm(t->type, w, rows, cols, x, batch, ref, 1);
                    const char *why;
                    CHECK(st == 0 && guard_ok(ref, n, &why), "scalar %s float: st=%d",
                          lowbit_type_name(t->type), st);
                    for (int v = 0; v < g_nvariants; v++) {
                        for (int packed = 0; packed <= (m != NULL); packed++) {
                            float *y = guarded(n);
                            set_isa(g_variants[v]);
                            st = packed ? lowbit_matrix_gemm(m, x, batch, y, 2)
                                        : lowbit_gemm(t->type, w, rows, cols, x, batch, y, 2);
                            int64_t bad = -1;
                            int ok = st == 0 && guard_ok(y, n, &why) &&
                                     within_tolerance(y, ref, wf, x, rows, cols, batch, &bad);
                            CHECK(ok, "%s %s%s float rows=%lld cols=%lld batch=%lld: st=%d %s%s",
                                  lowbit_isa_name(g_variants[v]), lowbit_type_name(t->type),
                                  packed ? " packed" : "", (long long)rows, (long long)cols,
                                  (long long)batch, st, why, bad >= 0 ? " beyond tolerance" : "");
                            if (bad >= 0) printf("    got %.9g want %.9g\n", y[bad], ref[bad]);
                            free(y);
                        }
                    }
                    free(ref);
                }
                lowbit_matrix_free(m);
                free(w);
                free(wf);
                free(x);
            }
        }
    }
}

/* ---- F32 / F16 GEMV (float activations) ------------------------------------------------------ */

static void test_float_weights(void) {
    static const int COLS[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 257, 1000};
    static const int ROWS[] = {1, 2, 5, 63, 64, 65, 70};
    const int NC = (int)(sizeof COLS / sizeof COLS[0]), NR = (int)(sizeof ROWS / sizeof ROWS[0]);
    static const int FLOAT_TYPES[] = {LOWBIT_TYPE_F32, LOWBIT_TYPE_F16, LOWBIT_TYPE_BF16};
    for (int ti = 0; ti < 3; ti++) {
        const int type = FLOAT_TYPES[ti], f16 = type != LOWBIT_TYPE_F32; /* f16: 2-byte values */
        const char *tname = lowbit_type_name(type);
        for (int ci = 0; ci < NC; ci++)
            for (int ri = 0; ri < NR; ri++) {
                const int64_t cols = COLS[ci], rows = ROWS[ri], batch = 1 + (ci + ri) % 3;
                void *w = malloc((size_t)(rows * cols) * (f16 ? 2 : 4));
                float *wf = (float *)malloc((size_t)(rows * cols) * sizeof(float));
                for (int64_t i = 0; i < rows * cols; i++) {
                    float v = rndf(-2.0f, 2.0f);
                    if (f16) {
                        const int bf = type == LOWBIT_TYPE_BF16;
                        uint16_t h = bf ? lowbit_fp32_to_bf16(v) : lowbit_fp32_to_fp16(v);
                        memcpy((uint8_t *)w + 2 * i, &h, 2);
                        wf[i] = bf ? lowbit_bf16_to_fp32(h) : lowbit_fp16_to_fp32(h);
                    } else {
                        ((float *)w)[i] = wf[i] = v;
                    }
                }
                float *x = (float *)malloc((size_t)(batch * cols) * sizeof(float));
                for (int64_t i = 0; i < batch * cols; i++) x[i] = rndf(-1.0f, 1.0f);
                const int64_t n = batch * rows;
                float *ref = guarded(n);
                set_isa(LOWBIT_ISA_SCALAR);
                int st = lowbit_gemm(type, w, rows, cols, x, batch, ref, 1);
                const char *why;
                CHECK(st == 0 && guard_ok(ref, n, &why), "scalar %s gemv", tname);
                int tol_ok = 1;
                for (int64_t i = 0; i < n; i++) {
                    const int64_t b = i / rows, r = i % rows;
                    double exact = 0, mag = 0;
                    for (int64_t j = 0; j < cols; j++) {
                        exact += (double)wf[r * cols + j] * x[b * cols + j];
                        mag += fabs((double)wf[r * cols + j] * x[b * cols + j]);
                    }
                    /* the reference's pairwise-then-sequential sum: within cols * eps * mag */
                    if (!(fabs((double)ref[i] - exact) <= (double)cols * FLT_EPSILON * mag)) tol_ok = 0;
                }
                CHECK(tol_ok, "scalar %s gemv rows=%lld cols=%lld: beyond tolerance", tname,
                      (long long)rows, (long long)cols);
                for (int v = 0; v < g_nvariants; v++) { /* every variant keeps the reference's order */
                    float *y = guarded(n);
                    set_isa(g_variants[v]);
                    st = lowbit_gemm(type, w, rows, cols, x, batch, y, 2);
                    const int ok = st == 0 && guard_ok(y, n, &why);
                    CHECK(ok && !memcmp(y, ref, (size_t)n * sizeof(float)),
                          "%s %s gemv rows=%lld cols=%lld batch=%lld: st=%d %s%s",
                          lowbit_isa_name(g_variants[v]), tname, (long long)rows,
                          (long long)cols, (long long)batch, st, why, ok ? " differs from scalar" : "");
                    free(y);
                }
                free(ref);
                free(w);
                free(wf);
                free(x);
            }
    }
}

/* ---- codec round trips (scalar, not dispatched) ---------------------------------------------- */

/* quantize -> dequantize -> quantize gives the same bytes, and dequantized values are exact
 * multiples of the block scale (integers times d). */
static void test_codecs(void) {
    for (int ti = 0; ti < NWTYPES; ti++) {
        const int type = WTYPES[ti].type;
        const int64_t n = lowbit_type_block_size(type) * 5;
        const int64_t bytes = lowbit_tensor_bytes(type, n);
        if (WTYPES[ti].decode_only) {
            float x[256] = {0};
            uint8_t out[256];
            CHECK(lowbit_quantize(type, x, lowbit_type_block_size(type), out) == LOWBIT_ETYPE,
                  "%s: quantize must refuse a decode-only format", lowbit_type_name(type));
            continue;
        }
        float *x = (float *)malloc((size_t)n * sizeof(float));
        float *y = (float *)malloc((size_t)n * sizeof(float));
        float *y2 = (float *)malloc((size_t)n * sizeof(float));
        uint8_t *a = (uint8_t *)malloc((size_t)bytes), *b = (uint8_t *)malloc((size_t)bytes);
        for (int64_t i = 0; i < n; i++) x[i] = rndf(-1.0f, 1.0f);
        int st1 = lowbit_quantize(type, x, n, a);
        int st2 = lowbit_dequantize(type, a, n, y);
        int st3 = lowbit_quantize(type, y, n, b);
        int st4 = lowbit_dequantize(type, b, n, y2);
        CHECK(st1 == 0 && st2 == 0 && st3 == 0 && st4 == 0, "%s codec status", lowbit_type_name(type));
        CHECK(memcmp(y, y2, (size_t)n * sizeof(float)) == 0, "%s codec: dequant(quant(dequant(quant(x)))) != dequant(quant(x))",
              lowbit_type_name(type));
        CHECK(memcmp(a, b, (size_t)bytes) == 0, "%s codec: quant(dequant(q)) != q", lowbit_type_name(type));
        free(x);
        free(y);
        free(y2);
        free(a);
        free(b);
    }
}

/* ---- empty sizes: no output touched, no activation read ------------------------------------- */

static void test_degenerate(void) {
    uint8_t w[2 * 66] = {0};
    int8_t q[256] = {0};
    float d[2] = {1, 1};
    int32_t s[2] = {0, 0};
    lowbit_act a = {q, d, s, 256, 256}; /* TQ2_0 pairs with 256-groups (Q8_K) */
    for (int v = 0; v < g_nvariants; v++) {
        set_isa(g_variants[v]);
        float *y = guarded(0);
        const char *why;
        int st1 = lowbit_gemm_act(LOWBIT_TYPE_TQ2_0, w, 0, 256, &a, 1, y, 1);
        int st2 = lowbit_gemm_act(LOWBIT_TYPE_TQ2_0, w, 1, 256, &a, 0, y, 1);
        int st3 = lowbit_gemm(LOWBIT_TYPE_TQ2_0, w, 1, 256, (const float *)d, 0, y, 1);
        CHECK(st1 == 0 && st2 == 0 && st3 == 0 && guard_ok(y, 0, &why),
              "%s empty sizes: st=%d %d %d %s", lowbit_isa_name(g_variants[v]), st1, st2, st3, why);
        free(y);
    }
    /* ggml's formats: rows must be whole blocks, activations the type's group (256 for K-quants) */
    static const uint8_t wk[210 * 2] = {0};
    float x[512] = {0}, y[2];
    lowbit_act a32 = {q, d, s, 256, 32};
    CHECK(lowbit_row_bytes(LOWBIT_TYPE_Q4_K, 300) == LOWBIT_ESIZE && lowbit_row_bytes(LOWBIT_TYPE_Q6_K, 512) == 420 &&
              lowbit_row_bytes(LOWBIT_TYPE_Q5_0, 48) == LOWBIT_ESIZE,
          "K-quant row sizes");
    CHECK(lowbit_gemm(LOWBIT_TYPE_Q4_K, wk, 1, 128, x, 1, y, 1) == LOWBIT_ESIZE &&
              lowbit_gemm(LOWBIT_TYPE_Q6_K, wk, 1, 320, x, 1, y, 1) == LOWBIT_ESIZE &&
              lowbit_gemm_act(LOWBIT_TYPE_Q6_K, wk, 1, 256, &a32, 1, y, 1) == LOWBIT_ESIZE,
          "K-quant: partial blocks and wrong activation groups refused");
}

/* ---- Q1_0 GEMV, float scales: bit-identical to the scalar reference ---------------------------
 * The table-lookup GEMVs work on 64-row (AVX-512), 32-row (AVX2) or 16-row (Arm) tiles, the last
 * one overlapping, short tails on another kernel, over 64-row tasks: row counts around those, long
 * rows (the tables outlive a call: the same and changed activations back to back), random weight and activation
 * scales, and activations at the code limits (every code +-127, one sign, alternating groups). */
static void test_q1_gemv(void) {
    static const int ROWS[] = {12, 16, 20, 31, 32, 33, 45, 63, 64, 65, 77, 100, 130, 200};
    static const int COLS[] = {128, 256, 2560, 6912};
    const wtype *t = NULL;
    for (int ti = 0; ti < NWTYPES; ti++)
        if (WTYPES[ti].type == LOWBIT_TYPE_Q1_0) t = &WTYPES[ti];
    for (int ci = 0; ci < (int)(sizeof COLS / sizeof COLS[0]); ci++) {
        const int64_t cols = COLS[ci], ng = cols / 32;
        uint8_t *w = make_weights(t, 200, cols, 0);
        int8_t *q = (int8_t *)malloc((size_t)cols);
        float *d = (float *)malloc((size_t)ng * sizeof(float));
        int32_t *s = (int32_t *)malloc((size_t)ng * sizeof(int32_t));
        for (int mode = 0; mode < 4; mode++) { /* random, all +-127, all 127, all -127 by group */
            for (int64_t g = 0; g < ng; g++) {
                int32_t sum = 0;
                for (int64_t j = 0; j < 32; j++) {
                    int v = mode == 0 ? rndi(-127, 127)
                          : mode == 1 ? (rnd64() & 1 ? 127 : -127)
                          : mode == 2 ? 127
                                      : (g % 2 ? 127 : -127);
                    q[g * 32 + j] = (int8_t)v;
                    sum += v;
                }
                d[g] = ldexpf(rndf(1.0f, 2.0f), rndi(-12, -4));
                s[g] = sum;
            }
            const lowbit_act a = {q, d, s, cols, 32};
            for (int ri = 0; ri < (int)(sizeof ROWS / sizeof ROWS[0]); ri++)
                case_exact(t, w, ROWS[ri], cols, 1, &a, 1 + ri % 2);
        }
        free(w);
        free(q);
        free(d);
        free(s);
    }
}

/* ---- main ------------------------------------------------------------------------------------ */

int main(void) {
    init_variants();
    test_degenerate();
    test_codecs();
    test_float_weights();
    test_exact();
    test_q1_gemv();
    test_float();
    printf("float mode: worst |y - ref| / sum|w||x| = %.3g (tolerance 1e-6)\n", g_worst_ratio);
    return report();
}
