/* Memory for packed matrices (platform.h, lowbit_weights_alloc).
 *
 * On Linux a matrix of WEIGHTS_MIN bytes or more is carved out of a shared slab (lowbit_alloc_pages'
 * 2 MB-aligned memory with the transparent-huge-page hint), handed out by a bump pointer.  A matrix
 * allocated alone gets huge pages only for the 2 MB-aligned part of it (none below 2 MB): a
 * model's attention matrices and the tails of the others sat in 4 KB pages, a TLB miss every 4 KB
 * of a stream read once per token.  In a slab, matrices packed one after another lie one after
 * another, all in huge pages (docs/PERFORMANCE.md#weight-slabs).
 *
 * A slab is returned to the system when its last matrix is freed; otherwise a freed matrix's whole
 * huge pages go back to the system at once, and its space is reused if it was the last one handed
 * out.
 * Elsewhere (and for small matrices, where unit tests pack thousands) lowbit_alloc_pages as is. */
#include <stdlib.h>

#include "internal.h" /* LOWBIT_LINUX */
#include "platform.h"

#define WEIGHTS_MIN ((size_t)64 << 10)

/* Under AddressSanitizer a slab's memory outside its live matrices is poisoned and each matrix is
 * followed by a redzone, so that a kernel reading past its matrix is caught as it would be in
 * memory of its own. */
#if defined(__SANITIZE_ADDRESS__)
#define LOWBIT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOWBIT_ASAN 1
#endif
#endif
#if defined(LOWBIT_ASAN)
#include <sanitizer/asan_interface.h>
#define REDZONE 64
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define REDZONE 0
#endif

#if defined(LOWBIT_LINUX)
#include <sys/mman.h> /* madvise */

#define HUGE_PAGE ((size_t)2 << 20)
#define SLAB_BYTES ((size_t)256 << 20)

typedef struct slab {
    struct slab *next;
    char *base;
    size_t size; /* bytes mapped */
    size_t used; /* bytes handed out from base on */
    size_t live; /* matrices in it not yet freed */
} slab;

static slab *g_slabs; /* the newest first */
static lowbit_mutex g_lock = LOWBIT_MUTEX_INIT;
static lowbit_once g_fork_once = LOWBIT_ONCE_INIT;

/* A fork()ed child has one thread: the lock may have been held by another one. */
static void after_fork_child(void) { lowbit_mutex_init(&g_lock); }
static void register_atfork(void) { lowbit_on_fork_child(after_fork_child); }

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* A slab of at least `need` bytes, or NULL: lowbit_alloc_pages' 2 MB-aligned huge-page memory */
static slab *slab_new(size_t need) {
    const size_t size = need > SLAB_BYTES ? round_up(need, HUGE_PAGE) : SLAB_BYTES;
    slab *s = (slab *)malloc(sizeof *s);
    char *base = s ? (char *)lowbit_alloc_pages(size) : NULL;
    if (!base) {
        free(s);
        return NULL;
    }
    ASAN_POISON_MEMORY_REGION(base, size);
    *s = (slab){NULL, base, size, 0, 0};
    return s;
}

void *lowbit_weights_alloc(size_t n) {
    if (n == 0) return NULL;
    if (n < WEIGHTS_MIN) return lowbit_alloc_pages(n);
    lowbit_once_run(&g_fork_once, register_atfork);
    const size_t need = round_up(n + REDZONE, 64);
    void *p = NULL;
    lowbit_mutex_lock(&g_lock);
    slab *s = g_slabs;
    while (s && s->size - s->used < need) s = s->next; /* the first with room */
    if (!s && (s = slab_new(need)) != NULL) {
        s->next = g_slabs;
        g_slabs = s;
    }
    if (s) {
        p = s->base + s->used;
        s->used += need;
        s->live++;
        ASAN_UNPOISON_MEMORY_REGION(p, n);
    }
    lowbit_mutex_unlock(&g_lock);
    return p;
}

void lowbit_weights_free(void *p, size_t n) {
    if (!p) return;
    if (n < WEIGHTS_MIN) {
        lowbit_free_pages(p, n);
        return;
    }
    char *const c = (char *)p;
    const size_t need = round_up(n + REDZONE, 64);
    lowbit_mutex_lock(&g_lock);
    slab **link = &g_slabs;
    while (*link && !(c >= (*link)->base && c < (*link)->base + (*link)->size)) link = &(*link)->next;
    slab *s = *link;
    if (s) ASAN_POISON_MEMORY_REGION(c, need);
    if (s && --s->live == 0) {
        *link = s->next;
        ASAN_UNPOISON_MEMORY_REGION(s->base, s->size); /* the shadow of memory given back */
        lowbit_free_pages(s->base, s->size);
        free(s);
    } else if (s) {
        /* its whole huge pages back to the system; those it shares with a neighbour stay */
        char *lo = (char *)round_up((size_t)(uintptr_t)c, HUGE_PAGE);
        char *hi = s->base + (size_t)(c + need - s->base) / HUGE_PAGE * HUGE_PAGE;
        if (hi > lo) (void)madvise(lo, (size_t)(hi - lo), MADV_DONTNEED);
        if (c + need == s->base + s->used) s->used -= need; /* the last one: its space serves the next */
    }
    lowbit_mutex_unlock(&g_lock);
}

#else

void *lowbit_weights_alloc(size_t n) { return n ? lowbit_alloc_pages(n) : NULL; }
void lowbit_weights_free(void *p, size_t n) { lowbit_free_pages(p, n); }

#endif
