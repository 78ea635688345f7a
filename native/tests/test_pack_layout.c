/* C test of the packed layouts' bytes: what lowbit_matrix_pack writes (codes and scales, byte for
 * byte, padding included) against each layout as packed.h describes it, built here from the
 * file layout's dequantized weights (code = value / scale + 1).  The GEMV tests (test_packed.c)
 * cannot see bytes no kernel reads: a last half chunk's missing half, the base-3 tail's plane 4
 * and the padding rows, all zero codes.
 *
 * Layouts: canonical 2-bit (every type), dense base-3 in either byte code, BASE3 and BASE3F
 * (TQ1_0, PTQ1_0), rows16 (Q2_0, PQ2_0, PTQ1_0), each forced by PYLOWBIT_BASE3 / PYLOWBIT_BASE3F /
 * PYLOWBIT_ROWS16; Q1_0's rows64 (PYLOWBIT_ROWS64), its file bytes moved as packed.h says.  Sizes: 1..11 blocks a row (base-3:
 * tails of 0..4 groups after 0..2 periods; Q2_0: odd counts end on a half chunk), rows making
 * partial 4-row groups and 16-row sets; 1 and 2 packing threads.  Prints "N passed, N failed";
 * exit status 1 on failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#include "harness.h"

static const int TYPES[] = {LOWBIT_TYPE_TQ1_0, LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_I2_S,
                            LOWBIT_TYPE_Q2_0,  LOWBIT_TYPE_PQ2_0, LOWBIT_TYPE_PTQ1_0};

enum { CANONICAL, BASE3, ROWS16, BASE3F, N_LAYOUTS };
static const char *LAYOUT_NAME[] = {"canonical", "base-3", "rows16", "base-3 f"};
static int has_layout(int type, int L) {
    if (L == BASE3 || L == BASE3F) return type == LOWBIT_TYPE_TQ1_0 || type == LOWBIT_TYPE_PTQ1_0;
    if (L == ROWS16)
        return type == LOWBIT_TYPE_Q2_0 || type == LOWBIT_TYPE_PQ2_0 || type == LOWBIT_TYPE_PTQ1_0;
    return 1;
}

/* Random code bytes (every code) with fp16 scales 1..3 (I2_S: tensor scale 2): the file layout */
static uint8_t *random_weights(int type, int64_t rows, int64_t cols, lowbit_type_facts *f) {
    const int64_t n = lowbit_tensor_bytes(type, rows * cols);
    uint8_t *w = (uint8_t *)malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) w[i] = (uint8_t)(rnd64() >> 56);
    lowbit_type_facts_get(type, f);
    if (f->scale_offset < 0) {
        const float s = 2.0f;
        memcpy(w + n - 32, &s, 4);
    } else {
        for (int64_t b = 0; b < n / f->block_bytes; b++) {
            const uint16_t h = lowbit_fp32_to_fp16((float)(1 + rnd64() % 3));
            memcpy(w + b * f->block_bytes + f->scale_offset, &h, 2);
        }
    }
    return w;
}

/* Codes (0..3) of the weights in row-major order and fp16 scales [rows][cols / qk] (none for
 * I2_S), from the file layout's dequantizer; 0 if a value is not (code - 1) x its scale */
static int file_codes(int type, const uint8_t *w, int64_t rows, int64_t cols,
                      const lowbit_type_facts *f, uint8_t *codes, uint16_t *scales) {
    float *v = (float *)malloc((size_t)(rows * cols) * 4);
    int ok = lowbit_dequantize(type, w, rows * cols, v) == LOWBIT_OK;
    const int64_t qk = f->block_size, nb = cols / qk;
    float tensor_scale = 0.0f;
    if (f->scale_offset < 0) memcpy(&tensor_scale, w + rows * cols / 4, 4);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) {
            float d = tensor_scale;
            if (f->scale_offset >= 0) {
                uint16_t h;
                memcpy(&h, w + (r * nb + j / qk) * f->block_bytes + f->scale_offset, 2);
                scales[r * nb + j / qk] = h;
                d = lowbit_fp16_to_fp32(h);
            }
            const float c = v[r * cols + j] / d + 1.0f;
            ok &= c >= 0.0f && c <= 3.0f && c == floorf(c);
            codes[r * cols + j] = (uint8_t)c;
        }
    free(v);
    return ok;
}

/* Weight j of row r, 0 past the row's end (a last half chunk) */
static int code(const uint8_t *codes, int64_t cols, int64_t r, int64_t j) {
    return j < cols ? codes[r * cols + j] : 0;
}

/* Byte p of 128-weight chunk c of row r in the 2-bit layouts: weights 128c + p + 32k at bits 2k */
static uint8_t chunk_byte(const uint8_t *codes, int64_t cols, int64_t r, int64_t c, int p) {
    int b = 0;
    for (int k = 0; k < 4; k++) b |= code(codes, cols, r, 128 * c + p + 32 * k) << (2 * k);
    return (uint8_t)b;
}

/* Byte p of 32-byte unit u of row r in the base-3 layout: with S = G / 32 and ng groups, unit
 * v of a whole period P (5 groups) holds slices 4 (v % (S/4)) + k (k = 0..3) of group
 * 5P + v / (S/4) and slice v of group 5P + 4; a tail unit t (after the whole periods) slices
 * 4 (t % (S/4)) + k of tail group t / (S/4), plane 4 zero. */
static uint8_t unit_byte(int L, const uint8_t *codes, int64_t cols, int64_t G, int64_t r,
                         int64_t u, int p) {
    const int64_t S = G / 32, per = S / 4, whole = cols / G / 5;
    int t[5] = {0, 0, 0, 0, L == BASE3F}; /* no plane 4: code 0 (BASE3), weight 0 (BASE3F) */
    if (u < whole * S) {
        const int64_t P = u / S, v = u % S;
        for (int k = 0; k < 4; k++)
            t[k] = codes[r * cols + (5 * P + v / per) * G + (4 * (v % per) + k) * 32 + p];
        t[4] = codes[r * cols + (5 * P + 4) * G + v * 32 + p];
    } else {
        const int64_t v = u - whole * S;
        for (int k = 0; k < 4; k++)
            t[k] = codes[r * cols + (5 * whole + v / per) * G + (4 * (v % per) + k) * 32 + p];
    }
    if (L == BASE3F) { /* TQ1_0's qs byte of the five, minus 128 */
        const int v = 81 * t[0] + 27 * t[1] + 9 * t[2] + 3 * t[3] + t[4];
        return (uint8_t)((v * 256 + 242) / 243 + 128);
    }
    return (uint8_t)(84 * t[4] + t[0] + 3 * t[1] + 9 * t[2] + 27 * t[3]);
}

/* The bytes of layout L for rows x cols (codes, then scales), padding rows zero; *nbytes */
static uint8_t *expected_layout(int L, const lowbit_type_facts *f, const uint8_t *codes,
                                const uint16_t *scales, int64_t rows, int64_t cols,
                                int64_t *nbytes) {
    const int64_t n = L == CANONICAL ? 4 : 16; /* rows a group / set */
    const int64_t padded = (rows + n - 1) / n * n, nchunks = (cols + 127) / 128;
    const int64_t S = f->act_group / 32, ng = cols / f->act_group; /* base-3: whole periods, tail */
    const int64_t nunits = L == BASE3 || L == BASE3F ? ng / 5 * S + ng % 5 * (S / 4) : nchunks;
    const int64_t nscales = f->scale_offset < 0 ? 0 : cols / f->block_size;
    const int64_t code_bytes = padded * nunits * 32;
    *nbytes = code_bytes + padded * nscales * 2;
    uint8_t *e = (uint8_t *)calloc((size_t)*nbytes, 1);
    uint16_t *es = (uint16_t *)malloc((size_t)(padded * nscales + 1) * 2);
    memset(es, 0, (size_t)(padded * nscales + 1) * 2);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t g = r / n, i = r % n;
        for (int64_t u = 0; u < nunits; u++)
            for (int p = 0; p < 32; p++) {
                if (L == CANONICAL) /* codes[rg][c][i][32] */
                    e[((g * nunits + u) * 4 + i) * 32 + p] = chunk_byte(codes, cols, r, u, p);
                else /* codes[R][u or c][j][l][4], byte p at j = p / 4 */
                    e[((g * nunits + u) * 8 + p / 4) * 64 + i * 4 + p % 4] =
                        L == BASE3 || L == BASE3F ? unit_byte(L, codes, cols, f->act_group, r, u, p)
                                                  : chunk_byte(codes, cols, r, u, p);
            }
        for (int64_t b = 0; b < nscales; b++)
            es[(g * nscales + b) * n + i] = scales[r * nscales + b];
    }
    memcpy(e + code_bytes, es, (size_t)(padded * nscales) * 2);
    free(es);
    return e;
}

static void test_type(int type) {
    static const int ROWS[] = {1, 3, 5, 17, 33};
    lowbit_type_facts f;
    lowbit_type_facts_get(type, &f);
    for (int k = 1; k <= 11; k++) {
        const int64_t rows = ROWS[k % 5], cols = k * f.block_size;
        uint8_t *w = random_weights(type, rows, cols, &f);
        uint8_t *codes = (uint8_t *)malloc((size_t)(rows * cols));
        uint16_t *scales = (uint16_t *)malloc((size_t)(rows * cols / f.block_size) * 2);
        CHECK(file_codes(type, w, rows, cols, &f, codes, scales), "%s: dequantized values",
              lowbit_type_name(type));
        for (int L = 0; L < N_LAYOUTS; L++) {
            if (!has_layout(type, L)) continue;
            set_env("PYLOWBIT_BASE3", L == BASE3 ? "1" : "0");
            set_env("PYLOWBIT_BASE3F", L == BASE3F ? "1" : "0");
            set_env("PYLOWBIT_ROWS16", L == ROWS16 ? "1" : "0");
            int64_t nbytes;
            uint8_t *want = expected_layout(L, &f, codes, scales, rows, cols, &nbytes);
            for (int threads = 1; threads <= 2; threads++) {
                int st;
                lowbit_matrix *m = lowbit_matrix_pack(type, w, rows, cols, threads, &st);
                CHECK(m && st == LOWBIT_OK && m->base3 == (L == BASE3 || L == BASE3F) &&
                          m->base3f == (L == BASE3F) &&
                          m->rows16 == (L == ROWS16) && lowbit_matrix_nbytes(m) == nbytes,
                      "%s %s rows %lld cols %lld: pack %d", lowbit_type_name(type),
                      LAYOUT_NAME[L], (long long)rows, (long long)cols, st);
                if (m && lowbit_matrix_nbytes(m) == nbytes) {
                    const uint8_t *scale_bytes = (const uint8_t *)m->scales;
                    const int64_t code_bytes = scale_bytes - m->codes;
                    int64_t bad = -1;
                    for (int64_t i = 0; i < nbytes && bad < 0; i++) {
                        const uint8_t got =
                            i < code_bytes ? m->codes[i] : scale_bytes[i - code_bytes];
                        if (got != want[i]) bad = i;
                    }
                    CHECK(bad < 0, "%s %s rows %lld cols %lld threads %d: byte %lld of %lld",
                          lowbit_type_name(type), LAYOUT_NAME[L], (long long)rows,
                          (long long)cols, threads, (long long)bad, (long long)nbytes);
                }
                lowbit_matrix_free(m);
            }
            free(want);
        }
        free(w), free(codes), free(scales);
    }
    set_env("PYLOWBIT_BASE3", NULL);
    set_env("PYLOWBIT_BASE3F", NULL);
    set_env("PYLOWBIT_ROWS16", NULL);
}

/* rows64: byte k of block b of file row r lands in tile r / 64, block b, vector k, lane e with
 * row(e) = r % 64 (packed.h's order, spelled out again here), the scale in the tile's block run;
 * padding rows zero.  Rows: under a tile, a whole one, a cut second one. */
static void test_rows64(void) {
    static const int ROWS[] = {1, 17, 64, 65, 130};
    set_env("PYLOWBIT_ROWS64", "1");
    for (int k = 1; k <= 5; k++) {
        const int64_t rows = ROWS[k - 1], nb = k, cols = 128 * nb, tiles = (rows + 63) / 64;
        lowbit_type_facts f;
        uint8_t *w = random_weights(LOWBIT_TYPE_Q1_0, rows, cols, &f);
        const int64_t code_bytes = tiles * nb * 16 * 64, nbytes = code_bytes + tiles * nb * 64 * 2;
        uint8_t *want = (uint8_t *)calloc((size_t)nbytes, 1);
        for (int64_t T = 0; T < tiles; T++)
            for (int e = 0; e < 64; e++) {
                const int h = e / 16, i = e % 16, v = 2 * (i / 8) + i % 2;
                const int64_t r = 64 * T + 16 * v + 4 * h + (i % 8) / 2;
                if (r >= rows) continue;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *blk = w + (r * nb + b) * 18;
                    for (int q = 0; q < 16; q++) want[((T * nb + b) * 16 + q) * 64 + e] = blk[2 + q];
                    memcpy(want + code_bytes + ((T * nb + b) * 64 + r % 64) * 2, blk, 2);
                }
            }
        for (int threads = 1; threads <= 2; threads++) {
            int st;
            lowbit_matrix *m = lowbit_matrix_pack(LOWBIT_TYPE_Q1_0, w, rows, cols, threads, &st);
            CHECK(m && st == LOWBIT_OK && m->rows64 && lowbit_matrix_nbytes(m) == nbytes,
                  "q1_0 rows64 rows %lld cols %lld: pack %d", (long long)rows, (long long)cols, st);
            if (m && lowbit_matrix_nbytes(m) == nbytes) {
                const uint8_t *scale_bytes = (const uint8_t *)m->scales;
                CHECK(scale_bytes - m->codes == code_bytes && !memcmp(m->codes, want, (size_t)code_bytes) &&
                          !memcmp(scale_bytes, want + code_bytes, (size_t)(nbytes - code_bytes)),
                      "q1_0 rows64 rows %lld cols %lld threads %d: bytes", (long long)rows,
                      (long long)cols, threads);
            }
            lowbit_matrix_free(m);
        }
        free(w), free(want);
    }
    set_env("PYLOWBIT_ROWS64", NULL);
}

int main(void) {
    g_rng = 2026;
    printf("liblowbit %s; packed layout bytes vs packed.h\n", lowbit_version());
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) test_type(TYPES[t]);
    test_rows64();
    return report();
}
