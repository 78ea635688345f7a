/* lowbit_stream_read: the read probe of the roofline (benchmarks), over the thread pool. */
#include "internal.h"

#define STREAM_CHUNK (1 << 20)
typedef struct {
    const uint8_t *p;
    int64_t n;
    const lowbit_kernels *k;
    uint64_t part[256];
} stream_job;

static void stream_chunk(void *ctx, int64_t t) {
    stream_job *S = (stream_job *)ctx;
    const int64_t i0 = t * STREAM_CHUNK, i1 = i0 + STREAM_CHUNK < S->n ? i0 + STREAM_CHUNK : S->n;
    __atomic_fetch_add(&S->part[t & 255], S->k->read_bytes(S->p + i0, i1 - i0), __ATOMIC_RELAXED);
}

uint64_t lowbit_stream_read(const void *buf, int64_t nbytes, int threads) {
    if (!buf || nbytes <= 0) return 0;
    stream_job S;
    memset(&S, 0, sizeof S);
    S.p = (const uint8_t *)buf;
    S.n = nbytes / 64 * 64;
    S.k = lowbit_active_kernels();
    lowbit_parallel_for((S.n + STREAM_CHUNK - 1) / STREAM_CHUNK, stream_chunk, &S, threads);
    uint64_t x = 0;
    for (int i = 0; i < 256; i++) x += S.part[i];
    return x;
}
