/* A persistent thread pool: workers are started once and reused by every call.
 *
 * A decode step issues hundreds of small GEMVs, so waking workers must cost microseconds: a worker
 * spins on the job generation counter for a while before it sleeps on a condition variable.  One job
 * runs at a time; a caller that finds the pool busy (another Python thread) runs its job itself,
 * which keeps concurrent callers correct without deadlock. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

#define MAX_THREADS 256
#define SPIN_ROUNDS 20000

static struct {
    pthread_mutex_t busy; /* held by the thread that owns the current job */
    pthread_mutex_t lock; /* guards sleeping / waking */
    pthread_cond_t wake;
    pthread_cond_t done_cv;
    int nworkers;          /* started worker threads (the caller is not counted) */
    _Atomic uint64_t generation;
    _Atomic int64_t next;  /* next task index to take */
    _Atomic int active;    /* workers still inside the current job */
    int wanted;            /* workers taking part in the current job */
    int64_t ntasks;
    lowbit_task_fn fn;
    void *ctx;
} P = {.busy = PTHREAD_MUTEX_INITIALIZER,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .done_cv = PTHREAD_COND_INITIALIZER};

static _Atomic int g_default_threads = 0;

static void run_tasks(void) {
    for (;;) {
        int64_t i = atomic_fetch_add(&P.next, 1);
        if (i >= P.ntasks) break;
        P.fn(P.ctx, i);
    }
}

static void *worker_main(void *arg) {
    const int id = (int)(intptr_t)arg;
    uint64_t seen = 0;
    for (;;) {
        uint64_t gen;
        int spins = 0;
        while ((gen = atomic_load(&P.generation)) == seen) {
            if (++spins < SPIN_ROUNDS) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
                continue;
            }
            pthread_mutex_lock(&P.lock);
            while (atomic_load(&P.generation) == seen) pthread_cond_wait(&P.wake, &P.lock);
            pthread_mutex_unlock(&P.lock);
        }
        seen = gen;
        if (id < P.wanted) {
            run_tasks();
            if (atomic_fetch_sub(&P.active, 1) == 1) {
                pthread_mutex_lock(&P.lock);
                pthread_cond_signal(&P.done_cv);
                pthread_mutex_unlock(&P.lock);
            }
        }
    }
    return NULL;
}

int lowbit_get_threads(void) {
    int t = atomic_load(&g_default_threads);
    if (t > 0) return t;
    const char *env = getenv("PYLOWBIT_THREADS");
    if (env && atoi(env) > 0) {
        t = atoi(env);
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        t = n > 0 ? (int)n : 1;
    }
    if (t > MAX_THREADS) t = MAX_THREADS;
    atomic_store(&g_default_threads, t);
    return t;
}

int lowbit_set_threads(int threads) {
    if (threads <= 0 || threads > MAX_THREADS) return LOWBIT_EINVAL;
    atomic_store(&g_default_threads, threads);
    return LOWBIT_OK;
}

void lowbit_parallel_for(int64_t ntasks, lowbit_task_fn fn, void *ctx, int threads) {
    if (ntasks <= 0) return;
    if (threads <= 0) threads = lowbit_get_threads();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > ntasks) threads = (int)ntasks;
    if (threads <= 1 || pthread_mutex_trylock(&P.busy) != 0) {
        for (int64_t i = 0; i < ntasks; i++) fn(ctx, i);
        return;
    }
    while (P.nworkers < threads - 1) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, (void *)(intptr_t)P.nworkers) != 0) break;
        pthread_detach(t);
        P.nworkers++;
    }
    int helpers = threads - 1 < P.nworkers ? threads - 1 : P.nworkers;
    P.fn = fn;
    P.ctx = ctx;
    P.ntasks = ntasks;
    P.wanted = helpers;
    atomic_store(&P.next, 0);
    atomic_store(&P.active, helpers);
    pthread_mutex_lock(&P.lock);
    atomic_fetch_add(&P.generation, 1);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.lock);
    run_tasks();
    /* Wait for the helpers: spin briefly (they finish within microseconds of us), then sleep. */
    for (int spins = 0; atomic_load(&P.active) > 0 && spins < SPIN_ROUNDS; spins++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    if (atomic_load(&P.active) > 0) {
        pthread_mutex_lock(&P.lock);
        while (atomic_load(&P.active) > 0) pthread_cond_wait(&P.done_cv, &P.lock);
        pthread_mutex_unlock(&P.lock);
    }
    pthread_mutex_unlock(&P.busy);
}
