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

#include "harness.h"

static uint32_t rnd(void) { return (uint32_t)(rnd64() >> 32); }

static const int TYPES[] = {LOWBIT_TYPE_TQ1_0, LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_I2_S,
                            LOWBIT_TYPE_Q2_0,  LOWBIT_TYPE_PQ2_0, LOWBIT_TYPE_PTQ1_0};

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
    uint8_t *w = (uint8_t *)aligned_alloc(64, (size_t)(n + 63) / 64 * 64);
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
        const int64_t cols = KS[bi % 5] * unit + (type == LOWBIT_TYPE_Q2_0 && bi % 2 ? 64 : 0);
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

int main(void) {
    g_rng = 12345;
    unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    printf("liblowbit %s; packed layout vs scalar file layout, variants 0x%x\n", lowbit_version(),
           usable);
    for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++) {
        if (!(usable & (1u << isa))) continue;
        for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
            test_type(TYPES[t], isa);
            test_gemm_tails(TYPES[t], isa);
        }
    }
    /* types that are not repacked borrow the buffer and still compute */
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
