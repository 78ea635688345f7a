/* C test of the packed copy in a caller's buffer: lowbit_matrix_pack_into, lowbit_matrix_wrap and
 * lowbit_matrix_unpack, for every repacked type, in every layout it can take (canonical 2-bit,
 * dense base-3 in both byte codes, rows16, Q1_0's rows64, Q8_0's q8rows; forced as test_pack_layout.c forces
 * them, and as the variant chooses) under every variant this CPU runs.
 *
 *   round trip  file -> pack_into -> unpack gives the file byte for byte (random bytes: every
 *               2-bit code, I2_S's whole tail; base-3 files written by the encoder); base-3
 *               files of arbitrary bytes give the same weights, in canonical bytes;
 *   results     the borrowed matrix (and a wrap of a copy of its bytes) multiplies exactly as
 *               lowbit_matrix_pack's own copy does;
 *   errors      misaligned, short or foreign buffers, types that are not repacked: a status,
 *               never a crash;
 *   memory      lowbit_weights_alloc's buffers: aligned, disjoint, a matrix packed into one
 *               multiplies as its own copy does.
 * Prints "N passed, N failed"; exit status 1 on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#include "harness.h"

static const int TYPES[] = {LOWBIT_TYPE_TQ1_0, LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_I2_S,
                            LOWBIT_TYPE_Q2_0,  LOWBIT_TYPE_PQ2_0, LOWBIT_TYPE_PTQ1_0,
                            LOWBIT_TYPE_Q1_0, LOWBIT_TYPE_Q8_0};

enum { CHOSEN, CANONICAL, BASE3, ROWS16, BASE3F, ROWS64, Q8ROWS, N_LAYOUTS };
static const char *LAYOUT_NAME[] = {"chosen", "canonical", "base-3", "rows16", "base-3 f", "rows64",
                                    "q8rows"};
static int has_layout(int type, int L) {
    if ((type == LOWBIT_TYPE_Q1_0) != (L == ROWS64)) return 0; /* Q1_0 has rows64 alone */
    if ((type == LOWBIT_TYPE_Q8_0) != (L == Q8ROWS)) return 0; /* Q8_0 has q8rows alone */
    if (L == BASE3 || L == BASE3F) return type == LOWBIT_TYPE_TQ1_0 || type == LOWBIT_TYPE_PTQ1_0;
    if (L == ROWS16)
        return type != LOWBIT_TYPE_I2_S;
    return 1;
}
static void set_layout(int L) {
    set_env("PYLOWBIT_BASE3", L == CHOSEN ? NULL : L == BASE3 ? "1" : "0");
    set_env("PYLOWBIT_BASE3F", L == CHOSEN ? NULL : L == BASE3F ? "1" : "0");
    set_env("PYLOWBIT_ROWS16", L == CHOSEN ? NULL : L == ROWS16 ? "1" : "0");
    set_env("PYLOWBIT_ROWS64", L == CHOSEN ? NULL : L == ROWS64 ? "1" : "0");
    set_env("PYLOWBIT_Q8ROWS", L == CHOSEN ? NULL : L == Q8ROWS ? "1" : "0");
}

/* n bytes at a LOWBIT_PACKED_ALIGN-aligned address inside *base (free *base) */
static uint8_t *aligned_bytes(int64_t n, void **base) {
    *base = malloc((size_t)n + 2 * LOWBIT_PACKED_ALIGN);
    const uintptr_t p = (uintptr_t)*base;
    return (uint8_t *)(p + (LOWBIT_PACKED_ALIGN - p % LOWBIT_PACKED_ALIGN));
}

/* A file of random bytes with fp16 scales 1..3 (I2_S: a random tail holding tensor scale 2).
 * canonical: base-3 blocks written by the encoder (lowbit_quantize of random trits times d). */
static uint8_t *random_file(int type, int64_t rows, int64_t cols, int canonical, int64_t *nbytes) {
    const int64_t n = lowbit_tensor_bytes(type, rows * cols);
    uint8_t *w = (uint8_t *)malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) w[i] = (uint8_t)(rnd64() >> 56);
    lowbit_type_facts f;
    lowbit_type_facts_get(type, &f);
    if (f.scale_offset < 0) {
        const float s = 2.0f;
        memcpy(w + n - 32, &s, 4);
    } else if (canonical && lowbit_type_base3(type)) {
        const int64_t qk = f.block_size;
        float *x = (float *)malloc((size_t)(rows * cols) * 4);
        for (int64_t b = 0; b < rows * cols / qk; b++) {
            const float d = (float)(1 + rnd64() % 3);
            for (int64_t j = 0; j < qk; j++) x[b * qk + j] = (float)((int)(rnd64() % 3) - 1) * d;
            x[b * qk + rnd64() % qk] = d; /* the block's absmax is d */
        }
        CHECK(lowbit_quantize(type, x, rows * cols, w) == LOWBIT_OK, "quantize");
        free(x);
    } else {
        for (int64_t b = 0; b < n / f.block_bytes; b++) {
            const uint16_t h = lowbit_fp32_to_fp16((float)(1 + rnd64() % 3));
            memcpy(w + b * f.block_bytes + f.scale_offset, &h, 2);
        }
    }
    *nbytes = n;
    return w;
}

/* y = W x for batch 1 and 3, threads 1 and 2: whether m gives exactly what ref gives */
static int same_products(const lowbit_matrix *m, const lowbit_matrix *ref, int64_t rows,
                         int64_t cols) {
    float *x = (float *)malloc((size_t)(3 * cols) * 4);
    float *y = (float *)malloc((size_t)(3 * rows) * 4), *yr = (float *)malloc((size_t)(3 * rows) * 4);
    for (int64_t i = 0; i < 3 * cols; i++) x[i] = (float)((int64_t)(rnd64() % 2001) - 1000) * 1e-3f;
    int same = 1;
    for (int threads = 1; threads <= 2; threads++)
        for (int64_t batch = 1; batch <= 3; batch += 2) {
            same &= lowbit_matrix_gemm(m, x, batch, y, threads) == LOWBIT_OK;
            same &= lowbit_matrix_gemm(ref, x, batch, yr, threads) == LOWBIT_OK;
            same &= memcmp(y, yr, (size_t)(batch * rows) * 4) == 0;
        }
    free(x), free(y), free(yr);
    return same;
}

static void test_round_trip(int type, int isa, int L, int64_t rows, int64_t cols, int canonical) {
    const char *name = lowbit_type_name(type);
    int64_t n, st64 = lowbit_matrix_packed_nbytes(type, rows, cols);
    uint8_t *w = random_file(type, rows, cols, canonical, &n);
    void *base, *base2;
    uint8_t *dst = aligned_bytes(st64 > 0 ? st64 : 1, &base);
    int st;
    lowbit_matrix *m = lowbit_matrix_pack_into(type, w, rows, cols, dst, st64, 2, &st);
    lowbit_matrix *own = lowbit_matrix_pack(type, w, rows, cols, 1, &st);
    CHECK(st64 > 0 && m && own && m->base3 == own->base3 && m->base3f == own->base3f &&
              m->rows16 == own->rows16 && m->rows64 == own->rows64 &&
              m->q8rows == own->q8rows && lowbit_matrix_nbytes(m) == 0,
          "%s %s %s %lldx%lld: pack_into", lowbit_isa_name(isa), name, LAYOUT_NAME[L],
          (long long)rows, (long long)cols);
    if (!m || !own) goto done;
    CHECK(L == CHOSEN || (L == CANONICAL && !m->base3 && !m->rows16) ||
              (L == ROWS16 && m->rows16) || (L == BASE3 && m->base3 && !m->base3f) ||
              (L == BASE3F && m->base3f) || (L == ROWS64 && m->rows64) ||
              (L == Q8ROWS && m->q8rows),
          "%s %s: layout %s not taken", lowbit_isa_name(isa), name, LAYOUT_NAME[L]);
    free(w); /* the borrowed matrix needs only dst */
    w = NULL;
    uint8_t *back = (uint8_t *)malloc((size_t)n), *again = (uint8_t *)malloc((size_t)n);
    uint8_t *file = (uint8_t *)malloc((size_t)n);
    CHECK(lowbit_matrix_unpack(own, file, n, 1) == LOWBIT_OK, "unpack owned");
    for (int threads = 1; threads <= 2; threads++) {
        memset(back, 0xA5, (size_t)n);
        CHECK(lowbit_matrix_unpack(m, back, n, threads) == LOWBIT_OK, "unpack");
        CHECK(memcmp(back, file, (size_t)n) == 0, "%s %s %s: borrowed and owned unpack differ",
              lowbit_isa_name(isa), name, LAYOUT_NAME[L]);
    }
    if (type != LOWBIT_TYPE_I2_S) { /* rows looked up: the same bytes, in the order asked */
        const int64_t rb = lowbit_row_bytes(type, cols), idx[3] = {rows - 1, 0, rows / 2};
        uint8_t *some = (uint8_t *)malloc((size_t)(3 * rb));
        CHECK(lowbit_matrix_unpack_rows(m, idx, 3, some) == LOWBIT_OK &&
                  !memcmp(some, file + idx[0] * rb, (size_t)rb) && !memcmp(some + rb, file, (size_t)rb) &&
                  !memcmp(some + 2 * rb, file + idx[2] * rb, (size_t)rb),
              "%s %s %s: unpack_rows", lowbit_isa_name(isa), name, LAYOUT_NAME[L]);
        const int64_t bad[1] = {rows};
        CHECK(lowbit_matrix_unpack_rows(m, bad, 1, some) == LOWBIT_EINVAL, "unpack_rows past the end");
        free(some);
    }
    /* the products of the borrowed matrix and of a wrap of a copy of its bytes */
    CHECK(same_products(m, own, rows, cols), "%s %s %s %lldx%lld: borrowed products differ",
          lowbit_isa_name(isa), name, LAYOUT_NAME[L], (long long)rows, (long long)cols);
    uint8_t *copy = aligned_bytes(st64, &base2);
    memcpy(copy, dst, (size_t)st64);
    lowbit_matrix *wm = lowbit_matrix_wrap(copy, st64, &st);
    CHECK(wm && st == LOWBIT_OK && same_products(wm, own, rows, cols), "%s %s %s: wrap",
          lowbit_isa_name(isa), name, LAYOUT_NAME[L]);
    if (wm) {
        CHECK(lowbit_matrix_unpack(wm, again, n, 2) == LOWBIT_OK && !memcmp(again, file, (size_t)n),
              "%s %s %s: unpack of a wrap", lowbit_isa_name(isa), name, LAYOUT_NAME[L]);
        CHECK(lowbit_matrix_type(wm) == type && lowbit_matrix_rows(wm) == rows &&
                  lowbit_matrix_cols(wm) == cols,
              "wrap shape");
    }
    lowbit_matrix_free(wm);
    free(base2);
    /* packing the unpacked bytes again gives the same bytes (the canonical form is a fixed point) */
    lowbit_matrix *m2 = lowbit_matrix_pack_into(type, file, rows, cols, dst, st64, 1, &st);
    CHECK(m2 && lowbit_matrix_unpack(m2, again, n, 1) == LOWBIT_OK && !memcmp(again, file, (size_t)n),
          "%s %s %s: unpack is not a fixed point", lowbit_isa_name(isa), name, LAYOUT_NAME[L]);
    lowbit_matrix_free(m2);
    free(back), free(again), free(file);
done:
    lowbit_matrix_free(m);
    lowbit_matrix_free(own);
    free(w);
    free(base);
}

/* The file bytes: unpack(pack_into(w)) == w byte for byte (canonical files), and the weights of
 * any file (dequantized, bit for bit) */
static void test_bytes(int type, int isa, int L, int64_t rows, int64_t cols, int canonical) {
    int64_t n;
    uint8_t *w = random_file(type, rows, cols, canonical, &n);
    const int64_t need = lowbit_matrix_packed_nbytes(type, rows, cols);
    void *base;
    uint8_t *dst = aligned_bytes(need, &base);
    int st;
    lowbit_matrix *m = lowbit_matrix_pack_into(type, w, rows, cols, dst, need, 1, &st);
    uint8_t *back = (uint8_t *)malloc((size_t)n);
    CHECK(m && lowbit_matrix_unpack(m, back, n, 2) == LOWBIT_OK, "pack_into / unpack %d", st);
    const int exact = canonical || !lowbit_type_base3(type);
    if (m && exact) {
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (back[i] != w[i]) bad = i;
        CHECK(bad < 0, "%s %s %s %lldx%lld: byte %lld of %lld differs", lowbit_isa_name(isa),
              lowbit_type_name(type), LAYOUT_NAME[L], (long long)rows, (long long)cols,
              (long long)bad, (long long)n);
    }
    if (m) {
        float *a = (float *)malloc((size_t)(rows * cols) * 4), *b = (float *)malloc((size_t)(rows * cols) * 4);
        CHECK(lowbit_dequantize(type, w, rows * cols, a) == LOWBIT_OK &&
                  lowbit_dequantize(type, back, rows * cols, b) == LOWBIT_OK &&
                  !memcmp(a, b, (size_t)(rows * cols) * 4),
              "%s %s %s %lldx%lld: other weights", lowbit_isa_name(isa), lowbit_type_name(type),
              LAYOUT_NAME[L], (long long)rows, (long long)cols);
        free(a), free(b);
    }
    lowbit_matrix_free(m);
    free(w), free(back), free(base);
}

static void test_errors(void) {
    int64_t n;
    const int64_t rows = 8, cols = 256;
    uint8_t *w = random_file(LOWBIT_TYPE_TQ2_0, rows, cols, 0, &n);
    set_layout(CANONICAL); /* the sizes below are the 2-bit row groups' */
    const int64_t need = lowbit_matrix_packed_nbytes(LOWBIT_TYPE_TQ2_0, rows, cols);
    void *base;
    uint8_t *dst = aligned_bytes(need + 64, &base);
    int st = 0;
    CHECK(need == 64 + 2 * 2 * 4 * 32 + 2 * 4 * 2 + 64, "packed_nbytes %lld", (long long)need);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, dst + 1, need, 1, &st) &&
              st == LOWBIT_EINVAL, "misaligned: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, dst + 32, need, 1, &st) &&
              st == LOWBIT_EINVAL, "32-byte aligned: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, dst, need - 1, 1, &st) &&
              st == LOWBIT_ESIZE, "too small: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, NULL, rows, cols, dst, need, 1, &st) &&
              st == LOWBIT_EINVAL, "null w: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, NULL, need, 1, &st) &&
              st == LOWBIT_EINVAL, "null dst: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, 0, cols, dst, need, 1, &st) &&
              st == LOWBIT_ESIZE, "no rows: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_Q8_0, w, rows, 32, dst, need, 1, &st) &&
              st == LOWBIT_ETYPE, "Q8_0: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, 100, dst, need, 1, &st) &&
              st == LOWBIT_ESIZE, "ragged rows: %d", st);
    lowbit_matrix *m = lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, dst, need, 1, NULL);
    CHECK(m != NULL, "status NULL");
    lowbit_matrix_free(m);
    CHECK(lowbit_matrix_packed_nbytes(LOWBIT_TYPE_Q8_0, rows, 32) == 0, "Q8_0 nbytes");
    set_layout(Q8ROWS); /* Q8_0 asked for: a set of 16 rows, 34 bytes a block, 64 + 64 around */
    CHECK(lowbit_matrix_packed_nbytes(LOWBIT_TYPE_Q8_0, rows, 32) == 64 + 16 * 34 + 64,
          "Q8_0 q8rows nbytes %lld", (long long)lowbit_matrix_packed_nbytes(LOWBIT_TYPE_Q8_0, rows, 32));
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_Q8_0, w, rows, 32, dst, 64 + 16 * 34 + 63, 1, &st) &&
              st == LOWBIT_ESIZE, "Q8_0 q8rows too small: %d", st);
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_Q8_0, w, 0, 32, dst, need, 1, &st) &&
              st == LOWBIT_ESIZE, "Q8_0 q8rows no rows: %d", st);
    set_layout(CANONICAL);
    CHECK(lowbit_matrix_packed_nbytes(LOWBIT_TYPE_TQ2_0, 0, cols) == 0, "empty nbytes");
    CHECK(lowbit_matrix_packed_nbytes(LOWBIT_TYPE_TQ2_0, rows, 100) == LOWBIT_ESIZE, "ragged nbytes");
    CHECK(lowbit_matrix_packed_nbytes(LOWBIT_TYPE_TQ2_0, -1, cols) == LOWBIT_EINVAL, "negative");
    CHECK(lowbit_matrix_packed_nbytes(9999, rows, cols) == LOWBIT_ETYPE, "unknown type");

    m = lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, dst, need, 1, &st);
    CHECK(m && st == LOWBIT_OK, "pack_into %d", st);
    uint8_t *back = (uint8_t *)malloc((size_t)n + 1);
    CHECK(lowbit_matrix_unpack(m, back, n + 1, 1) == LOWBIT_ESIZE, "unpack size");
    CHECK(lowbit_matrix_unpack(m, NULL, n, 1) == LOWBIT_EINVAL, "unpack null");
    CHECK(lowbit_matrix_unpack(NULL, back, n, 1) == LOWBIT_EINVAL, "unpack null matrix");
    lowbit_matrix_free(m); /* leaves dst alone: still readable, wrap reads it */
    CHECK(!lowbit_matrix_wrap(dst, need - 1, &st) && st == LOWBIT_ESIZE, "wrap short: %d", st);
    CHECK(!lowbit_matrix_wrap(dst, 63, &st) && st == LOWBIT_EINVAL, "wrap no header: %d", st);
    CHECK(!lowbit_matrix_wrap(dst + 64, need - 64, &st) && st == LOWBIT_EINVAL, "wrap codes: %d", st);
    CHECK(!lowbit_matrix_wrap(NULL, need, &st) && st == LOWBIT_EINVAL, "wrap null: %d", st);
    memmove(dst + 64, dst, (size_t)need);
    lowbit_matrix *moved = lowbit_matrix_wrap(dst + 64, need, &st);
    CHECK(moved && st == LOWBIT_OK, "wrap moved by 64 bytes: %d", st);
    lowbit_matrix_free(moved);
    memmove(dst + 1, dst + 64, (size_t)need);
    CHECK(!lowbit_matrix_wrap(dst + 1, need, &st) && st == LOWBIT_EINVAL, "wrap misaligned: %d", st);
    /* a header of another shape, type or layout than the bytes hold: refused */
    memmove(dst, dst + 1, (size_t)need);
    int64_t rows_big = (int64_t)1 << 40;
    memcpy(dst + 16, &rows_big, 8);
    CHECK(!lowbit_matrix_wrap(dst, need, &st) && st == LOWBIT_EINVAL, "wrap huge rows: %d", st);
    memcpy(dst + 16, &rows, 8);
    const int32_t base3 = LOWBIT_LAYOUT_BASE3, q8 = LOWBIT_TYPE_Q8_0;
    memcpy(dst + 12, &base3, 4);
    CHECK(!lowbit_matrix_wrap(dst, need, &st) && st == LOWBIT_EINVAL, "wrap base-3 TQ2_0: %d", st);
    memcpy(dst + 8, &q8, 4);
    CHECK(!lowbit_matrix_wrap(dst, need, &st) && st == LOWBIT_EINVAL, "wrap Q8_0: %d", st);
    /* Q1_0 only in rows64, and not repacked at all where that is off */
    set_layout(ROWS64);
    const int64_t need1 = lowbit_matrix_packed_nbytes(LOWBIT_TYPE_Q1_0, rows, cols);
    CHECK(need1 == 64 + 16 * 2 * 64 + 2 * 64 * 2 + 64, "Q1_0 packed_nbytes %lld", (long long)need1);
    uint8_t *w1 = random_file(LOWBIT_TYPE_Q1_0, rows, cols, 0, &n);
    void *base1;
    uint8_t *dst1 = aligned_bytes(need1, &base1);
    m = lowbit_matrix_pack_into(LOWBIT_TYPE_Q1_0, w1, rows, cols, dst1, need1, 1, &st);
    CHECK(m && st == LOWBIT_OK && m->rows64, "Q1_0 pack_into %d", st);
    lowbit_matrix_free(m);
    const int32_t packed = LOWBIT_LAYOUT_PACKED, rows64 = LOWBIT_LAYOUT_ROWS64, tq2 = LOWBIT_TYPE_TQ2_0;
    memcpy(dst1 + 12, &packed, 4);
    CHECK(!lowbit_matrix_wrap(dst1, need1, &st) && st == LOWBIT_EINVAL, "wrap packed Q1_0: %d", st);
    memcpy(dst1 + 12, &rows64, 4);
    memcpy(dst1 + 8, &tq2, 4);
    CHECK(!lowbit_matrix_wrap(dst1, need1, &st) && st == LOWBIT_EINVAL, "wrap rows64 TQ2_0: %d", st);
    set_layout(CANONICAL);
    CHECK(lowbit_matrix_packed_nbytes(LOWBIT_TYPE_Q1_0, rows, cols) == 0, "Q1_0 unpacked nbytes");
    CHECK(!lowbit_matrix_pack_into(LOWBIT_TYPE_Q1_0, w1, rows, cols, dst1, need1, 1, &st) &&
              st == LOWBIT_ETYPE, "Q1_0 unpacked: %d", st);
    m = lowbit_matrix_pack(LOWBIT_TYPE_Q1_0, w1, rows, cols, 1, &st);
    CHECK(m && st == LOWBIT_OK && !lowbit_matrix_is_packed(m), "Q1_0 borrowed: %d", st);
    lowbit_matrix_free(m);
    free(w1), free(base1);
    free(back), free(w), free(base);
    set_layout(CHOSEN);
}

/* Buffers of every size class (below the slabs' 64 KB, in a slab, larger than a slab) stay
 * aligned and apart, keep what was written while the others come and go, and take a matrix. */
static void test_weights_alloc(void) {
    static const size_t SIZES[] = {1, 100, 65535, 65536, (size_t)3 << 20, (size_t)300 << 20};
    enum { N = sizeof SIZES / sizeof SIZES[0] };
    uint8_t *p[N];
    CHECK(lowbit_weights_alloc(0) == NULL, "0 bytes");
    lowbit_weights_free(NULL, 10); /* a no-op */
    for (int i = 0; i < N; i++) {
        p[i] = (uint8_t *)lowbit_weights_alloc(SIZES[i]);
        CHECK(p[i] && (uintptr_t)p[i] % LOWBIT_PACKED_ALIGN == 0, "%zu bytes: %p", SIZES[i], (void *)p[i]);
        if (p[i]) memset(p[i], 0x40 + i, SIZES[i]);
    }
    for (int i = 0; i < N; i += 2) lowbit_weights_free(p[i], SIZES[i]), p[i] = NULL;
    for (int i = 1; i < N; i += 2) {
        int kept = p[i] != NULL;
        for (size_t j = 0; kept && j < SIZES[i]; j += 4093) kept = p[i][j] == 0x40 + i;
        CHECK(kept && p[i][SIZES[i] - 1] == 0x40 + i, "%zu bytes kept", SIZES[i]);
        lowbit_weights_free(p[i], SIZES[i]);
    }
    int64_t n;
    const int64_t rows = 64, cols = 4096, need = lowbit_matrix_packed_nbytes(LOWBIT_TYPE_TQ2_0, rows, cols);
    uint8_t *w = random_file(LOWBIT_TYPE_TQ2_0, rows, cols, 0, &n);
    void *dst = lowbit_weights_alloc((size_t)need);
    int st;
    lowbit_matrix *m = lowbit_matrix_pack_into(LOWBIT_TYPE_TQ2_0, w, rows, cols, dst, need, 1, &st);
    lowbit_matrix *own = lowbit_matrix_pack(LOWBIT_TYPE_TQ2_0, w, rows, cols, 1, &st);
    CHECK(m && own && same_products(m, own, rows, cols), "pack_into weights memory");
    lowbit_matrix_free(m), lowbit_matrix_free(own);
    lowbit_weights_free(dst, (size_t)need);
    free(w);
}

int main(void) {
    g_rng = 2027;
    printf("liblowbit %s; pack_into / wrap / unpack\n", lowbit_version());
    test_errors();
    test_weights_alloc();
    static const int ROWS[] = {1, 3, 5, 17, 33};
    const unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    for (int isa = 0; isa < LOWBIT_ISA_COUNT; isa++) {
        if (!(usable & (1u << isa))) continue;
        lowbit_set_isa(isa);
        printf("%s\n", lowbit_isa_name(isa));
        for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
            const int type = TYPES[t];
            const int64_t bs = lowbit_type_block_size(type);
            for (int L = 0; L < N_LAYOUTS; L++) {
                if (L != CHOSEN && !has_layout(type, L)) continue;
                set_layout(L);
                if (!lowbit_matrix_packed_nbytes(type, 1, bs)) continue; /* Q1_0, Q8_0: not repacked here */
                for (int k = 1; k <= 11; k += 2) {
                    const int64_t rows = ROWS[k % 5], cols = k * bs;
                    test_round_trip(type, isa, L, rows, cols, 0);
                    test_bytes(type, isa, L, rows, cols, 1);
                    if (lowbit_type_base3(type)) test_bytes(type, isa, L, rows, cols, 0);
                }
                if (type == LOWBIT_TYPE_Q1_0) /* whole and cut 64-row tiles */
                    for (int64_t rows = 64; rows <= 130; rows += 66) {
                        test_round_trip(type, isa, L, rows, 3 * bs, 0);
                        test_bytes(type, isa, L, rows, 3 * bs, 1);
                    }
            }
        }
    }
    set_layout(CHOSEN);
    return report();
}
