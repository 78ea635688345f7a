/* The POSIX side of platform.h: Linux, macOS and the other Unix systems (built empty on Windows). */
#if !defined(_WIN32)
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h" /* LOWBIT_LINUX */
#include "platform.h"

#if defined(LOWBIT_LINUX)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

void *lowbit_alloc_pages(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, n >= HUGE_PAGE ? HUGE_PAGE : 64, n) != 0) return NULL;
#if defined(LOWBIT_LINUX) && defined(MADV_HUGEPAGE)
    /* Transparent huge pages (honoured when THP is "always" or "madvise"), asked before the first
     * touch; a hint: refused is fine. */
    if (n >= HUGE_PAGE) (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

void lowbit_free_pages(void *p, size_t n) {
    (void)n;
    free(p);
}

int lowbit_online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

double lowbit_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

void lowbit_yield(void) { sched_yield(); }

typedef struct {
    void (*fn)(void *);
    void *arg;
} thread_start;

static void *thread_main(void *p) {
    thread_start s = *(thread_start *)p;
    free(p);
    s.fn(s.arg);
    return NULL;
}

int lowbit_thread_start(void (*fn)(void *), void *arg) {
    thread_start *s = (thread_start *)malloc(sizeof *s);
    if (!s) return -1;
    s->fn = fn;
    s->arg = arg;
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, s) != 0) {
        free(s);
        return -1;
    }
    pthread_detach(t);
    return 0;
}

void lowbit_on_fork_child(void (*fn)(void)) { pthread_atfork(NULL, NULL, fn); }
#else
typedef int lowbit_platform_posix_unused; /* ISO C: a translation unit declares something */
#endif
