/* The AVX2 read probe of lowbit_stream_read (kernel_table.h: lowbit_read_sig). */
#include "avx2-inl.h"

/* The bandwidth probe's loop (internal.h): 32-byte loads into four sums.  Where the packed GEMV
 * kernels prefetch (PF: the Intel entry of the kernel list prefetches) the probe prefetches the same way, so
 * the roofline is the memory's and not the loop's (docs/PERFORMANCE.md has the measurements). */
AI uint64_t read_loop(const int PF, const uint8_t *p, int64_t n) {
    __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        if (PF) { /* a hint past the end of the buffer never faults */
            _mm_prefetch((const char *)(p + i + PF), _MM_HINT_T1);
            _mm_prefetch((const char *)(p + i + PF + 64), _MM_HINT_T1);
        }
        for (int j = 0; j < 4; j++)
            s[j] = _mm256_add_epi64(s[j], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    }
    for (; i < n; i += 64) /* the last 64 bytes */
        for (int j = 0; j < 2; j++)
            s[j] = _mm256_add_epi64(s[j], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    const __m256i t = _mm256_add_epi64(_mm256_add_epi64(s[0], s[1]), _mm256_add_epi64(s[2], s[3]));
    return (uint64_t)_mm256_extract_epi64(t, 0) + (uint64_t)_mm256_extract_epi64(t, 1) +
           (uint64_t)_mm256_extract_epi64(t, 2) + (uint64_t)_mm256_extract_epi64(t, 3);
}

#ifndef LOWBIT_PF_READ_INTEL
#define LOWBIT_PF_READ_INTEL 16384
#endif
uint64_t read_bytes_avx2(const uint8_t *p, int64_t n) { return read_loop(0, p, n); }
uint64_t read_bytes_avx2_l2pf(const uint8_t *p, int64_t n) {
    return read_loop(LOWBIT_PF_READ_INTEL, p, n);
}
