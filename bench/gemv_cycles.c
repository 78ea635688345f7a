/* Cycles per weight of the packed GEMV (decode path), one thread, cache-resident matrix, side by
 * side with another liblowbit build:
 *
 *     cc -O2 -Inative/include -o /tmp/gemv_cycles bench/gemv_cycles.c -ldl
 *     /tmp/gemv_cycles NEW.so[,BASE.so] FORMAT[,FORMAT...] [ROWS COLS [ROUNDS [ISA [COPIES]]]]
 *
 * Each library packs the same file bytes and runs lowbit_matrix_gemm_act (batch 1, 1 thread: the
 * packed GEMV kernel, no activation quantization) on the A8 activations it makes of the same
 * floats for the type (lowbit_quantize_act_for where it has it); calls alternate between the
 * (format, library) pairs (A, B, B, A, ...) in ~10 ms rounds, formats side by side too (the
 * last column: weights/s of a format against the first one's); 41 rounds by default (on a shared machine
 * the best one is a clean one) and the best round of thread CPU time is kept.  Outputs
 * are compared bit for bit.  Cycles come from a calibration loop of dependent adds (1 cycle each)
 * timed the same way: the VM has no hardware counters (perf stat reports them "not supported").
 * The default 2048 x 2560 matrix (~1.3 MB packed) sits in L2 + L3.  COPIES > 1 (ISA "-" for the
 * default variant) packs that many copies of each matrix and cycles through them call by call:
 * the DRAM regime of the decode path once they total well over L3 (lscpu; the
 * cycle goes on across rounds; each copy has file bytes of its own, as a format read in place,
 * Q8_0 or Q1_0, reads them).  ISA may be two
 * names, ISA_NEW,ISA_BASE: each library runs its own (two copies of one build at two paths give
 * one build's variants side by side; one path twice is one library, one variant).  With one
 * library, ISA may list up to 8 variants: each is a column, set before its matrices are packed
 * and before each of its timed calls (the per-variant in-cache table of docs/PERFORMANCE.md:
 *     /tmp/gemv_cycles LIB.so tq1_0,tq2_0,i2_s,q2_0,pq2_0,ptq1_0 1024 2560 21 scalar,avx2,avxvnni,avx512vnni
 * 1024 x 2560 is 0.55-0.74 MB of 2-bit codes and scales: L2-resident on cores with 1 MB or more).
 * Cycles are counted against a chain of dependent imuls (3 cycles each on x86 cores: a chain of
 * adds ran several a cycle on some cores); weights per ns are G/s. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lowbit/lowbit.h"

static void *open_build(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        exit(1);
    }
    return h;
}

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "missing %s\n", name);
        exit(1);
    }
    return p;
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* roughly normal: sum of 4 uniforms */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
    }
    return s;
}

typedef struct {
    const char *path;
    lowbit_matrix *(*pack)(int, const void *, int64_t, int64_t, int, int *);
    int (*gemm_act)(const lowbit_matrix *, const lowbit_act *, int64_t, float *, int);
    int (*quantize)(int, const float *, int64_t, void *);
    int (*quantize_act)(const float *, int64_t, int64_t, int8_t *, float *, int32_t *);
    int (*quantize_act_for)(int, const float *, int64_t, int8_t *, float *, int32_t *); /* or NULL */
    int (*type_from_name)(const char *);
    int64_t (*tensor_bytes)(int, int64_t);
    int64_t (*act_group)(int);
    int (*set_isa)(int);
    int (*isa_from_name)(const char *);
    void (*matrix_free)(lowbit_matrix *);
    int isa; /* the variant set before packing and each timed call, or -1 */
    const char *label;
} lib_t;

static void open_lib(lib_t *L, const char *path, const char *isa) {
    void *h = open_build(path);
    L->path = path;
    L->pack = sym(h, "lowbit_matrix_pack");
    L->gemm_act = sym(h, "lowbit_matrix_gemm_act");
    L->quantize = sym(h, "lowbit_quantize");
    L->quantize_act = sym(h, "lowbit_quantize_act");
    L->quantize_act_for = dlsym(h, "lowbit_quantize_act_for"); /* older builds: by group */
    L->type_from_name = sym(h, "lowbit_type_from_name");
    L->tensor_bytes = sym(h, "lowbit_tensor_bytes");
    L->act_group = sym(h, "lowbit_act_group");
    L->set_isa = sym(h, "lowbit_set_isa");
    L->isa_from_name = sym(h, "lowbit_isa_from_name");
    L->matrix_free = sym(h, "lowbit_matrix_free");
    L->isa = isa ? L->isa_from_name(isa) : -1;
    L->label = isa;
    if (isa && L->set_isa(L->isa)) {
        fprintf(stderr, "%s: cannot run %s\n", path, isa);
        exit(1);
    }
}

static void use(const lib_t *L) {
    if (L->isa >= 0) L->set_isa(L->isa);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* cycles per second: a chain of dependent 3-cycle imuls, best of 5 */
static double hz(void) {
    double best = 1e30;
    const long n = 100000000;
    for (int r = 0; r < 5; r++) {
        uint64_t x = 3;
        double t0 = now();
        for (long i = 0; i < n; i += 8)
            __asm__ volatile("imul %0,%0\n\timul %0,%0\n\timul %0,%0\n\timul %0,%0\n\t"
                             "imul %0,%0\n\timul %0,%0\n\timul %0,%0\n\timul %0,%0"
                             : "+r"(x));
        double t = now() - t0;
        if (t < best) best = t;
    }
    return 3.0 * n / best;
}

/* one (library, format) pair under test */
typedef struct {
    int l;
    const char *fmt;
    lowbit_matrix *m[64];
    void *bytes[64]; /* each copy's file bytes: a format read in place borrows them */
    float *y;
    lowbit_act a;
    void *mem[4];
    int calls;
    int next; /* the copy the next call runs: the cycle goes on across rounds */
    double best;
} slot_t;

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s NEW.so[,BASE.so] FMT[,FMT] [ROWS COLS [ROUNDS [ISA[,ISA...] [COPIES]]]]\n",
                argv[0]);
        return 2;
    }
    const int64_t rows = argc > 4 ? atoll(argv[3]) : 2048, cols = argc > 4 ? atoll(argv[4]) : 2560;
    const int rounds = argc > 5 ? atoi(argv[5]) : 41;
    const char *isa = argc > 6 && strcmp(argv[6], "-") ? argv[6] : NULL;
    const int copies = argc > 7 ? atoi(argv[7]) : 1;
    if (copies < 1 || copies > 64) {
        fprintf(stderr, "COPIES must be 1 .. 64, not %s\n", argv[7]);
        return 2;
    }
    lib_t L[8];
    int nl = 0;
    char *libs = strdup(argv[1]), *isas = isa ? strdup(isa) : NULL, *isa2 = NULL;
    if (!strchr(libs, ',') && isas && strchr(isas, ',')) { /* one library, a column per variant */
        for (char *v = strtok(isas, ","); v && nl < 8; v = strtok(NULL, ",")) open_lib(&L[nl++], libs, v);
    } else {
        if (isas && (isa2 = strchr(isas, ','))) *isa2++ = 0; /* ISA,ISA: one per library */
        for (char *p = strtok(libs, ","); p && nl < 2; p = strtok(NULL, ",")) {
            open_lib(&L[nl], p, nl && isa2 ? isa2 : isas);
            nl++;
        }
    }
    const double f = hz();
    printf("%lld x %lld%s, core at %.2f GHz (calibrated); G weights/s, cycles per 128 weights\n",
           (long long)rows, (long long)cols, copies > 1 ? " (copies cycled)" : "", f / 1e9);
    float *x = malloc(sizeof(float) * cols), *w = malloc(sizeof(float) * rows * cols);
    for (int64_t i = 0; i < cols; i++) x[i] = frand();
    for (int64_t i = 0; i < rows * cols; i++) w[i] = frand();
    /* every (format, library) pair is a slot; all slots are timed interleaved, round by round
     * (order reversed every other round), so formats compare side by side too */
    slot_t S[32];
    int ns = 0;
    char *fmts = strdup(argv[2]);
    for (char *fmt = strtok(fmts, ","); fmt && ns + nl <= 32; fmt = strtok(NULL, ",")) {
        const int type = L[0].type_from_name(fmt);
        for (int l = 0; l < nl; l++) {
            slot_t *T = &S[ns++];
            memset(T, 0, sizeof *T);
            T->l = l, T->fmt = fmt, T->best = 1e30;
            /* each library quantizes the activations its own way for the type (group and rule) */
            use(&L[l]);
            const int64_t G = L[l].act_group(type);
            const int64_t nbytes = L[l].tensor_bytes(type, rows * cols);
            void *data = malloc((size_t)nbytes);
            int8_t *q = malloc(cols);
            float *d = malloc(sizeof(float) * cols);
            int32_t *s = malloc(sizeof(int32_t) * cols);
            int st = L[l].quantize(type, w, rows * cols, data);
            if (!st)
                st = L[l].quantize_act_for ? L[l].quantize_act_for(type, x, cols, q, d, s)
                                           : L[l].quantize_act(x, cols, G, q, d, s);
            if (st) {
                fprintf(stderr, "%s: quantize failed\n", fmt);
                return 1;
            }
            T->a = (lowbit_act){q, d, s, cols, G};
            T->mem[0] = data, T->mem[1] = q, T->mem[2] = d, T->mem[3] = s;
            T->y = malloc(sizeof(float) * rows);
            for (int k = 0; k < copies; k++) {
                const void *src = data; /* copy 0 packs the quantized bytes themselves */
                if (k) {
                    if (!(T->bytes[k] = malloc((size_t)nbytes))) {
                        fprintf(stderr, "%s: no memory for copy %d\n", fmt, k);
                        return 1;
                    }
                    src = memcpy(T->bytes[k], data, (size_t)nbytes);
                }
                T->m[k] = L[l].pack(type, src, rows, cols, 1, &st);
                if (!T->m[k]) {
                    fprintf(stderr, "%s: pack %s failed (%d)\n", L[l].path, fmt, st);
                    return 1;
                }
            }
            L[l].gemm_act(T->m[0], &T->a, 1, T->y, 1); /* warm-up */
            /* ~10 ms per timed round at ~40 G/s: many short rounds, so that the best one is clean */
            T->calls = (int)(4e8 / (double)(rows * cols)) + 1;
        }
    }
    /* Forward then backward, from a start that moves on every two rounds: each slot runs in each
     * place of a round equally often (a slot's place biased it by -7 .. +10 % in the DRAM regime). */
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < ns; j++) {
            const int start = r / 2 % ns;
            slot_t *T = &S[r & 1 ? (start + ns - 1 - j) % ns : (start + j) % ns];
            use(&L[T->l]);
            double t0 = now();
            for (int i = 0; i < T->calls; i++, T->next = (T->next + 1) % copies)
                L[T->l].gemm_act(T->m[T->next], &T->a, 1, T->y, 1);
            double t = now() - t0;
            if (t < T->best) T->best = t;
        }
    for (int i = 0; i < ns; i += nl) {
        printf("%-8s", S[i].fmt);
        for (int l = 0; l < nl; l++) {
            const double wps = (double)S[i + l].calls * rows * cols / S[i + l].best;
            printf("  %s: %6.1f G/s %5.2f cyc/128w", nl > 2 ? L[l].label : l ? "base" : "new",
                   wps / 1e9, 128 * f / wps);
        }
        for (int l = 2; l < nl; l++) /* the variants of one library: all equal the first */
            if (memcmp(S[i].y, S[i + l].y, sizeof(float) * rows)) printf("  %s DIFFERS", L[l].label);
        if (nl >= 2) {
            printf("  %s/%s %.3f", nl > 2 ? L[1].label : "new", nl > 2 ? L[0].label : "base",
                   nl > 2 ? S[i].best / S[i + 1].best : S[i + 1].best / S[i].best);
            if (S[i].a.group != S[i + 1].a.group) /* PQ2_0 / PTQ1_0 before 128-groups */
                printf("  (activation groups differ)");
            else if (memcmp(S[i].y, S[i + 1].y, sizeof(float) * rows))
                printf("  OUTPUTS DIFFER");
        }
        /* time per call against the first format's (same library): weights/s ratio */
        if (i) printf("  %s/%s %.3f", S[i].fmt, S[0].fmt,
                      (S[0].best / S[0].calls) / (S[i].best / S[i].calls));
        printf("\n");
    }
    for (int i = 0; i < ns; i++) {
        for (int k = 0; k < copies; k++) L[S[i].l].matrix_free(S[i].m[k]), free(S[i].bytes[k]);
        free(S[i].y);
        for (int k = 0; k < 4; k++) free(S[i].mem[k]);
    }
    free(x), free(w), free(libs), free(fmts);
    return 0;
}
