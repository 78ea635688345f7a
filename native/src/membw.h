/* Read-bandwidth probe for `pylowbit bench` (header-only, used by pylowbit/_membw.pyx).
 * Streams a buffer with the widest loads the CPU has so that the probe, not the loop, is bound by
 * memory.  The AVX2 body is compiled for that target by a function attribute and only called
 * after a run-time check, so the extension itself needs no ISA flags. */
#ifndef LOWBIT_MEMBW_H
#define LOWBIT_MEMBW_H
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t membw_xor_avx2(const uint64_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) { /* 128 bytes per iteration, four independent chains */
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a);
    uint64_t r = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
    for (; i < n; i++) r ^= p[i];
    return r;
}
#define MEMBW_HAVE_AVX2 1
#endif

static uint64_t membw_xor_scalar(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 ^= p[i];
        a1 ^= p[i + 1];
        a2 ^= p[i + 2];
        a3 ^= p[i + 3];
    }
    for (; i < n; i++) a0 ^= p[i];
    return a0 ^ a1 ^ a2 ^ a3;
}

static uint64_t membw_xor(const uint64_t *p, size_t n) {
#ifdef MEMBW_HAVE_AVX2
    if (__builtin_cpu_supports("avx2")) return membw_xor_avx2(p, n);
#endif
    return membw_xor_scalar(p, n);
}
#endif
