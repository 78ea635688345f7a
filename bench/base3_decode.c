/* Would a base-3 packed layout (5 trits a byte, 1.6 bits a weight) let TQ1_0 / PTQ1_0 stream faster
 * than the canonical 2-bit one (2 bits a weight, what repack.c builds for every format)?  This
 * times the inner loop of each, one thread, codes in L2, AVX-512 VNNI + VBMI:
 *
 *     cc -O2 -mavx512f -mavx512bw -mavx512vbmi -mavx512vnni -o /tmp/base3_decode bench/base3_decode.c
 *     /tmp/base3_decode [PASSES]
 *
 * canonical: the 8-row kernels' tile step (kernels_avx512vnni.c, tile_dp): per 64 code bytes
 *   (256 weights) one shift, four masks, four vpdpbusd.
 * base-3: a byte v = 84 t4 + (t0 + 3 t1 + 9 t2 + 27 t3), so that t4 = table[v >> 2] (vpermb
 *   reads the low 6 bits only: no mask after the 16-bit shift); r = v - 84 t4 is a 7-bit index
 *   whose vpermi2b lookup is the canonical byte of t0..t3 (then as above) and t4 one more
 *   vpdpbusd: per 64 code bytes (320 weights) shift, 2 vpermb, subtract, vpermi2b, shift, four
 *   masks, five vpdpbusd.
 * Both loops keep 8-12 accumulators (as the kernels do) and no reductions or float steps: an upper
 * bound for each layout.  The base-3 sums are checked against a scalar decode once (PASSES 1).
 * Prints weights/s and code bytes/s of each: base-3 beats canonical in DRAM only where a thread's
 * read bandwidth is below the base-3 loop's code bytes/s. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define AI static inline __attribute__((always_inline))

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* 128 canonical bytes (two zmm), as tile_dp */
AI void canonical_step(const uint8_t *p, const __m512i A[4], __m512i acc[4]) {
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12);
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_loadu_si512(p + 64 * h);
        const __m512i u = _mm512_srli_epi16(v, 4);
        acc[h] = _mm512_dpbusd_epi32(acc[h], _mm512_and_si512(v, m3), A[0]);
        acc[2 + h] = _mm512_dpbusd_epi32(acc[2 + h], _mm512_and_si512(v, m12), A[1]);
        acc[h] = _mm512_dpbusd_epi32(acc[h], _mm512_and_si512(u, m3), A[2]);
        acc[2 + h] = _mm512_dpbusd_epi32(acc[2 + h], _mm512_and_si512(u, m12), A[3]);
    }
}

typedef struct {
    __m512i t4, t84, can_lo, can_hi; /* t4 and 84 t4 by v >> 2; canonical byte by r (128 entries) */
} base3_tables;

/* 64 base-3 bytes: acc[0], acc[1] sums of planes 0, 2 and t4; acc[2], acc[3] 4 x planes 1, 3 */
AI void base3_step(const uint8_t *p, const __m512i A[5], const base3_tables *T, __m512i acc[4]) {
    const __m512i m3 = _mm512_set1_epi8(3), m12 = _mm512_set1_epi8(12);
    const __m512i v = _mm512_loadu_si512(p);
    const __m512i w = _mm512_srli_epi16(v, 2); /* bits 6, 7 from the next byte: vpermb skips them */
    const __m512i t4 = _mm512_permutexvar_epi8(w, T->t4);
    const __m512i r = _mm512_sub_epi8(v, _mm512_permutexvar_epi8(w, T->t84));
    const __m512i c = _mm512_permutex2var_epi8(T->can_lo, r, T->can_hi);
    const __m512i u = _mm512_srli_epi16(c, 4);
    acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_and_si512(c, m3), A[0]);
    acc[2] = _mm512_dpbusd_epi32(acc[2], _mm512_and_si512(c, m12), A[1]);
    acc[1] = _mm512_dpbusd_epi32(acc[1], _mm512_and_si512(u, m3), A[2]);
    acc[3] = _mm512_dpbusd_epi32(acc[3], _mm512_and_si512(u, m12), A[3]);
    acc[0] = _mm512_dpbusd_epi32(acc[0], t4, A[4]);
}

static int64_t sum_lanes(__m512i v) { return _mm512_reduce_add_epi32(v); }

int main(int argc, char **argv) {
    enum { NW = 320 * 1536 }; /* weights per pass: 120 KB canonical, 96 KB base-3 (L2) */
    const int passes = argc > 1 ? atoi(argv[1]) : 200;
    uint8_t tab[4][64];
    for (int x = 0; x < 64; x++) {
        tab[0][x] = x >= 42 ? 2 : x >= 21 ? 1 : 0; /* v >> 2 of 84 t4 + r, r < 81 */
        tab[1][x] = 84 * tab[0][x];
    }
    for (int r = 0; r < 128; r++) {
        const int v = r < 81 ? r : 0;
        (r < 64 ? tab[2] : tab[3])[r % 64] =
            (uint8_t)(v % 3 | (v / 3 % 3) << 2 | (v / 9 % 3) << 4 | (v / 27 % 3) << 6);
    }
    base3_tables T = {_mm512_loadu_si512(tab[0]), _mm512_loadu_si512(tab[1]),
                      _mm512_loadu_si512(tab[2]), _mm512_loadu_si512(tab[3])};
    uint8_t *b3 = aligned_alloc(64, NW / 5), *b2 = aligned_alloc(64, NW / 4);
    int8_t q[320];
    srand(1);
    for (int i = 0; i < 320; i++) q[i] = (int8_t)(rand() % 255 - 127);
    int64_t want = 0; /* byte i, trit k multiplies q[64 k + i % 32] (A[k] below) */
    for (int64_t i = 0; i < NW / 5; i++) {
        int t[5];
        for (int k = 0; k < 5; k++) t[k] = rand() % 3;
        b3[i] = (uint8_t)(84 * t[4] + t[0] + 3 * t[1] + 9 * t[2] + 27 * t[3]);
        for (int k = 0; k < 5; k++) want += t[k] * q[64 * k + i % 32];
    }
    for (int64_t i = 0; i < NW / 4; i++) b2[i] = (uint8_t)rand();
    __m512i A[5];
    for (int k = 0; k < 5; k++)
        A[k] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(q + 64 * k)));
    double best2 = 1e30, best3 = 1e30;
    int64_t sink = 0;
    for (int rep = 0; rep < 7; rep++) {
        __m512i c[2][4], b[3][4];
        for (int i = 0; i < 4; i++) {
            c[0][i] = c[1][i] = b[0][i] = b[1][i] = b[2][i] = _mm512_setzero_si512();
        }
        const double t0 = thread_seconds();
        for (int p = 0; p < passes; p++)
            for (int64_t o = 0; o < NW / 4; o += 256) {
                canonical_step(b2 + o, A, c[0]);
                canonical_step(b2 + o + 128, A, c[1]);
            }
        const double t1 = thread_seconds();
        for (int p = 0; p < passes; p++)
            for (int64_t o = 0; o < NW / 5; o += 192)
                for (int j = 0; j < 3; j++) base3_step(b3 + o + 64 * j, A, &T, b[j]);
        const double t2 = thread_seconds();
        int64_t got = 0;
        for (int i = 0; i < 4; i++) {
            sink += sum_lanes(c[0][i]) + sum_lanes(c[1][i]);
            for (int j = 0; j < 3; j++) got += sum_lanes(b[j][i]) / (i >= 2 ? 4 : 1);
        }
        if (rep == 0 && passes == 1) printf("base-3 sums %s\n", got == want ? "exact" : "WRONG");
        sink += got;
        if (t1 - t0 < best2) best2 = t1 - t0;
        if (t2 - t1 < best3) best3 = t2 - t1;
    }
    const double w = (double)NW * passes;
    printf("canonical 2-bit: %6.1f G weights/s, %5.1f GB/s of codes\n", w / best2 / 1e9,
           w / 4 / best2 / 1e9);
    printf("base-3 (5/byte): %6.1f G weights/s, %5.1f GB/s of codes (%.3f x the weights/s)\n",
           w / best3 / 1e9, w / 5 / best3 / 1e9, best2 / best3);
    printf("(checksum %lld)\n", (long long)sink); /* keeps both loops live */
    return 0;
}
