/* C test of the packed (row-interleaved) layout: lowbit_matrix_pack + lowbit_matrix_gemm_act of
 * every compiled-and-supported variant against the scalar file-layout GEMV, in one process.
 *
 * Weights are random code bytes (every code, incl. 2-bit code 3) with small-integer fp16 scales;
 * activations are random A8 codes in [-127, 127] with scale 1 and exact sums.  Every float in the
 * computation is then an integer below 2^24, so results must be bit-identical whatever the float
 * order.  Sizes: cols = k * block (k = 1..9, so Q2_0 has odd block counts: half chunks), rows
 * 1..70 (row-group and 64-row task tails), batch 1..9; guard words after every output; 1 and 2
 * threads.  Prints "N passed, N failed"; exit status 1 on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "harness.h"

static uint32_t rnd(void) { return (uint32_t)(rnd64() >> 32); }

static const int TYPES[] = {LOWBIT_TYPE_TQ1_0, LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_I2_S,
                            LOWBIT_TYPE_Q2_0,  LOWBIT_TYPE_PQ2_0, LOWBIT_TYPE_PTQ1_0,
                            LOWBIT_TYPE_Q8_0};

/* offset of the fp16 scale inside a block (-1: I2_S, fp32 per-tensor scale after the codes) */
static int scale_offset(int type) {
    switch (type) {
    case LOWBIT_TYPE_TQ1_0: return 52;
    case LOWBIT_TYPE_TQ2_0: return 64;
    case LOWBIT_TYPE_PTQ1_0: return 26;
    case LOWBIT_TYPE_I2_S: return -1;
    default: return 0;
    }
}

static uint8_t *random_weights(int type, int64_t rows, int64_t cols, int64_t *nbytes) {
    int64_t n = lowbit_tensor_bytes(type, rows * cols);
    uint8_t *w = (uint8_t *)malloc((size_t)n); /* block data needs only its struct's alignment */
    for (int64_t i = 0; i < n; i++) w[i] = (uint8_t)rnd();
    int off = scale_offset(type);
    if (off < 0) {
        float s = 2.0f;
        memcpy(w + n - 32, &s, 4);
    } else {
        int64_t bb = lowbit_type_block_bytes(type);
        for (int64_t b = 0; b < n / bb; b++) {
            uint16_t h = lowbit_fp32_to_fp16((float)(1 + rnd() % 3));
            memcpy(w + b * bb + off, &h, 2);
        }
    }
    *nbytes = n;
    return w;
}

/* Units of a dense base-3 row (internal.h), counted from the layout's rule: 5 groups of S
 * slices in S units, the last ng % 5 groups in S / 4 units each. */
static int64_t base3_units(int64_t cols, int64_t G) {
    const int64_t S = G / 32, ng = cols / G;
    return ng / 5 * S + ng % 5 * S / 4;
}

/* AVX-512 VBMI (CPUID leaf 7, ECX bit 1): what the avx512vnni variant needs to pack base-3 */
static int cpu_vbmi(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (c >> 1) & 1;
#else
    return 0;
#endif
}

/* An AMD core: the kernel list's AMD entries (the group-256 rows16 GEMVs) apply */
static int cpu_amd(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    __cpuid(0, a, b, c, d);
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
#else
    return 0;
#endif
}

/* The packed layouts a type is tested in: the canonical 2-bit one, dense base-3 (TQ1_0, PTQ1_0)
 * and rows16 (all but I2_S: the formats with rows16 kernels), each forced by
 * PYLOWBIT_BASE3 / PYLOWBIT_ROWS16; Q8_0 in q8rows alone (PYLOWBIT_Q8ROWS). */
enum { CANONICAL, BASE3, ROWS16, BASE3F, Q8ROWS, N_LAYOUTS };
static int has_layout(int type, int L) {
    if ((type == LOWBIT_TYPE_Q8_0) != (L == Q8ROWS)) return 0;
    if (L == BASE3 || L == BASE3F) return type == LOWBIT_TYPE_TQ1_0 || type == LOWBIT_TYPE_PTQ1_0;
    if (L == ROWS16)
        return type != LOWBIT_TYPE_I2_S;
    return 1;
}
static void set_layout(int L) {
    set_env("PYLOWBIT_BASE3", L == BASE3 ? "1" : "0");
    set_env("PYLOWBIT_BASE3F", L == BASE3F ? "1" : "0");
    set_env("PYLOWBIT_ROWS16", L == ROWS16 ? "1" : "0");
    set_env("PYLOWBIT_Q8ROWS", L == Q8ROWS ? "1" : "0");
}

#define GUARD 8
#define GUARD_VAL 1234.5f

static void test_type(int type, int isa) {
    const int64_t bs = lowbit_type_block_size(type), G = lowbit_act_group(type);
    static const int ROWS[] = {1, 3, 4, 5, 63, 64, 65, 70};
    static const int BATCH[] = {1, 2, 5, 9};
    for (int k = 1; k <= 9; k++) {
        const int64_t cols = k * bs;
        for (size_t ri = 0; ri < sizeof ROWS / sizeof ROWS[0]; ri++) {
            const int64_t rows = ROWS[ri];
            int64_t nb;
            uint8_t *w = random_weights(type, rows, cols, &nb);
            int st;
            lowbit_set_isa(isa);
            lowbit_matrix *m = lowbit_matrix_pack(type, w, rows, cols, 2, &st);
            CHECK(m && st == LOWBIT_OK && lowbit_matrix_is_packed(m) == 1, "pack %d", st);
            if (!m) {
                free(w);
                continue;
            }
            int64_t rows4 = (rows + 3) / 4 * 4, nch = (cols + 127) / 128;
            if (m->base3) { /* 32-byte units in place of chunks, rows in sets of 16 */
                nch = base3_units(cols, G);
                rows4 = (rows + 15) / 16 * 16;
            }
            if (m->rows16) rows4 = (rows + 15) / 16 * 16; /* chunks, rows in sets of 16 */
            if (m->q8rows) /* the file's bytes, rows in sets of 16 */
                rows4 = (rows + 15) / 16 * 16, nch = cols / 32;
            int64_t want = rows4 * nch * 32 + (type == LOWBIT_TYPE_I2_S ? 0 : rows4 * (cols / bs) * 2);
            CHECK(lowbit_matrix_nbytes(m) == want, "nbytes %lld != %lld",
                  (long long)lowbit_matrix_nbytes(m), (long long)want);
            const int64_t batch = BATCH[(k + ri) % 4];
            int8_t *q = (int8_t *)malloc((size_t)(batch * cols));
            float *d = (float *)malloc((size_t)(batch * cols / G) * 4);
            int32_t *s = (int32_t *)malloc((size_t)(batch * cols / G) * 4);
            lowbit_act *a = (lowbit_act *)malloc((size_t)batch * sizeof *a);
            for (int64_t b = 0; b < batch; b++) {
                for (int64_t g = 0; g < cols / G; g++) {
                    int32_t sum = 0;
                    for (int64_t j = 0; j < G; j++) {
                        int v = (int)(rnd() % 255) - 127;
                        q[b * cols + g * G + j] = (int8_t)v;
                        sum += v;
                    }
                    d[b * cols / G + g] = 1.0f;
                    s[b * cols / G + g] = sum;
                }
                a[b] = (lowbit_act){q + b * cols, d + b * cols / G, s + b * cols / G, cols, G};
            }
            float *ref = (float *)malloc((size_t)(batch * rows) * 4);
            float *y = (float *)malloc((size_t)(batch * rows + GUARD) * 4);
            lowbit_set_isa(LOWBIT_ISA_SCALAR);
            CHECK(lowbit_gemm_act(type, w, rows, cols, a, batch, ref, 1) == LOWBIT_OK, "ref");
            lowbit_set_isa(isa);
            for (int threads = 1; threads <= 2; threads++) {
                for (int64_t i = 0; i < batch * rows + GUARD; i++) y[i] = GUARD_VAL;
                CHECK(lowbit_matrix_gemm_act(m, a, batch, y, threads) == LOWBIT_OK, "gemm_act");
                int bad = 0;
                for (int64_t i = 0; i < batch * rows; i++) bad += y[i] != ref[i];
                for (int64_t i = batch * rows; i < batch * rows + GUARD; i++) bad += y[i] != GUARD_VAL;
                CHECK(!bad, "%s %s rows %lld cols %lld batch %lld threads %d: %d wrong",
                      lowbit_isa_name(isa), lowbit_type_name(type), (long long)rows,
                      (long long)cols, (long long)batch, threads, bad);
                /* batch 1 takes the GEMV kernel */
                for (int64_t i = 0; i < rows + GUARD; i++) y[i] = GUARD_VAL;
                lowbit_matrix_gemm_act(m, a, 1, y, threads);
                bad = 0;
                for (int64_t i = 0; i < rows; i++) bad += y[i] != ref[i];
                for (int64_t i = rows; i < rows + GUARD; i++) bad += y[i] != GUARD_VAL;
                CHECK(!bad, "gemv %s %s rows %lld cols %lld threads %d: %d wrong",
                      lowbit_isa_name(isa), lowbit_type_name(type), (long long)rows,
                      (long long)cols, threads, bad);
            }
            lowbit_matrix_free(m);
            free(w), free(q), free(d), free(s), free(a), free(ref), free(y);
        }
    }
}

/* The packed GEMM's tails against the scalar packed kernel on the same matrix, bit for bit: batch
 * 1..9 and 63..65 (register-tile and column-pass tails), rows around 4-row groups and 32-row panels,
 * cols across K blocks (512 weights) and, for Q2_0, ending on a half chunk.  Unlike test_type, the
 * weight scales and activation scales are arbitrary floats, so a different float order (or an FMA)
 * shows up as a wrong bit. */
static void test_gemm_tails(int type, int isa) {
    const int64_t bs = lowbit_type_block_size(type), G = lowbit_act_group(type);
    static const int BATCH[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 63, 64, 65};
    static const int ROWS[] = {1, 5, 31, 33, 70, 100, 130};
    static const int KS[] = {1, 3, 5, 9, 17}; /* cols = k * lcm(block, 128), Q2_0 also +64 */
    const int64_t unit = bs < 128 ? 128 : bs;
    for (size_t bi = 0; bi < sizeof BATCH / sizeof BATCH[0]; bi++) {
        const int64_t batch = BATCH[bi], rows = ROWS[bi % 7];
        const int64_t cols = KS[bi % 5] * unit + (type == LOWBIT_TYPE_Q2_0 && bi % 2 ? 64 : 0) +
                             (type == LOWBIT_TYPE_Q8_0 && bi % 2 ? 32 : 0); /* odd blocks */
        if (cols * rows * batch > (int64_t)40 << 20) continue;
        int64_t nb;
        uint8_t *w = random_weights(type, rows, cols, &nb);
        int off = scale_offset(type);
        if (off >= 0) {
            const int64_t bb = lowbit_type_block_bytes(type);
            for (int64_t b = 0; b < nb / bb; b++) {
                uint16_t h = lowbit_fp32_to_fp16((float)(rnd() % 20000 + 1) * 1e-4f);
                memcpy(w + b * bb + off, &h, 2);
            }
        }
        int st;
        lowbit_matrix *m = lowbit_matrix_pack(type, w, rows, cols, 1, &st);
        const int64_t ng = cols / G;
        int8_t *q = (int8_t *)malloc((size_t)(batch * cols));
        float *d = (float *)malloc((size_t)(batch * ng) * 4);
        int32_t *s = (int32_t *)malloc((size_t)(batch * ng) * 4);
        lowbit_act *a = (lowbit_act *)malloc((size_t)batch * sizeof *a);
        for (int64_t b = 0; b < batch; b++) {
            for (int64_t g = 0; g < ng; g++) {
                int32_t sum = 0;
                for (int64_t j = 0; j < G; j++) {
                    int v = (int)(rnd() % 255) - 127;
                    q[b * cols + g * G + j] = (int8_t)v;
                    sum += v;
                }
                d[b * ng + g] = (float)(rnd() % 100000 + 1) * 3.7e-7f;
                s[b * ng + g] = sum;
            }
            a[b] = (lowbit_act){q + b * cols, d + b * ng, s + b * ng, cols, G};
        }
        float *ref = (float *)malloc((size_t)(batch * rows) * 4);
        float *y = (float *)malloc((size_t)(batch * rows + GUARD) * 4);
        lowbit_set_isa(LOWBIT_ISA_SCALAR);
        CHECK(m && lowbit_matrix_gemm_act(m, a, batch, ref, 1) == LOWBIT_OK, "ref");
        { /* the scalar packed reference of either layout is the file layout's, bit for bit */
            float *fref = (float *)malloc((size_t)(batch * rows) * 4);
            CHECK(lowbit_gemm_act(type, w, rows, cols, a, batch, fref, 1) == LOWBIT_OK, "file ref");
            CHECK(!memcmp(fref, ref, (size_t)(batch * rows) * 4),
                  "%s (%s layout) rows %lld cols %lld: packed reference != file reference",
                  lowbit_type_name(type),
                  m && m->base3 ? "base-3" : m && m->rows16 ? "rows16" : m && m->q8rows ? "q8rows" : "2-bit",
                  (long long)rows,
                  (long long)cols);
            free(fref);
        }
        lowbit_set_isa(isa);
        for (int threads = 1; threads <= 2; threads++) {
            for (int64_t i = 0; i < batch * rows + GUARD; i++) y[i] = GUARD_VAL;
            CHECK(lowbit_matrix_gemm_act(m, a, batch, y, threads) == LOWBIT_OK, "gemm_act");
            int bad = 0;
            for (int64_t i = 0; i < batch * rows; i++) bad += memcmp(&y[i], &ref[i], 4) != 0;
            for (int64_t i = batch * rows; i < batch * rows + GUARD; i++) bad += y[i] != GUARD_VAL;
            CHECK(!bad, "tails %s %s rows %lld cols %lld batch %lld threads %d: %d wrong",
                  lowbit_isa_name(isa), lowbit_type_name(type), (long long)rows, (long long)cols,
                  (long long)batch, threads, bad);
        }
        lowbit_matrix_free(m);
        free(w), free(q), free(d), free(s), free(a), free(ref), free(y);
    }
}

/* ---- Arm fast paths (kernels_arm.h; the AVX2 kernel has the same two) ------------------------
 * The packed GEMV of every variant against the scalar packed kernel on one matrix, bit for bit:
 *  - group 32 (Q2_0 qk 64) and group 128 with qk 128 (PQ2_0 / PTQ1_0: chunks reduced in pairs
 *    on AVX2) with arbitrary float scales (a different float order shows) and zero groups, rows
 *    making lone and partial row groups inside a 64-row task, Q2_0 cols ending on a half chunk,
 *    odd chunk counts (a last lone chunk);
 *  - I2_S with P2 activations (one power-of-two scale: one integer sum per row), from the library's
 *    quantizer and hand-made at 2^-126, 2^-7, 1, 2^100 and 0, and with scales that must take the
 *    per-group path (not a power of two, or one group different);
 *  - the int16 bounds: every code 3 against activation codes all +127 or all -127, over more than
 *    one run of chunks (I2_S: 8 chunks) and every group-32 plane. */

/* one activation vector: codes qval (> 127: random), scales dval (NaN: random), exact sums */
static void fill_act(int64_t cols, int64_t G, int8_t *q, float *d, int32_t *s, int qval,
                     float dval) {
    for (int64_t g = 0; g < cols / G; g++) {
        int32_t sum = 0;
        for (int64_t j = 0; j < G; j++) {
            int v = qval > 127 ? (int)(rnd() % 255) - 127 : qval;
            q[g * G + j] = (int8_t)v;
            sum += v;
        }
        d[g] = isnan(dval) ? (float)(rnd() % 100000 + 1) * 3.7e-7f : dval;
        s[g] = sum;
    }
}

/* GEMV (batch 1) of m on a: every usable variant against scalar, bit for bit, plus guards */
static void check_gemv(const lowbit_matrix *m, const lowbit_act *a, int64_t rows,
                       const char *what) {
    float *ref = (float *)malloc((size_t)rows * 4);
    float *y = (float *)malloc((size_t)(rows + GUARD) * 4);
    lowbit_set_isa(LOWBIT_ISA_SCALAR);
    CHECK(lowbit_matrix_gemm_act(m, a, 1, ref, 1) == LOWBIT_OK, "ref %s", what);
    unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    for (int isa = 1; isa < LOWBIT_ISA_COUNT; isa++) {
        if (!(usable & (1u << isa))) continue;
        lowbit_set_isa(isa);
        for (int threads = 1; threads <= 2; threads++) {
            for (int64_t i = 0; i < rows + GUARD; i++) y[i] = GUARD_VAL;
            CHECK(lowbit_matrix_gemm_act(m, a, 1, y, threads) == LOWBIT_OK, "gemv %s", what);
            int bad = 0;
            for (int64_t i = 0; i < rows; i++) bad += memcmp(&y[i], &ref[i], 4) != 0;
            for (int64_t i = rows; i < rows + GUARD; i++) bad += y[i] != GUARD_VAL;
            CHECK(!bad, "fast path %s %s %s rows %lld cols %lld threads %d: %d wrong",
                  lowbit_isa_name(isa), lowbit_type_name(m->type), what, (long long)rows,
                  (long long)m->cols, threads, bad);
        }
    }
    lowbit_set_isa(LOWBIT_ISA_SCALAR);
    free(ref), free(y);
}

/* all codes 3 (2-bit formats: every code byte 0xFF; Q8_0: every code -128), scales kept */
static void codes_all_3(int type, uint8_t *w, int64_t nb) {
    const int off = scale_offset(type);
    if (type == LOWBIT_TYPE_Q8_0) {
        for (int64_t b = 0; b < nb / 34; b++) memset(w + b * 34 + 2, 0x80, 32);
        return;
    }
    if (off < 0) {
        memset(w, 0xFF, (size_t)(nb - 32));
        return;
    }
    const int64_t bb = lowbit_type_block_bytes(type);
    for (int64_t b = 0; b < nb / bb; b++)
        for (int64_t j = 0; j < bb; j++)
            if (j != off && j != off + 1) w[b * bb + j] = 0xFF;
}

static void test_arm_fast_paths(int type) {
    const int64_t bs = lowbit_type_block_size(type), G = lowbit_act_group(type);
    static const int ROWS[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 67, 75, 130};
    for (size_t ri = 0; ri < sizeof ROWS / sizeof ROWS[0]; ri++) {
        const int64_t rows = ROWS[ri];
        /* Q2_0: odd block counts end on a half chunk; I2_S: 1, 8, 9, 19 chunks (ROW_RUN tails) */
        static const int KS[] = {1, 3, 8, 9, 19};
        const int64_t cols = KS[ri % 5] * bs;
        int64_t nb;
        uint8_t *w = random_weights(type, rows, cols, &nb);
        const int off = scale_offset(type);
        if (off >= 0) { /* arbitrary fp16 scales */
            const int64_t bb = lowbit_type_block_bytes(type);
            for (int64_t b = 0; b < nb / bb; b++) {
                uint16_t h = lowbit_fp32_to_fp16((float)(rnd() % 20000 + 1) * 1e-4f);
                memcpy(w + b * bb + off, &h, 2);
            }
        }
        int8_t *q = (int8_t *)malloc((size_t)cols);
        float *d = (float *)malloc((size_t)(cols / G) * 4), *x = (float *)malloc((size_t)cols * 4);
        int32_t *s = (int32_t *)malloc((size_t)(cols / G) * 4);
        const lowbit_act a = {q, d, s, cols, G};
        for (int bound = 0; bound < 2; bound++) {
            if (bound) codes_all_3(type, w, nb);
            int st;
            lowbit_matrix *m = lowbit_matrix_pack(type, w, rows, cols, 1, &st);
            CHECK(m != NULL, "pack %d", st);
            if (!m) continue;
            const int i2s = type == LOWBIT_TYPE_I2_S;
            if (bound) { /* the int16 bounds: every code 3 against all +127 / all -127 */
                fill_act(cols, G, q, d, s, 127, i2s ? 0.0078125f : NAN);
                check_gemv(m, &a, rows, "bound +127");
                fill_act(cols, G, q, d, s, -127, i2s ? 0.0078125f : NAN);
                check_gemv(m, &a, rows, "bound -127");
            } else if (i2s) {
                static const float P2[] = {0x1p-126f, 0x1p-7f, 1.0f, 0x1p100f};
                for (int k = 0; k < 4; k++) {
                    fill_act(cols, G, q, d, s, 255, P2[k]);
                    check_gemv(m, &a, rows, "P2");
                }
                fill_act(cols, G, q, d, s, 0, 0.0f);
                check_gemv(m, &a, rows, "P2 zero");
                fill_act(cols, G, q, d, s, 255, 0.75f); /* not a power of two: per group */
                check_gemv(m, &a, rows, "not P2");
                fill_act(cols, G, q, d, s, 255, 0.25f);
                d[cols / G - 1] = 0.5f; /* one group different: per group */
                check_gemv(m, &a, rows, "mixed");
                /* the library's own P2 quantizer through lowbit_matrix_gemv */
                float *ref = (float *)malloc((size_t)rows * 4);
                float *y = (float *)malloc((size_t)rows * 4);
                for (int64_t j = 0; j < cols; j++)
                    x[j] = (float)((int)(rnd() % 20001) - 10000) * 3e-3f;
                lowbit_set_isa(LOWBIT_ISA_SCALAR);
                CHECK(lowbit_matrix_gemv(m, x, ref, 1) == LOWBIT_OK, "gemv ref");
                unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
                for (int isa = 1; isa < LOWBIT_ISA_COUNT; isa++) {
                    if (!(usable & (1u << isa))) continue;
                    lowbit_set_isa(isa);
                    CHECK(lowbit_matrix_gemv(m, x, y, 1) == LOWBIT_OK, "gemv");
                    CHECK(!memcmp(y, ref, (size_t)rows * 4), "P2 gemv %s rows %lld cols %lld",
                          lowbit_isa_name(isa), (long long)rows, (long long)cols);
                }
                lowbit_set_isa(LOWBIT_ISA_SCALAR);
                free(ref), free(y);
            } else {
                fill_act(cols, G, q, d, s, 255, NAN);
                check_gemv(m, &a, rows, "random scales");
                for (int64_t g = 0; g < cols / G; g += 2) { /* every other group all zero */
                    memset(q + g * G, 0, (size_t)G);
                    d[g] = 0.0f, s[g] = 0;
                }
                check_gemv(m, &a, rows, "zero groups");
            }
            lowbit_matrix_free(m);
        }
        free(w), free(q), free(d), free(x), free(s);
    }
}

int main(void) {
    g_rng = 12345;
    unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    printf("liblowbit %s; packed layout vs scalar file layout, variants 0x%x\n", lowbit_version(),
           usable);
    for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++) {
        if (!(usable & (1u << isa))) continue;
        for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
            for (int L = 0; L < N_LAYOUTS; L++) {
                if (!has_layout(TYPES[t], L)) continue;
                set_layout(L);
                test_type(TYPES[t], isa);
                test_gemm_tails(TYPES[t], isa);
            }
    }
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
        for (int L = 0; L < N_LAYOUTS; L++) {
            if (!has_layout(TYPES[t], L)) continue;
            set_layout(L);
            test_arm_fast_paths(TYPES[t]);
        }
    set_env("PYLOWBIT_BASE3", NULL);
    set_env("PYLOWBIT_BASE3F", NULL);
    set_env("PYLOWBIT_ROWS16", NULL);
    set_env("PYLOWBIT_Q8ROWS", NULL);
    { /* the layout each type gets: base-3 dense (rows16) only where asked for or the variant has
       * a kernel for it (base-3: avx512vnni with VBMI; rows16: avx512vnni, the group-256 formats
       * there on AMD cores only, and the 256-bit x86 variants) */
        for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++) {
            if (!(usable & (1u << isa))) continue;
            lowbit_set_isa(isa);
            for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
                const int type = TYPES[t];
                /* unset: base-3 where the variant decodes it (avx512vnni with VBMI), else rows16
                 * where it has a kernel for it, never BASE3F (its kernels are all ASKED); else
                 * each one where forced */
                const int avx512 = isa == LOWBIT_ISA_AVX512VNNI;
                const int ymm = isa == LOWBIT_ISA_AVX2 || isa == LOWBIT_ISA_AVXVNNI ||
                                isa == LOWBIT_ISA_AVXVNNI_EMULATED;
                int64_t nb;
                uint8_t *w = random_weights(type, 4, 1280, &nb);
                int st;
                for (int L = -1; L < N_LAYOUTS; L++) {
                    if (L >= 0 && !has_layout(type, L)) continue;
                    if (L >= 0) set_layout(L);
                    lowbit_matrix *m = lowbit_matrix_pack(type, w, 4, 1280, 1, &st);
                    int want = L;
                    if (L < 0)
                        want = type == LOWBIT_TYPE_Q8_0 ? (avx512 ? Q8ROWS : -1) /* -1: borrowed */
                               : avx512 && has_layout(type, BASE3) && cpu_vbmi() ? BASE3
                               : has_layout(type, ROWS16) &&
                                         ((avx512 && (lowbit_type_block_size(type) != 256 ||
                                                      cpu_amd())) ||
                                          ymm)
                                   ? ROWS16
                                                                               : CANONICAL;
                    CHECK(m && m->base3 == (want == BASE3 || want == BASE3F) &&
                              m->base3f == (want == BASE3F) && m->rows16 == (want == ROWS16) &&
                              m->q8rows == (want == Q8ROWS) && m->packed == (want >= 0),
                          "%s %s layout %d: base3 %d rows16 %d", lowbit_isa_name(isa),
                          lowbit_type_name(type), L, m ? m->base3 : -1, m ? m->rows16 : -1);
                    lowbit_matrix_free(m);
                    set_env("PYLOWBIT_BASE3", NULL);
                    set_env("PYLOWBIT_BASE3F", NULL);
                    set_env("PYLOWBIT_ROWS16", NULL);
                    set_env("PYLOWBIT_Q8ROWS", NULL);
                }
                free(w);
            }
        }
        lowbit_set_isa(LOWBIT_ISA_SCALAR);
    }
    /* types that are not repacked (Q8_0 on the scalar variant, set above) borrow the buffer and
     * still compute */
    {
        int64_t nb;
        uint8_t *w = random_weights(LOWBIT_TYPE_Q8_0, 5, 64, &nb);
        int st;
        lowbit_matrix *m = lowbit_matrix_pack(LOWBIT_TYPE_Q8_0, w, 5, 64, 1, &st);
        CHECK(m && lowbit_matrix_is_packed(m) == 0 && lowbit_matrix_nbytes(m) == 0, "borrow");
        lowbit_matrix_free(m);
        free(w);
    }
    {
        int st = 0;
        CHECK(lowbit_matrix_pack(LOWBIT_TYPE_TQ2_0, NULL, 1, 256, 1, &st) == NULL &&
                  st == LOWBIT_EINVAL, "null weights");
        uint8_t dummy[66] = {0};
        CHECK(lowbit_matrix_pack(LOWBIT_TYPE_TQ2_0, dummy, 1, 100, 1, &st) == NULL &&
                  st == LOWBIT_ESIZE, "bad cols");
        CHECK(lowbit_matrix_pack(9999, dummy, 1, 256, 1, &st) == NULL && st == LOWBIT_ETYPE,
              "bad type");
        CHECK(lowbit_matrix_gemv(NULL, NULL, NULL, 1) == LOWBIT_EINVAL, "null matrix");
    }
    return report();
}
