/* One thread's read bandwidth over 1, 2, 3 or 4 sequential streams read side by side, the way a
 * paired GEMV reads its two row ranges (AVX-512):
 *
 *     cc -O2 -mavx512f -mavx512bw -mavx512vnni -o /tmp/read_streams bench/read_streams.c
 *     /tmp/read_streams [ROUNDS [MB]]
 *
 * A buffer of MB megabytes (default 1024: well over L3) in transparent huge pages is read in 64 MB
 * chunks; each chunk is split into NS equal streams, and each step loads one 64-byte line of every
 * stream in turn, with the kernels' software prefetch (prefetcht1 of each line PF bytes ahead in
 * its stream) and WORK independent vpdpbusd per line (the compute a kernel spends on it; 0 = a
 * plain read loop).  Configurations alternate round by round and the best round of each is kept
 * (wall time: the memory is what is timed).  Compare rows with each other, within one run. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* ns streams of len bytes (a multiple of 64) from p, p + len, ...: the sum of every line read */
static __attribute__((noinline)) __m512i read_side_by_side(const unsigned char *p, long len, int ns,
                                                           int work, int pf) {
    __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512()};
    const __m512i w = _mm512_set1_epi32(0x01010101);
    for (long i = 0; i < len; i += 64)
        for (int s = 0; s < ns; s++) {
            const unsigned char *q = p + s * len + i;
            if (pf) _mm_prefetch((const char *)q + pf, _MM_HINT_T1); /* past the end: a no-op */
            __m512i v = _mm512_loadu_si512(q), x = v;
            for (int k = 0; k < work; k++) x = _mm512_dpbusd_epi32(x, v, w);
            acc[s] = _mm512_add_epi32(acc[s], x);
        }
    return _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 5;
    const long chunk = 64L << 20, total = (argc > 2 ? atol(argv[2]) : 1024) << 20;
    if (rounds < 1 || total < chunk) {
        fprintf(stderr, "usage: %s [ROUNDS [MB >= 64]]\n", argv[0]);
        return 2;
    }
    unsigned char *buf =
        mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
#ifdef MADV_HUGEPAGE
    madvise(buf, total, MADV_HUGEPAGE);
#endif
    memset(buf, 1, total); /* every page really mapped */
    static const int CFG[][3] = {/* streams, work per line, prefetch distance */
                                 {1, 0, 16384}, {2, 0, 16384}, {4, 0, 16384}, {1, 4, 16384},
                                 {2, 4, 16384}, {3, 4, 16384}, {4, 4, 16384}, {2, 4, 32768},
                                 {2, 4, 0},     {1, 4, 32768}};
    enum { NC = sizeof CFG / sizeof CFG[0] };
    double best[NC] = {0};
    volatile int sink = 0;
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < NC; c++) {
            const int ns = CFG[c][0];
            const long len = chunk / ns / 64 * 64;
            const double t0 = now();
            for (long off = 0; off + chunk <= total; off += chunk)
                sink += _mm512_reduce_add_epi32(
                    read_side_by_side(buf + off, len, ns, CFG[c][1], CFG[c][2]));
            const double gbs = (double)(total / chunk) * len * ns / (now() - t0) / 1e9;
            if (gbs > best[c]) best[c] = gbs;
        }
    printf("one thread, %ld MB, best of %d rounds\n", total >> 20, rounds);
    for (int c = 0; c < NC; c++)
        printf("streams %d  vpdpbusd/line %d  prefetch %5d B: %5.1f GB/s\n", CFG[c][0], CFG[c][1],
               CFG[c][2], best[c]);
    munmap(buf, total);
    return 0;
}
