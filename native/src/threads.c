/* A persistent thread pool: workers are started once and reused by every call.
 *
 * A decode step issues ~210 GEMVs of a few hundred microseconds each, so a job must cost
 * microseconds to hand out and to join:
 *  - One job runs at a time.  A caller that finds the pool busy (another Python thread) runs its
 *    job itself, which keeps concurrent callers correct without deadlock.
 *  - The tasks 0..n-1 are cut into one contiguous range per thread (slot 0 is the caller), so each
 *    thread streams its own region of a matrix (the prefetchers follow one sequential run per core).
 *    A thread that runs out of its range steals from the others', so a thread that the OS has
 *    descheduled (a shared or oversubscribed machine) delays nobody: the caller never waits for a
 *    worker to wake up, only for tasks a worker has already taken.
 *  - Each slot's counter carries the job's generation in its high 32 bits, so a worker that wakes
 *    late, for a job already finished, can never take a task of the next one.
 *  - A thread counts the tasks it ran and adds them to the job's `done` once, when it finds no
 *    task left, instead of once per task: `done` is the one line both cores write, and a GEMV
 *    has ~50 tasks per thread (docs/PERFORMANCE.md#thread-pool).
 *  - Idle workers spin for a short while (pause, then yield so that on a busy machine they
 *    hand the core to whoever is runnable, e.g. the caller's own thread), then sleep on a condition
 *    variable.  The caller only takes the lock to wake them when one is asleep.
 *  - A spinning worker also reads ahead: lowbit_pool_readahead hands it the spans the next job
 *    will read first (api.c: lowbit_matrix_readahead), which it prefetches while the caller works
 *    between jobs; the next job stops it.  A sleeping worker is not woken for it: the decoder's
 *    gaps between GEMVs are shorter than the spin, and with PYLOWBIT_SPIN_US=0 (an oversubscribed
 *    machine) a wake per hint would double the wake-ups.
 * PYLOWBIT_SPIN_US sets the spin time (default 50; 0 sleeps at once).  50 covers the gaps between
 * the GEMVs of a layer (docs/PERFORMANCE.md#thread-pool).  A host whose gaps are longer (a Python
 * model's layers between pylowbit's products) keeps the workers spinning, and reading ahead, for
 * as long as it holds lowbit_pool_keep_awake: they still yield the core to any runnable thread. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "platform.h" /* locks, threads, clock, cpu_relax */

#define MAX_THREADS 256
#define PAUSE_US 20 /* of the spin, busy-wait with `pause` before yielding the core */

typedef struct {
    _Alignas(64) _Atomic uint64_t next; /* gen << 32 | next task of this slot */
    _Atomic uint64_t end;               /* gen << 32 | end of this slot's range */
} slot;

static struct {
    lowbit_mutex busy; /* held by the thread that owns the current job */
    lowbit_mutex lock; /* guards sleeping / waking */
    lowbit_cond wake;
    lowbit_cond done_cv;
    int nworkers;        /* started worker threads (the caller is not counted) */
    _Alignas(64) _Atomic uint32_t generation;
    _Atomic int nslots;  /* threads taking part in the current job */
    _Atomic int sleepers;
    _Atomic int caller_sleeping;
    lowbit_task_fn fn;
    void *ctx;
    _Alignas(64) _Atomic int64_t done; /* tasks finished in the current job */
    int64_t ntasks;
    slot slots[MAX_THREADS];
    /* read-ahead (lowbit_pool_readahead): spans posted under generation ra_gen, taken by the idle
     * workers RA_BATCH at a time from ra_next.  A worker may still be reading the previous spans
     * when new ones are posted: harmless, a prefetch never faults. */
    _Alignas(64) _Atomic uint32_t ra_gen;
    _Atomic int ra_n, ra_next;
    struct {
        _Atomic(uintptr_t) p;
        _Atomic int64_t n;
    } ra[LOWBIT_READAHEAD_MAX];
} P = {.busy = LOWBIT_MUTEX_INIT,
       .lock = LOWBIT_MUTEX_INIT,
       .wake = LOWBIT_COND_INIT,
       .done_cv = LOWBIT_COND_INIT};

static _Atomic int g_default_threads = 0;
static int g_spin_us = -1;
static _Atomic int g_keep_awake = 0; /* lowbit_pool_keep_awake's holds */

static int spin_us(void) {
    if (g_spin_us < 0) {
        const char *env = getenv("PYLOWBIT_SPIN_US");
        int v = env ? atoi(env) : 50;
        g_spin_us = v < 0 ? 0 : v;
    }
    return g_spin_us;
}

/* Take one task of slot s in job `gen`; -1 when the slot is empty or the job is another one. */
static int64_t claim(int s, uint32_t gen) {
    slot *S = &P.slots[s];
    uint64_t e = atomic_load_explicit(&S->end, memory_order_acquire);
    if ((uint32_t)(e >> 32) != gen) return -1;
    uint64_t v = atomic_load_explicit(&S->next, memory_order_relaxed);
    for (;;) {
        if ((uint32_t)(v >> 32) != gen || v >= e) return -1;
        if (atomic_compare_exchange_weak_explicit(&S->next, &v, v + 1, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return (int64_t)(uint32_t)v;
    }
}

/* Run the tasks of job `gen`: own slot first, then steal from the others in turn. */
static void run_tasks(uint32_t gen, int own, int nslots) {
    int64_t n = 0, ran = 0;
    for (int k = 0; k < nslots; k++) {
        int s = (own + k) % nslots;
        int64_t i;
        while ((i = claim(s, gen)) >= 0) {
            n = P.ntasks; /* read while the job is surely still this one */
            P.fn(P.ctx, i);
            ran++;
        }
    }
    if (ran && atomic_fetch_add(&P.done, ran) + ran == n && atomic_load(&P.caller_sleeping)) {
        lowbit_mutex_lock(&P.lock);
        lowbit_cond_signal(&P.done_cv);
        lowbit_mutex_unlock(&P.lock);
    }
}

/* Prefetch the posted read-ahead spans, RA_BATCH spans side by side, line by line, until they are
 * done or a job newer than `seen` starts. */
#define RA_BATCH 4
static void readahead(uint32_t seen) {
    const int n = atomic_load_explicit(&P.ra_n, memory_order_relaxed);
    int k0;
    while ((k0 = atomic_fetch_add_explicit(&P.ra_next, RA_BATCH, memory_order_relaxed)) < n) {
        const int nb = k0 + RA_BATCH < n ? RA_BATCH : n - k0;
        const char *p[RA_BATCH];
        int64_t len[RA_BATCH], most = 0;
        for (int k = 0; k < nb; k++) {
            p[k] = (const char *)atomic_load_explicit(&P.ra[k0 + k].p, memory_order_relaxed);
            len[k] = atomic_load_explicit(&P.ra[k0 + k].n, memory_order_relaxed);
            most = len[k] > most ? len[k] : most;
        }
        for (int64_t off = 0; off < most; off += 64) {
            if ((off & 1023) == 0 && atomic_load_explicit(&P.generation, memory_order_relaxed) != seen)
                return;
            for (int k = 0; k < nb; k++)
                if (off < len[k]) lowbit_prefetch(p[k] + off);
        }
    }
}

void lowbit_pool_readahead(const lowbit_span *spans, int n) {
    if (n > LOWBIT_READAHEAD_MAX) n = LOWBIT_READAHEAD_MAX;
    for (int k = 0; k < n; k++) {
        atomic_store_explicit(&P.ra[k].p, (uintptr_t)spans[k].p, memory_order_relaxed);
        atomic_store_explicit(&P.ra[k].n, spans[k].n, memory_order_relaxed);
    }
    atomic_store_explicit(&P.ra_n, n, memory_order_relaxed);
    atomic_store_explicit(&P.ra_next, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&P.ra_gen, 1, memory_order_release);
}

static void worker_main(void *arg) {
    const int own = 1 + (int)(intptr_t)arg; /* slot 0 is the caller's */
    uint32_t seen = atomic_load(&P.generation), ra_seen = atomic_load(&P.ra_gen);
    for (;;) {
        uint32_t gen = atomic_load_explicit(&P.generation, memory_order_acquire);
        if (gen == seen) {
            double t0 = lowbit_now_us(), t;
            const double limit = spin_us();
            int n = 0;
            while ((gen = atomic_load_explicit(&P.generation, memory_order_acquire)) == seen) {
                const uint32_t ra = atomic_load_explicit(&P.ra_gen, memory_order_acquire);
                if (ra != ra_seen) { /* idle: read ahead, then spin afresh */
                    ra_seen = ra;
                    readahead(seen);
                    t0 = lowbit_now_us();
                    continue;
                }
                if ((++n & 63) == 0) {
                    t = lowbit_now_us() - t0;
                    if (t >= limit && !atomic_load_explicit(&g_keep_awake, memory_order_relaxed)) break;
                    if (t >= PAUSE_US) lowbit_yield();
                }
                lowbit_cpu_relax();
            }
            if (gen == seen) {
                lowbit_mutex_lock(&P.lock);
                atomic_fetch_add(&P.sleepers, 1);
                while ((gen = atomic_load(&P.generation)) == seen && !atomic_load(&g_keep_awake))
                    lowbit_cond_wait(&P.wake, &P.lock);
                atomic_fetch_sub(&P.sleepers, 1);
                lowbit_mutex_unlock(&P.lock);
                if (gen == seen) continue; /* woken to stay awake: spin again */
            }
        }
        seen = gen;
        ra_seen = atomic_load_explicit(&P.ra_gen, memory_order_relaxed); /* older hints are stale */
        int nslots = atomic_load(&P.nslots);
        if (own < nslots) run_tasks(gen, own, nslots);
    }
}

int lowbit_pool_keep_awake(int on) {
    if (!on) {
        int v = atomic_load(&g_keep_awake);
        while (v > 0 && !atomic_compare_exchange_weak(&g_keep_awake, &v, v - 1)) {
        }
        return v > 0 ? v - 1 : 0;
    }
    /* seq_cst: a worker about to sleep either sees the hold or is counted in `sleepers` */
    const int v = atomic_fetch_add(&g_keep_awake, 1);
    if (v == 0 && atomic_load(&P.sleepers) > 0) {
        lowbit_mutex_lock(&P.lock);
        lowbit_cond_broadcast(&P.wake);
        lowbit_mutex_unlock(&P.lock);
    }
    return v + 1;
}

/* The default thread count and how it was chosen, settled once (first use) unless set. */
static lowbit_mutex g_threads_lock = LOWBIT_MUTEX_INIT;
static char g_threads_origin[400]; /* a reason (< 256) and a note on a bad PYLOWBIT_THREADS */

int lowbit_get_threads(void) {
    int t = atomic_load(&g_default_threads);
    if (t > 0) return t;
    lowbit_mutex_lock(&g_threads_lock);
    t = atomic_load(&g_default_threads);
    if (t == 0) {
        const char *env = getenv("PYLOWBIT_THREADS");
        char *end = NULL;
        long v = env && *env ? strtol(env, &end, 10) : 0;
        if (env && *env && *end == 0 && v > 0 && v <= MAX_THREADS) {
            t = (int)v;
            snprintf(g_threads_origin, sizeof g_threads_origin, "PYLOWBIT_THREADS=%s", env);
        } else {
            char why[256];
            t = lowbit_detect_threads(why, sizeof why);
            if (t > MAX_THREADS) t = MAX_THREADS;
            if (t < 1) t = 1;
            if (env && *env)
                snprintf(g_threads_origin, sizeof g_threads_origin,
                         "%s; PYLOWBIT_THREADS=%.32s ignored (not an integer in 1..%d)", why, env,
                         MAX_THREADS);
            else
                snprintf(g_threads_origin, sizeof g_threads_origin, "%s", why);
        }
        atomic_store(&g_default_threads, t);
    }
    lowbit_mutex_unlock(&g_threads_lock);
    return t;
}

const char *lowbit_threads_origin(void) {
    (void)lowbit_get_threads();
    return g_threads_origin;
}

int lowbit_set_threads(int threads) {
    if (threads <= 0 || threads > MAX_THREADS) return LOWBIT_EINVAL;
    lowbit_mutex_lock(&g_threads_lock);
    atomic_store(&g_default_threads, threads);
    snprintf(g_threads_origin, sizeof g_threads_origin, "set_threads(%d)", threads);
    lowbit_mutex_unlock(&g_threads_lock);
    return LOWBIT_OK;
}

/* A fork()ed child (Python multiprocessing) has none of the workers: start afresh. */
static void after_fork_child(void) {
    lowbit_mutex_init(&P.busy);
    lowbit_mutex_init(&P.lock);
    lowbit_cond_init(&P.wake);
    lowbit_cond_init(&P.done_cv);
    P.nworkers = 0;
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.caller_sleeping, 0);
}

static void register_atfork(void) { lowbit_on_fork_child(after_fork_child); }

int lowbit_pool_slots(int64_t ntasks, int threads) {
    if (threads <= 0) threads = lowbit_get_threads();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > ntasks) threads = (int)ntasks;
    return threads > 1 ? threads : 1;
}

void lowbit_parallel_for(int64_t ntasks, lowbit_task_fn fn, void *ctx, int threads) {
    if (ntasks <= 0) return;
    threads = lowbit_pool_slots(ntasks, threads);
    if (threads <= 1 || ntasks >= ((int64_t)1 << 32) || !lowbit_mutex_trylock(&P.busy)) {
        for (int64_t i = 0; i < ntasks; i++) fn(ctx, i);
        return;
    }
    (void)spin_us(); /* read the environment here, not in a worker */
    static lowbit_once once = LOWBIT_ONCE_INIT;
    lowbit_once_run(&once, register_atfork);
    while (P.nworkers < threads - 1) {
        if (lowbit_thread_start(worker_main, (void *)(intptr_t)P.nworkers) != 0) break;
        P.nworkers++;
    }
    const int nslots = threads - 1 < P.nworkers ? threads : P.nworkers + 1;
    const uint32_t gen = atomic_load(&P.generation) + 1;
    P.fn = fn;
    P.ctx = ctx;
    P.ntasks = ntasks;
    atomic_store(&P.done, 0);
    atomic_store(&P.nslots, nslots);
    for (int s = 0; s < nslots; s++) { /* equal contiguous ranges */
        uint64_t b = (uint64_t)(ntasks * s / nslots), e = (uint64_t)(ntasks * (s + 1) / nslots);
        atomic_store(&P.slots[s].end, (uint64_t)gen << 32 | e);
        atomic_store(&P.slots[s].next, (uint64_t)gen << 32 | b);
    }
    atomic_store(&P.generation, gen); /* seq_cst: ordered before the read of `sleepers` */
    if (atomic_load(&P.sleepers) > 0) {
        lowbit_mutex_lock(&P.lock);
        lowbit_cond_broadcast(&P.wake);
        lowbit_mutex_unlock(&P.lock);
    }
    run_tasks(gen, 0, nslots);
    /* Wait only for tasks a worker has taken: they are under way, so spin (pause, then yield
     * the core in case the worker is waiting for it), then sleep. */
    if (atomic_load(&P.done) < ntasks) {
        double t0 = lowbit_now_us(), t;
        const double limit = spin_us() > 50 ? spin_us() : 50;
        int n = 0;
        while (atomic_load(&P.done) < ntasks) {
            if ((++n & 63) == 0) {
                t = lowbit_now_us() - t0;
                if (t >= limit) break;
                if (t >= PAUSE_US) lowbit_yield();
            }
            lowbit_cpu_relax();
        }
        if (atomic_load(&P.done) < ntasks) {
            lowbit_mutex_lock(&P.lock);
            atomic_store(&P.caller_sleeping, 1);
            while (atomic_load(&P.done) < ntasks) lowbit_cond_wait(&P.done_cv, &P.lock);
            atomic_store(&P.caller_sleeping, 0);
            lowbit_mutex_unlock(&P.lock);
        }
    }
    lowbit_mutex_unlock(&P.busy);
}
