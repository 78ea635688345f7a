/* What share of the machine's read bandwidth a decode token's GEMVs reach, and the ceiling of that
 * share for their compute density, on 1 or more threads (x86, AVX2):
 *
 *     cc -O2 -mavx2 -Inative/include -o /tmp/stream_ceiling bench/stream_ceiling.c -ldl -lpthread
 *     /tmp/stream_ceiling NEW.so[,BASE.so] [THREADS [ROUNDS [FORMAT]]]
 *
 * Every round times, side by side and in alternating order:
 *  - liblowbit's read loop (lowbit_stream_read, the probe of `pylowbit bench`'s roofline) over a
 *    buffer of the token's size: the reference of the round;
 *  - for each library: the GEMVs of one BitNet b1.58 2B token in FORMAT (default tq2_0; per layer
 *    q, k, v in one lowbit_matrix_gemm_multi, o, gate and up in one lowbit_matrix_gemm_glu, down;
 *    30 layers; then the 128256 x 2560 head), the calls the decoder makes, on packed matrices;
 *  - synthetic streams over the same buffer, split over the threads the same way: every 32 bytes
 *    loaded go through the AVX2 packed kernel's per-32-byte work (tile_sums in kernels_avx2.c:
 *    1 shift, 4 masks, 4 vpmaddubsw, 5 adds), times 0.50, 1.00, 1.25 and 1.50 (the real kernel
 *    adds ~20 % for its per-group reductions and float steps; x0.50 is about what a VNNI kernel
 *    would do, vpdpbusd folding the multiply, widening and add), with the kernel's software prefetch
 *    (both lines of each 128 bytes, 16 KB ahead).  No data dependence, no scales, no tasks: the
 *    best a kernel of that density streams here.
 * and prints, for each, the median over rounds of (bytes/s) / (the round's read bytes/s), with
 * the quartiles: on a shared machine the read bandwidth moves from minute to minute, and a share
 * taken within one round is what stays comparable. */
#include <dlfcn.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lowbit/lowbit.h"
#include "lowbit_dl.h"

enum { LAYERS = 30, PER_LAYER = 7, NMAT = LAYERS * PER_LAYER + 1, MAXR = 512 };
/* rows, cols of q, k, v, o, gate, up, down, then the head */
static const int64_t SHAPE[PER_LAYER + 1][2] = {{2560, 2560}, {640, 2560}, {640, 2560}, {2560, 2560},
                                                {6912, 2560}, {6912, 2560}, {2560, 6912}, {128256, 2560}};

typedef struct {
    const char *path;
    int (*gemv)(const lowbit_matrix *, const float *, float *, int);
    int (*multi)(const lowbit_matrix *const *, int, const float *, int64_t, float *const *, int);
    int (*glu)(const lowbit_matrix *, const lowbit_matrix *, int, const float *, int64_t, float *,
               float *, int);
    uint64_t (*stream_read)(const void *, int64_t, int);
    lowbit_matrix *m[NMAT];
} lib_t;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* ---- the synthetic stream ------------------------------------------------------------------- */

static volatile int64_t g_sink;

/* tile_sums' work on one 32-byte row of a tile */
#define TILE_ROW_WORK(v, s)                                                                      \
    do {                                                                                         \
        const __m256i h_ = _mm256_srli_epi16(v, 4);                                              \
        const __m256i p0_ = _mm256_maddubs_epi16(_mm256_and_si256(v, m3), a0);                   \
        const __m256i p2_ = _mm256_maddubs_epi16(_mm256_and_si256(h_, m3), a2);                  \
        const __m256i p1_ = _mm256_maddubs_epi16(_mm256_and_si256(v, m12), a1);                  \
        const __m256i p3_ = _mm256_maddubs_epi16(_mm256_and_si256(h_, m12), a3);                 \
        s = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_slli_epi16(_mm256_add_epi16(p0_, p2_), 2), \
                                                 _mm256_add_epi16(p1_, p3_)));                   \
        __asm__ volatile("" : "+x"(s));                                                          \
    } while (0)

typedef struct {
    const uint8_t *p;
    int64_t n;
    int prefetch;
    int work; /* tile rows of work per 4 loaded: 2 (x0.50), 4 (x1.00), 5 (x1.25), 6 (x1.50) */
    __m256i out;
} synth_arg;

static void synth_run(synth_arg *A) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    const __m256i a0 = _mm256_set1_epi8(1), a1 = _mm256_set1_epi8(-2), a2 = _mm256_set1_epi8(3),
                  a3 = _mm256_set1_epi8(-5);
    __m256i s = _mm256_setzero_si256(), r = s;
    for (int64_t i = 0; i < A->n; i += 128) {
        if (A->prefetch) {
            _mm_prefetch((const char *)A->p + i + 16384, _MM_HINT_T0);
            _mm_prefetch((const char *)A->p + i + 16384 + 64, _MM_HINT_T0);
        }
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_load_si256((const __m256i *)(A->p + i + 32 * j));
            if (j < A->work)
                TILE_ROW_WORK(v, s);
            else
                r = _mm256_add_epi64(r, v); /* loaded, not worked on */
        }
        for (int j = 4; j < A->work; j++) {
            const __m256i v = _mm256_set1_epi32((int)i + j);
            TILE_ROW_WORK(v, s);
        }
    }
    A->out = _mm256_add_epi64(s, r);
}

static void *synth_thread(void *arg) {
    synth_run((synth_arg *)arg);
    return NULL;
}

/* the buffer's n bytes on `threads` threads, one contiguous share each (as the thread pool
 * splits a GEMV); the thread start-up is timed too, a few microseconds against ~30 ms */
static double synth_time(const uint8_t *p, int64_t n, int threads, int work, int prefetch) {
    pthread_t t[64];
    synth_arg A[64];
    const int64_t share = n / threads / 128 * 128;
    const double t0 = now();
    for (int i = 0; i < threads; i++) {
        A[i] = (synth_arg){p + i * share, share, prefetch, work, _mm256_setzero_si256()};
        if (i) pthread_create(&t[i], NULL, synth_thread, &A[i]);
    }
    synth_run(&A[0]);
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    const double dt = now() - t0;
    for (int i = 0; i < threads; i++) g_sink += _mm256_extract_epi64(A[i].out, 0); /* every load used */
    return dt;
}

/* ---- the token's GEMVs ---------------------------------------------------------------------- */

static int64_t open_lib(lib_t *L, const char *path, const float *w, const char *format) {
    void *h = open_build(path);
    L->path = path;
    L->gemv = sym(h, "lowbit_matrix_gemv");
    L->multi = sym(h, "lowbit_matrix_gemm_multi");
    L->glu = sym(h, "lowbit_matrix_gemm_glu");
    L->stream_read = sym(h, "lowbit_stream_read");
    lowbit_matrix *(*pack)(int, const void *, int64_t, int64_t, int, int *) =
        sym(h, "lowbit_matrix_pack");
    int (*quantize)(int, const float *, int64_t, void *) = sym(h, "lowbit_quantize");
    int (*type_from_name)(const char *) = sym(h, "lowbit_type_from_name");
    int64_t (*tensor_bytes)(int, int64_t) = sym(h, "lowbit_tensor_bytes");
    const int type = type_from_name(format);
    if (type < 0) {
        fprintf(stderr, "%s: unknown format %s\n", path, format);
        exit(2);
    }
    int64_t bytes = 0;
    for (int s = 0; s <= PER_LAYER; s++) {
        const int64_t n = SHAPE[s][0] * SHAPE[s][1];
        void *data = malloc(tensor_bytes(type, n));
        if (!data || quantize(type, w, n, data)) {
            fprintf(stderr, "quantize failed\n");
            exit(1);
        }
        for (int l = 0; l < (s < PER_LAYER ? LAYERS : 1); l++) {
            int st = 0;
            lowbit_matrix *m = pack(type, data, SHAPE[s][0], SHAPE[s][1], 0, &st);
            if (!m) {
                fprintf(stderr, "%s: pack failed (%d)\n", path, st);
                exit(1);
            }
            L->m[s < PER_LAYER ? l * PER_LAYER + s : NMAT - 1] = m;
            bytes += tensor_bytes(type, n);
        }
        free(data);
    }
    return bytes;
}

static double token_time(const lib_t *L, const float *x, float *y, int threads) {
    float *ys[3] = {y, y + 8192, y + 16384};
    const double t0 = now();
    for (int l = 0; l < LAYERS; l++) {
        lowbit_matrix *const *m = L->m + l * PER_LAYER;
        L->multi((const lowbit_matrix *const *)m, 3, x, 1, ys, threads);
        L->gemv(m[3], x, y, threads);
        L->glu(m[4], m[5], 0, x, 1, y, y + 8192, threads);
        L->gemv(m[6], x, y, threads);
    }
    L->gemv(L->m[NMAT - 1], x, y, threads);
    return now() - t0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s NEW.so[,BASE.so] [THREADS [ROUNDS [FORMAT]]]\n", argv[0]);
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 2;
    int rounds = argc > 3 ? atoi(argv[3]) : 40;
    const char *format = argc > 4 ? argv[4] : "tq2_0";
    if (threads < 1 || threads > 64 || rounds < 1) return 2;
    if (rounds > MAXR) rounds = MAXR;
    const int64_t maxn = SHAPE[PER_LAYER][0] * SHAPE[PER_LAYER][1];
    float *w = malloc(sizeof(float) * maxn), *x = malloc(sizeof(float) * 8192),
          *y = malloc(sizeof(float) * (maxn / 2560 + 16384));
    for (int64_t i = 0; i < maxn; i++) w[i] = frand();
    for (int i = 0; i < 8192; i++) x[i] = frand();
    lib_t L[2];
    int nl = 0;
    int64_t bytes = 0;
    char *libs = strdup(argv[1]);
    for (char *p = strtok(libs, ","); p && nl < 2; p = strtok(NULL, ","))
        bytes = open_lib(&L[nl++], p, w, format);
    free(w);
    /* the read loop's buffer (huge pages where Linux gives them, as liblowbit's packed weights) */
    const int64_t nb = (bytes + 4095) / 4096 * 4096, huge = 2 << 20;
    uint8_t *raw = mmap(NULL, nb + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 1;
    uint8_t *buf = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(buf, nb, MADV_HUGEPAGE);
    memset(buf, 1, nb);
    enum { NSYN = 6 };
    const char *syn_name[NSYN] = {"synthetic x0.50", "synthetic x1.00", "synthetic x1.25",
                                  "synthetic x1.50", "synthetic x0.50, no prefetch",
                                  "synthetic x1.00, no prefetch"};
    const int syn_work[NSYN] = {2, 4, 5, 6, 2, 4}, syn_prefetch[NSYN] = {1, 1, 1, 1, 0, 0};
    static double share[2 + NSYN][MAXR];
    double read_sum = 0;
    for (int r = 0; r < rounds; r++) {
        double t[2 + NSYN];
        for (int k = 0; k < 2 + NSYN; k++) { /* forward, then backward the next round */
            const int j = r & 1 ? 1 + NSYN - k : k;
            if (j < nl) t[j] = token_time(&L[j], x, y, threads);
            else if (j >= 2) t[j] = synth_time(buf, nb, threads, syn_work[j - 2], syn_prefetch[j - 2]);
        }
        const double t0 = now();
        volatile uint64_t sum = L[0].stream_read(buf, nb, threads);
        (void)sum;
        const double read_bps = nb / (now() - t0);
        read_sum += read_bps;
        for (int j = 0; j < 2 + NSYN; j++)
            if (j < nl || j >= 2) share[j][r] = (j < 2 ? bytes : nb) / t[j] / read_bps;
    }
    printf("BitNet b1.58 2B token, %s, %.0f MB of weights; %d thread(s), %d rounds; read loop "
           "%.1f GB/s (mean)\nshare of the round's read bandwidth, median (quartiles):\n",
           format, bytes / 1e6, threads, rounds, read_sum / rounds / 1e9);
    for (int j = 0; j < 2 + NSYN; j++) {
        if (j >= nl && j < 2) continue;
        qsort(share[j], rounds, sizeof(double), cmp_double);
        printf("  %-40s %.3f (%.3f .. %.3f)\n", j < 2 ? L[j].path : syn_name[j - 2],
               share[j][rounds / 2], share[j][rounds / 4], share[j][(3 * rounds) / 4]);
    }
    return 0;
}
