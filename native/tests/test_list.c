/* C test runner: every entry of the kernel list against the scalar reference, one test per kernel,
 * named by it ("kernel packed_gemv256_avx2: 12 cases").  The list drives the cases: an entry added
 * to native/src/kernel_list.inc is tested here without an edit, and one removed drops out.
 *
 * lowbit_kernel_prefer(i) makes entry i win wherever it fits, so kernels this CPU would not pick
 * (a vendor twin, a general kernel listed after a specialised one) run too; a case counts for the
 * entry only if lowbit_kernel_selected says the entry runs it, and every entry of a usable variant
 * must be reached by at least one case.
 *
 *   - weight kernels: exact mode (unit weight scales, integer activations with d = 1 or 2: every
 *     float is an integer below 2^24), bit-identical to the scalar file-layout GEMM, or for the
 *     scalar entries to a double dot product of the dequantized weights;
 *   - the quantizer: codes, scales and sums bit-identical to the scalar variant's, every rule;
 *   - float GEMV: bit-identical to scalar (scalar entries: within summation rounding);
 *   - the read probe: the sum of the 64-bit words;
 *   - the FWHT tables: lowbit_fwht_f32 / _f64 bit-identical to the scalar variant's, every block
 *     kind (powers of two in and out of cache, m * 2^k), both sign orders, and bad signs refused;
 *   - the decoder ops (role OP): the public op (lowbit/ops.h) bit-identical to the scalar
 *     variant's, outputs and updated states, on shapes with and without a SIMD tail.
 * Prints "N passed, N failed" last; exit status 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* fp16 helpers (static inline) and lowbit.h */
#include "lowbit/ops.h"

#include "harness.h"

static const int PACKABLE[] = {LOWBIT_TYPE_TQ1_0, LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_I2_S,
                               LOWBIT_TYPE_Q2_0,  LOWBIT_TYPE_PQ2_0, LOWBIT_TYPE_PTQ1_0};
#define NPACKABLE ((int)(sizeof PACKABLE / sizeof PACKABLE[0]))

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

/* Random code bytes with every block scale 1 (and Q4_K's dmin 1, I2_S's tensor scale 1). */
static uint8_t *unit_weights(int type, int64_t rows, int64_t cols) {
    lowbit_type_facts f;
    lowbit_type_facts_get(type, &f);
    const int64_t bytes = lowbit_tensor_bytes(type, rows * cols);
    uint8_t *w = (uint8_t *)xmalloc((size_t)bytes);
    for (int64_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd64();
    const uint16_t one = lowbit_fp32_to_fp16(1.0f);
    for (int64_t b = 0; b < rows * cols / f.block_size; b++) {
        if (f.scale_offset >= 0) memcpy(w + b * f.block_bytes + f.scale_offset, &one, 2);
        if (f.scale2_offset >= 0) memcpy(w + b * f.block_bytes + f.scale2_offset, &one, 2);
    }
    if (type == LOWBIT_TYPE_I2_S) {
        const float d = 1.0f;
        memcpy(w + rows * lowbit_row_bytes(type, cols), &d, 4);
    }
    return w;
}

/* batch integer activation vectors of the type's group; d[g] = 1, or 1 and 2 alternating. */
typedef struct {
    lowbit_act a[9]; /* up to batch 9: every column tail of a 4-column kernel, twice */
    int8_t *q;
    float *d;
    int32_t *s;
} acts;

static void make_acts(acts *A, int type, int64_t cols, int64_t batch, int mixed_scales) {
    const int64_t G = lowbit_act_group(type), ng = cols / G;
    A->q = (int8_t *)xmalloc((size_t)(batch * cols));
    A->d = (float *)xmalloc((size_t)(batch * ng) * sizeof(float));
    A->s = (int32_t *)xmalloc((size_t)(batch * ng) * sizeof(int32_t));
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t g = 0; g < ng; g++) {
            int32_t sum = 0;
            for (int64_t j = 0; j < G; j++) {
                const int8_t v = (int8_t)((int)(rnd64() % 255) - 127);
                A->q[b * cols + g * G + j] = v;
                sum += v;
            }
            A->s[b * ng + g] = sum;
            A->d[b * ng + g] = mixed_scales && (g & 1) ? 2.0f : 1.0f;
        }
        A->a[b] = (lowbit_act){A->q + b * cols, A->d + b * ng, A->s + b * ng, cols, G};
    }
}

static void free_acts(acts *A) {
    free(A->q);
    free(A->d);
    free(A->s);
}

/* y[b * rows + r] = the double dot of dequantized row r with activation b, mag its sum of |terms| */
static void oracle(int type, const uint8_t *w, int64_t rows, int64_t cols, const acts *A,
                   int64_t batch, double *y, double *mag) {
    float *wf = (float *)xmalloc((size_t)(rows * cols) * sizeof(float));
    lowbit_dequantize(type, w, rows * cols, wf);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t r = 0; r < rows; r++) {
            double s = 0, m = 0;
            for (int64_t j = 0; j < cols; j++) {
                const double t = (double)wf[r * cols + j] * A->a[b].q[j] * A->a[b].d[j / A->a[b].group];
                s += t;
                m += fabs(t);
            }
            y[b * rows + r] = s;
            mag[b * rows + r] = m;
        }
    free(wf);
}

static void set_isa(int isa) {
    if (lowbit_set_isa(isa) != LOWBIT_OK) {
        printf("FATAL: lowbit_set_isa(%s) refused a usable variant\n", lowbit_isa_name(isa));
        exit(2);
    }
}

/* One weight case of entry i: 1 if the entry runs it (and it was checked), else 0. */
static int weight_case(int i, const lowbit_kernel_info *k, int type, int64_t rows, int64_t cols,
                       int64_t batch, int mixed) {
    if (lowbit_kernel_selected(k->isa, type, k->layout, k->role, cols) != i) return 0;
    uint8_t *w = unit_weights(type, rows, cols);
    acts A;
    make_acts(&A, type, cols, batch, mixed);
    const int64_t n = batch * rows;
    float *y = (float *)xmalloc((size_t)n * sizeof(float));
    float *ref = (float *)xmalloc((size_t)n * sizeof(float));
    double *exact = (double *)xmalloc((size_t)n * sizeof(double));
    double *mag = (double *)xmalloc((size_t)n * sizeof(double));
    set_isa(k->isa);
    int st;
    if (k->layout == LOWBIT_LAYOUT_PACKED || k->layout == LOWBIT_LAYOUT_BASE3 ||
        k->layout == LOWBIT_LAYOUT_ROWS16 || k->layout == LOWBIT_LAYOUT_BASE3F ||
        k->layout == LOWBIT_LAYOUT_ROWS64 ||
        k->layout == LOWBIT_LAYOUT_Q8ROWS) {
        /* the entry's layout, not the one the variant would pick */
        set_env("PYLOWBIT_BASE3", k->layout == LOWBIT_LAYOUT_BASE3 ? "1" : "0");
        set_env("PYLOWBIT_BASE3F", k->layout == LOWBIT_LAYOUT_BASE3F ? "1" : "0");
        set_env("PYLOWBIT_ROWS16", k->layout == LOWBIT_LAYOUT_ROWS16 ? "1" : "0");
        set_env("PYLOWBIT_ROWS64", k->layout == LOWBIT_LAYOUT_ROWS64 ? "1" : "0");
        set_env("PYLOWBIT_Q8ROWS", k->layout == LOWBIT_LAYOUT_Q8ROWS ? "1" : "0");
        lowbit_matrix *m = lowbit_matrix_pack(type, w, rows, cols, 1, &st);
        set_env("PYLOWBIT_BASE3", NULL);
        set_env("PYLOWBIT_BASE3F", NULL);
        set_env("PYLOWBIT_ROWS16", NULL);
        set_env("PYLOWBIT_Q8ROWS", NULL);
        set_env("PYLOWBIT_ROWS64", NULL);
        CHECK(m && st == LOWBIT_OK && lowbit_matrix_is_packed(m), "%s: pack %s r=%lld c=%lld",
              k->name, lowbit_type_name(type), (long long)rows, (long long)cols);
        st = m ? lowbit_matrix_gemm_act(m, A.a, batch, y, 2) : -1;
        lowbit_matrix_free(m);
    } else {
        st = lowbit_gemm_act(type, w, rows, cols, A.a, batch, y, 2);
    }
    int same = st == LOWBIT_OK;
    if (k->isa != LOWBIT_ISA_SCALAR) {
        set_isa(LOWBIT_ISA_SCALAR);
        same = same && lowbit_gemm_act(type, w, rows, cols, A.a, batch, ref, 1) == LOWBIT_OK &&
               memcmp(y, ref, (size_t)n * sizeof(float)) == 0;
    } else {
        oracle(type, w, rows, cols, &A, batch, exact, mag);
        for (int64_t j = 0; same && j < n; j++) same = fabs(y[j] - exact[j]) <= 1e-6 * mag[j];
    }
    CHECK(same, "%s: %s r=%lld c=%lld batch=%lld mixed=%d differs from the reference (st=%d)",
          k->name, lowbit_type_name(type), (long long)rows, (long long)cols, (long long)batch,
          mixed, st);
    free(w), free(y), free(ref), free(exact), free(mag);
    free_acts(&A);
    return 1;
}

static int weight_cases(int i, const lowbit_kernel_info *k) {
    const int64_t batch = k->role == LOWBIT_ROLE_GEMM ? 5 : 1;
    const int64_t rows = k->role == LOWBIT_ROLE_PAIR_GEMV ? 200 : 67; /* pairs: > 2 row tiles */
    int n = 0;
    for (int t = 0; t < (k->type >= 0 ? 1 : NPACKABLE); t++) {
        const int type = k->type >= 0 ? k->type : PACKABLE[t];
        const int64_t bs = lowbit_type_block_size(type), G = lowbit_act_group(type);
        const int64_t unit = bs > G ? bs : G;
        for (int64_t c = 1; c <= 5; c++)
            for (int mixed = 0; mixed < 2; mixed++) n += weight_case(i, k, type, rows, c * unit, batch, mixed);
        n += weight_case(i, k, type, rows, 2560 / unit * unit, batch, 0);
        static const int64_t TILE_ROWS[] = {1, 16, 63, 64, 65, 128}; /* rows64: under a tile, whole */
        for (int j = 0; k->layout == LOWBIT_LAYOUT_ROWS64 && j < 6; j++)
            n += weight_case(i, k, type, TILE_ROWS[j], 3 * unit, batch, 1);
        if (k->layout == LOWBIT_LAYOUT_Q8ROWS) /* a set's tails: 1 row, a set and one row */
            for (int64_t r = 1; r <= 17; r += 16) n += weight_case(i, k, type, r, 3 * unit, batch, 1);
        /* rows64 GEMMs: every column tail (batch 1..9) on rows under, at and over a tile */
        for (int64_t bt = 1; k->layout == LOWBIT_LAYOUT_ROWS64 && k->role == LOWBIT_ROLE_GEMM && bt <= 9; bt++)
            for (int64_t r = 63; r <= 65; r++) n += weight_case(i, k, type, r, 2 * unit, bt, 1);
    }
    return n;
}

static int quantize_cases(int i, const lowbit_kernel_info *k) {
    if (lowbit_kernel_selected(k->isa, -1, k->layout, k->role, 0) != i) return 0;
    static const int TYPES[] = {LOWBIT_TYPE_TQ2_0, LOWBIT_TYPE_PQ2_0, LOWBIT_TYPE_Q8_0,
                                LOWBIT_TYPE_I2_S};
    static const int64_t GROUPS[] = {32, 64, 128, 256};
    const int64_t n = 2560;
    float *x = (float *)xmalloc((size_t)n * sizeof(float));
    int8_t *q[2] = {(int8_t *)xmalloc((size_t)n), (int8_t *)xmalloc((size_t)n)};
    float *d[2] = {(float *)xmalloc((size_t)n * 4), (float *)xmalloc((size_t)n * 4)};
    int32_t *s[2] = {(int32_t *)xmalloc((size_t)n * 4), (int32_t *)xmalloc((size_t)n * 4)};
    int cases = 0;
    for (int c = 0; c < 8; c++) {
        for (int64_t j = 0; j < n; j++)
            x[j] = ldexpf((float)(int64_t)(rnd64() % 2001) - 1000.0f, -(int)(rnd64() % 12));
        for (int v = 0; v < 2; v++) {
            set_isa(v ? k->isa : LOWBIT_ISA_SCALAR);
            if (c < 4)
                lowbit_quantize_act(x, n, GROUPS[c], q[v], d[v], s[v]);
            else
                lowbit_quantize_act_for(TYPES[c - 4], x, n, q[v], d[v], s[v]);
        }
        const int64_t ng = n / (c < 4 ? GROUPS[c] : lowbit_act_group(TYPES[c - 4]));
        CHECK(memcmp(q[0], q[1], (size_t)n) == 0 && memcmp(d[0], d[1], (size_t)ng * 4) == 0 &&
                  memcmp(s[0], s[1], (size_t)ng * 4) == 0,
              "%s: case %d differs from the scalar quantizer", k->name, c);
        cases++;
    }
    free(x);
    for (int v = 0; v < 2; v++) free(q[v]), free(d[v]), free(s[v]);
    return cases;
}

static int float_cases(int i, const lowbit_kernel_info *k) {
    if (lowbit_kernel_selected(k->isa, k->type, k->layout, k->role, 0) != i) return 0;
    int cases = 0;
    for (int64_t cols = 1; cols <= 300; cols += 37) {
        const int64_t rows = 9, n = rows * cols;
        const int wide = k->type == LOWBIT_TYPE_F32;
        void *w = xmalloc((size_t)n * 4);
        float *x = (float *)xmalloc((size_t)cols * 4), y[2][9];
        double want[9] = {0}, mag[9] = {0};
        for (int64_t j = 0; j < n; j++) {
            const float v = (float)(int64_t)(rnd64() % 2001) / 1000.0f - 1.0f;
            if (wide)
                ((float *)w)[j] = v;
            else
                ((uint16_t *)w)[j] = k->type == LOWBIT_TYPE_F16 ? lowbit_fp32_to_fp16(v) : lowbit_fp32_to_bf16(v);
        }
        for (int64_t j = 0; j < cols; j++) x[j] = (float)(int64_t)(rnd64() % 2001) / 500.0f - 2.0f;
        for (int v = 0; v < 2; v++) {
            set_isa(v ? k->isa : LOWBIT_ISA_SCALAR);
            CHECK(lowbit_gemv(k->type, w, rows, cols, x, y[v], 1) == LOWBIT_OK, "%s: gemv", k->name);
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) {
                const int64_t e = r * cols + j;
                const float wv = wide ? ((float *)w)[e]
                               : k->type == LOWBIT_TYPE_F16 ? lowbit_fp16_to_fp32(((uint16_t *)w)[e])
                                                            : lowbit_bf16_to_fp32(((uint16_t *)w)[e]);
                want[r] += (double)wv * x[j];
                mag[r] += fabs((double)wv * x[j]);
            }
        int ok = memcmp(y[0], y[1], sizeof y[0]) == 0;
        for (int64_t r = 0; r < rows; r++) ok = ok && fabs(y[1][r] - want[r]) <= 1e-6 * mag[r] + 1e-30;
        CHECK(ok, "%s: cols=%lld differs from scalar or from the exact sum", k->name, (long long)cols);
        free(w), free(x);
        cases++;
    }
    return cases;
}

static int read_cases(int i, const lowbit_kernel_info *k) {
    if (lowbit_kernel_selected(k->isa, -1, k->layout, k->role, 0) != i) return 0;
    const int64_t words = (1 << 18) + 8; /* 2 MB + 64 bytes: a partial last 128 bytes */
    uint64_t *buf = (uint64_t *)xmalloc((size_t)words * 8), want = 0;
    for (int64_t j = 0; j < words; j++) want += buf[j] = rnd64();
    set_isa(k->isa);
    CHECK(lowbit_stream_read(buf, words * 8, 1) == want, "%s: the read sum is wrong", k->name);
    free(buf);
    return 1;
}

/* lowbit_fwht_f32 or _f64 (wide) of `rows` vectors of n under `isa` into y (a copy of x). */
static int run_fwht(int isa, int wide, const double *x, int64_t rows, int64_t n, int64_t block,
                    int normalize, const double *signs, int order, void *y) {
    set_isa(isa);
    const int64_t total = rows * n;
    if (wide) {
        memcpy(y, x, (size_t)total * sizeof(double));
        return lowbit_fwht_f64((double *)y, rows, n, block, normalize, signs, order, 1);
    }
    float *yf = (float *)y, *sf = signs ? (float *)xmalloc((size_t)n * sizeof(float)) : NULL;
    for (int64_t j = 0; j < total; j++) yf[j] = (float)x[j];
    for (int64_t j = 0; sf && j < n; j++) sf[j] = (float)signs[j];
    const int st = lowbit_fwht_f32(yf, rows, n, block, normalize, sf, order, 1);
    free(sf);
    return st;
}

static int fwht_cases(int i, const lowbit_kernel_info *k) {
    if (lowbit_kernel_selected(k->isa, -1, k->layout, k->role, 0) != i) return 0;
    /* in-register, in-cache and beyond-cache powers of two, and each m * 2^k kind */
    static const int64_t BLOCKS[] = {2, 8, 64, 1024, 1 << 15, 12, 12 * 64, 20 * 16, 28 * 256};
    int cases = 0;
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++)
        for (int variant = 0; variant < 16; variant++) {
            const int wide = variant & 1, order = variant >> 1 & 1, normalize = variant >> 2 & 1;
            const int64_t block = BLOCKS[b], n = block <= 1024 ? 2 * block : block, rows = 3;
            double *x = (double *)xmalloc((size_t)(rows * n) * sizeof(double));
            double *signs = (double *)xmalloc((size_t)n * sizeof(double));
            void *y[2] = {xmalloc((size_t)(rows * n) * 8), xmalloc((size_t)(rows * n) * 8)};
            for (int64_t j = 0; j < rows * n; j++) x[j] = (double)(int64_t)(rnd64() % 20001) / 1e4 - 1;
            for (int64_t j = 0; j < n; j++) signs[j] = rnd64() & 1 ? 1.0 : -1.0;
            int st[2];
            for (int v = 0; v < 2; v++)
                st[v] = run_fwht(v ? k->isa : LOWBIT_ISA_SCALAR, wide, x, rows, n, block, normalize,
                                 variant & 8 ? signs : NULL, order, y[v]);
            const size_t bytes = (size_t)(rows * n) * (wide ? 8 : 4);
            CHECK(st[0] == LOWBIT_OK && st[1] == LOWBIT_OK && memcmp(y[0], y[1], bytes) == 0,
                  "%s: block=%lld wide=%d order=%d normalize=%d signs=%d differs from scalar", k->name,
                  (long long)block, wide, order, normalize, variant >> 3);
            signs[n - 1] = 0.5; /* one bad sign, last: past every vector of a SIMD check */
            for (int v = 0; v < 2; v++)
                st[v] = run_fwht(v ? k->isa : LOWBIT_ISA_SCALAR, wide, x, rows, n, block, normalize,
                                 signs, order, y[v]);
            CHECK(st[0] != LOWBIT_OK && st[1] == st[0], "%s: a sign of 0.5 accepted (%d, %d)",
                  k->name, st[0], st[1]);
            free(x), free(signs), free(y[0]), free(y[1]);
            cases++;
        }
    return cases;
}

/* n floats uniform in [lo, hi) on a grid of 1e-4 of the range */
static float *rnd_floats(int64_t n, float lo, float hi) {
    float *x = (float *)xmalloc((size_t)n * sizeof(float));
    for (int64_t j = 0; j < n; j++) x[j] = lo + (hi - lo) * (float)(rnd64() % 10000) / 10000.0f;
    return x;
}

static float *copy_floats(const float *x, int64_t n) {
    float *y = (float *)xmalloc((size_t)n * sizeof(float));
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}

/* One case of a decoder op: shape s of op `op` run under `isa`, its outputs and states into out
 * (fresh buffers, so two runs compare); 0 if there is no shape s, else the number of floats. */
static int64_t run_op_inputs(int op, int s, int isa, float **out) {
    set_isa(isa);
    int64_t n = 0;
    int st = LOWBIT_OK;
    if (op == LOWBIT_OP_ATTENTION) {
        static const int64_t SH[][8] = {/* T, H, Hkv, hd, vd, ctx, pos, window */
                                        {1, 4, 2, 64, 64, 40, 30, 0},  {5, 2, 1, 20, 12, 16, 3, 0},
                                        {3, 2, 2, 8, 8, 32, 20, 7},    {1, 8, 1, 256, 128, 600, 599, 0},
                                        {9, 6, 3, 36, 36, 64, 40, 16}, {3, 8, 2, 64, 32, 50, 40, 0},
                                        {2, 6, 2, 48, 80, 70, 33, 9},  {1, 3, 3, 16, 16, 20, 17, 0},
                                        {4, 12, 2, 128, 128, 90, 70, 0}};
        if (s >= (int)(sizeof SH / sizeof SH[0])) return 0;
        const int64_t *z = SH[s], T = z[0], H = z[1], Hkv = z[2], hd = z[3], vd = z[4], ctx = z[5];
        float *q = rnd_floats(T * H * hd, -1, 1), *k = rnd_floats(T * Hkv * hd, -1, 1);
        float *v = rnd_floats(T * Hkv * vd, -1, 1);
        float *kc = rnd_floats(Hkv * ctx * hd, -1, 1), *vc = rnd_floats(Hkv * ctx * vd, -1, 1);
        n = T * H * vd;
        *out = (float *)xmalloc((size_t)n * sizeof(float));
        st = lowbit_attention(q, k, v, T, H, Hkv, hd, vd, kc, vc, ctx, z[6], z[7],
                              1.0f / sqrtf((float)hd), *out);
        free(q), free(k), free(v), free(kc), free(vc);
    } else if (op == LOWBIT_OP_SILU_MUL || op == LOWBIT_OP_GELU_MUL) {
        static const int64_t NS[] = {0, 1, 7, 8, 9, 33, 1000};
        if (s >= (int)(sizeof NS / sizeof NS[0])) return 0;
        n = NS[s];
        float *g = rnd_floats(n, -100, 100), *u = rnd_floats(n, -2, 2); /* past exp's clamp too */
        *out = (float *)xmalloc((size_t)(n ? n : 1) * sizeof(float));
        st = lowbit_act_mul(op == LOWBIT_OP_SILU_MUL ? LOWBIT_ACT_SILU : LOWBIT_ACT_GELU_TANH, g, u, n,
                            *out);
        free(g), free(u);
    } else if (op == LOWBIT_OP_GDN) {
        static const int64_t DS[] = {16, 128, 12, 36}; /* d: SIMD rows, and a scalar fallback */
        if (s >= 2 * (int)(sizeof DS / sizeof DS[0])) return 0;
        const int64_t d = DS[s / 2], T = 3 + 70 * (s & 1), Hk = 2, Hv = 4, C = 37, K = 4;
        const int chunked = s & 1;
        float *x = rnd_floats(T * C, -2, 2), *w = rnd_floats(C * K, -1, 1);
        float *cstate = rnd_floats(C * (K - 1), -1, 1);
        float *q = rnd_floats(T * Hk * d, -0.3f, 0.3f), *k = rnd_floats(T * Hk * d, -0.3f, 0.3f);
        float *v = rnd_floats(T * Hv * d, -1, 1), *g = rnd_floats(T * Hv, -1, 0);
        float *beta = rnd_floats(T * Hv, 0, 1), *state = rnd_floats(Hv * d * d, -0.5f, 0.5f);
        float *z = rnd_floats(T * Hv * d, -4, 4), *nw = rnd_floats(d, 0.5f, 1.5f);
        const int64_t parts[] = {T * C, C * (K - 1), T * Hk * d, T * Hv * d, Hv * d * d, T * Hv * d,
                                 T * Hv * d};
        for (size_t j = 0; j < sizeof parts / sizeof parts[0]; j++) n += parts[j];
        float *o = *out = (float *)xmalloc((size_t)n * sizeof(float));
        st |= lowbit_ssm_conv(x, w, cstate, T, C, K, o);
        memcpy(o += T * C, cstate, (size_t)(C * (K - 1)) * sizeof(float));
        st |= lowbit_l2_norm(q, T * Hk, d, 1e-6f, o += C * (K - 1));
        st |= lowbit_gated_delta_rule(q, k, v, g, beta, state, T, Hk, Hv, d, o += T * Hk * d, 1,
                                      chunked);
        memcpy(o += T * Hv * d, state, (size_t)(Hv * d * d) * sizeof(float));
        st |= lowbit_gated_rms_norm_silu(v, nw, z, T * Hv, d, 1e-6f, o += Hv * d * d);
        st |= lowbit_sigmoid_mul(v, z, T * Hv * d, o += T * Hv * d);
        free(x), free(w), free(cstate), free(q), free(k), free(v), free(g), free(beta), free(state);
        free(z), free(nw);
    } else if (op == LOWBIT_OP_RMS_NORM) {
        static const int64_t SH[][4] = {/* rows, n, with w, in place */
                                        {1, 1, 1, 0},    {3, 7, 1, 0},    {2, 8, 0, 0}, {1, 9, 1, 1},
                                        {4, 33, 1, 0},   {1, 1000, 0, 1}, {2, 2560, 1, 1},
                                        {1, 6912, 1, 0}};
        if (s >= (int)(sizeof SH / sizeof SH[0])) return 0;
        const int64_t rows = SH[s][0], len = SH[s][1];
        float *x = rnd_floats(rows * len, -3, 3), *w = SH[s][2] ? rnd_floats(len, 0.5f, 1.5f) : NULL;
        n = rows * len;
        *out = SH[s][3] ? copy_floats(x, n) : (float *)xmalloc((size_t)n * sizeof(float));
        st = lowbit_rms_norm(SH[s][3] ? *out : x, w, rows, len, 1e-5f, *out);
        free(x), free(w);
    } else {
        return 0;
    }
    CHECK(st == LOWBIT_OK, "op %s shape %d under %s: status %d", lowbit_op_name(op), s,
          lowbit_isa_name(isa), st);
    return n + 1; /* an empty output is a case too */
}

static int64_t run_op(int op, int s, int isa, uint64_t seed, float **out) {
    const uint64_t saved = g_rng;
    g_rng = seed; /* both runs see the same inputs */
    const int64_t n = run_op_inputs(op, s, isa, out);
    g_rng = saved;
    return n;
}

static int op_cases(int i, const lowbit_kernel_info *k) {
    if (lowbit_kernel_selected(k->isa, k->type, k->layout, k->role, 0) != i) return 0;
    int cases = 0;
    for (int s = 0;; s++) {
        const uint64_t seed = rnd64() | 1;
        float *y[2] = {NULL, NULL};
        const int64_t n = run_op(k->type, s, LOWBIT_ISA_SCALAR, seed, &y[0]);
        if (!n) break;
        CHECK(run_op(k->type, s, k->isa, seed, &y[1]) == n &&
                  memcmp(y[0], y[1], (size_t)(n - 1) * sizeof(float)) == 0,
              "%s: shape %d differs from the scalar variant", k->name, s);
        free(y[0]), free(y[1]);
        cases++;
    }
    return cases;
}

int main(void) {
    const char *seed = getenv("LOWBIT_TEST_SEED");
    g_rng = seed ? strtoull(seed, NULL, 10) | 1 : 1;
    const int saved = lowbit_isa_active();
    const unsigned usable = lowbit_isa_compiled() & lowbit_isa_supported();
    const int n = lowbit_kernel_count();
    CHECK(n > 0, "the kernel list is empty");
    for (int i = 0; i < n; i++) {
        lowbit_kernel_info k;
        CHECK(lowbit_kernel_get(i, &k) == LOWBIT_OK, "entry %d", i);
        if (!(usable & (1u << k.isa))) {
            printf("kernel %s: not usable here (%s)\n", k.name, lowbit_isa_name(k.isa));
            continue;
        }
        CHECK(lowbit_kernel_prefer(i) == LOWBIT_OK, "prefer %s", k.name);
        int cases = 0;
        switch (k.role) {
        case LOWBIT_ROLE_QUANTIZE: cases = quantize_cases(i, &k); break;
        case LOWBIT_ROLE_FLOAT_GEMV: cases = float_cases(i, &k); break;
        case LOWBIT_ROLE_READ: cases = read_cases(i, &k); break;
        case LOWBIT_ROLE_FWHT: cases = fwht_cases(i, &k); break;
        case LOWBIT_ROLE_OP: cases = op_cases(i, &k); break;
        default: cases = weight_cases(i, &k);
        }
        printf("kernel %s: %d cases\n", k.name, cases);
        CHECK(cases > 0, "kernel %s is listed but no case reaches it", k.name);
    }
    lowbit_kernel_prefer(-1);
    lowbit_kernel_info k;
    CHECK(lowbit_kernel_get(n, &k) == LOWBIT_EINVAL && lowbit_kernel_get(-1, &k) == LOWBIT_EINVAL,
          "entries out of range accepted");
    CHECK(lowbit_kernel_prefer(n) == LOWBIT_EINVAL, "prefer out of range accepted");
    lowbit_set_isa(saved);
    return report();
}
