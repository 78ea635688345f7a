/* Are the machine's logical CPUs separate cores or hyperthread siblings?  A throughput-bound
 * loop's speed on 1 thread against each of 2 threads running it at once:
 *
 *     cc -O2 -pthread -o /tmp/core_pairs bench/core_pairs.c
 *     /tmp/core_pairs [SECONDS_PER_RUN]
 *
 * The loop is 12 independent chains of vpdpbusd on zmm registers (AVX-512 VNNI; an AVX2 add chain
 * where the CPU lacks it), enough to keep the vector ports busy every cycle.  Two siblings of one
 * core share those ports, so each of two threads gets about half a lone thread's rate per second
 * of its own CPU time; two separate cores give each the full rate.  Reported per thread: work per
 * second of wall time and per second of its own CPU time (the second is robust to other processes
 * taking the CPU, not to a sibling sharing the core, which is what is measured).  Each thread is
 * pinned to one CPU where the OS allows it. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int cpu;
    double seconds, wall_rate, cpu_rate;
} job;

static double now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((target("avx512f,avx512vnni"))) static long spin_vnni(long iters, int *sink) {
    __m512i acc[12];
    const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x01010101);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_epi32(i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __m512i s = acc[0];
    for (int i = 1; i < 12; i++) s = _mm512_add_epi32(s, acc[i]);
    *sink += _mm512_reduce_add_epi32(s);
    return iters * 12;
}

__attribute__((target("avx2"))) static long spin_avx2(long iters, int *sink) {
    __m256i acc[12];
    const __m256i a = _mm256_set1_epi32(3);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_epi32(i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) acc[i] = _mm256_add_epi32(acc[i], a);
    for (int i = 1; i < 12; i++) acc[0] = _mm256_add_epi32(acc[0], acc[i]);
    *sink += _mm256_extract_epi32(acc[0], 0);
    return iters * 12;
}

static int have_vnni;

static void *run(void *arg) {
    job *j = arg;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#endif
    int sink = 0;
    long ops = 0, chunk = 1 << 20;
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
    while (now(CLOCK_MONOTONIC) - w0 < j->seconds)
        ops += have_vnni ? spin_vnni(chunk, &sink) : spin_avx2(chunk, &sink);
    double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_THREAD_CPUTIME_ID) - c0;
    j->wall_rate = ops / w * 1e-9;
    j->cpu_rate = ops / c * 1e-9;
    return (void *)(long)sink;
}

static void trial(int n, int first_cpu, double seconds) {
    pthread_t t[2];
    job j[2];
    for (int i = 0; i < n; i++) {
        j[i] = (job){.cpu = first_cpu + i, .seconds = seconds};
        pthread_create(&t[i], NULL, run, &j[i]);
    }
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("%d thread(s):", n);
    for (int i = 0; i < n; i++)
        printf("  cpu %d: %.2f G ops/s wall, %.2f per CPU second", j[i].cpu, j[i].wall_rate,
               j[i].cpu_rate);
    printf("\n");
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    __builtin_cpu_init();
    have_vnni = __builtin_cpu_supports("avx512vnni");
    printf("loop: %s\n", have_vnni ? "12 vpdpbusd zmm chains" : "12 vpaddd ymm chains");
    for (int r = 0; r < 3; r++) {
        trial(1, 0, seconds);
        trial(1, 1, seconds);
        trial(2, 0, seconds);
    }
    return 0;
}
