/* The persistent thread pool (threads.c). */
#ifndef LOWBIT_POOL_H
#define LOWBIT_POOL_H

#include <stdint.h>

/* ---- threads ------------------------------------------------------------------------------- */

/* Run fn(ctx, i) for i in [0, ntasks) on up to `threads` threads of the persistent pool (the
 * calling thread takes part).  threads <= 0 means the library default. */
typedef void (*lowbit_task_fn)(void *ctx, int64_t i);
void lowbit_parallel_for(int64_t ntasks, lowbit_task_fn fn, void *ctx, int threads);
/* The threads lowbit_parallel_for(ntasks, ..., threads) would split its tasks over; task i of
 * slot s's range comes first in that thread: ranges [ntasks * s / n, ntasks * (s + 1) / n). */
int lowbit_pool_slots(int64_t ntasks, int threads);
/* Read-ahead: hand the pool's idle (spinning) threads up to LOWBIT_READAHEAD_MAX spans of memory
 * that the next job will read first, to prefetch (line by line, spans side by side) while the
 * caller does the work between two jobs; a job that starts stops it.  Only a hint: no effect on
 * any result. */
#define LOWBIT_READAHEAD_MAX 16
typedef struct {
    const void *p;
    int64_t n;
} lowbit_span;
void lowbit_pool_readahead(const lowbit_span *spans, int n);

#endif /* LOWBIT_POOL_H */
