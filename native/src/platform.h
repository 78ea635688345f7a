/* The operating-system layer: what differs between POSIX systems and Windows, behind one set of
 * names, so that the rest of the library is plain C11.
 *
 *   memory   lowbit_alloc_pages / lowbit_free_pages: large blocks, huge / large pages where the
 *            system grants them, a silent fallback where it does not
 *   threads  lowbit_mutex, lowbit_cond, lowbit_once (static initializers), detached threads,
 *            yield, a monotonic clock, the fork hook
 *   CPU      online CPU count, CPUID / XGETBV, pause, prefetch, popcount
 *   libm     lowbit_fmaf, where the C library's fmaf is not correctly rounded
 *
 * POSIX: pthreads, posix_memalign (+ madvise on Linux), sysconf (platform_posix.c and the inline
 * wrappers below).  Windows: Win32 itself (SRWLOCK, CONDITION_VARIABLE, InitOnceExecuteOnce,
 * _beginthreadex, VirtualAlloc; platform_win32.c), which every Windows compiler has (MSVC,
 * clang-cl, mingw-w64, zig cc) without a runtime DLL to ship (winpthreads would be one) and, unlike
 * C11 <threads.h> (absent from older MSVC and mingw-w64 runtimes), with static initializers.
 * <windows.h> stays out of this header: the Windows handles are pointer-sized structs that the
 * Win32 calls accept as-is (SRWLOCK, CONDITION_VARIABLE and INIT_ONCE are one pointer each, all
 * zero when initialized). */
#ifndef LOWBIT_PLATFORM_H
#define LOWBIT_PLATFORM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define LOWBIT_X86 1
#include <immintrin.h> /* _mm_pause, _mm_prefetch: SSE2, every x86-64 CPU */
#endif

/* ---- memory ------------------------------------------------------------------------------- */

/* n bytes (n > 0), 64-byte aligned, NULL when out of memory.  From 2 MB on, huge / large pages
 * where the system grants them: Linux 2 MB aligned with a transparent-huge-page hint, Windows from
 * VirtualAlloc (large pages when the process may lock memory, else 64 KB aligned ordinary ones).
 * Freed with lowbit_free_pages(p, n), given the same n: the size decides how it was obtained. */
void *lowbit_alloc_pages(size_t n);
void lowbit_free_pages(void *p, size_t n);
/* lowbit_weights_alloc / _free, the same for a packed matrix: lowbit.h, weight_slabs.c */

/* ---- CPU count and time ------------------------------------------------------------------- */

int lowbit_online_cpus(void); /* logical CPUs online (all processor groups on Windows), >= 1 */
double lowbit_now_us(void);   /* a monotonic clock, microseconds */
void lowbit_yield(void);      /* give the core to another runnable thread */

/* ---- once, mutex, condition variable, threads ----------------------------------------------- */

#if defined(_WIN32)
typedef struct { void *opaque; } lowbit_mutex; /* an SRWLOCK */
typedef struct { void *opaque; } lowbit_cond;  /* a CONDITION_VARIABLE */
typedef struct { void *opaque; } lowbit_once;  /* an INIT_ONCE */
#define LOWBIT_MUTEX_INIT {0}
#define LOWBIT_COND_INIT {0}
#define LOWBIT_ONCE_INIT {0}
void lowbit_once_run(lowbit_once *once, void (*fn)(void));
void lowbit_mutex_init(lowbit_mutex *m);
void lowbit_mutex_lock(lowbit_mutex *m);
int lowbit_mutex_trylock(lowbit_mutex *m); /* 1 if taken */
void lowbit_mutex_unlock(lowbit_mutex *m);
void lowbit_cond_init(lowbit_cond *c);
void lowbit_cond_wait(lowbit_cond *c, lowbit_mutex *m);
void lowbit_cond_signal(lowbit_cond *c);
void lowbit_cond_broadcast(lowbit_cond *c);
#else
#include <pthread.h>
typedef pthread_mutex_t lowbit_mutex;
typedef pthread_cond_t lowbit_cond;
typedef pthread_once_t lowbit_once;
#define LOWBIT_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define LOWBIT_COND_INIT PTHREAD_COND_INITIALIZER
#define LOWBIT_ONCE_INIT PTHREAD_ONCE_INIT
static inline void lowbit_once_run(lowbit_once *once, void (*fn)(void)) { pthread_once(once, fn); }
static inline void lowbit_mutex_init(lowbit_mutex *m) { pthread_mutex_init(m, NULL); }
static inline void lowbit_mutex_lock(lowbit_mutex *m) { pthread_mutex_lock(m); }
static inline int lowbit_mutex_trylock(lowbit_mutex *m) { return pthread_mutex_trylock(m) == 0; }
static inline void lowbit_mutex_unlock(lowbit_mutex *m) { pthread_mutex_unlock(m); }
static inline void lowbit_cond_init(lowbit_cond *c) { pthread_cond_init(c, NULL); }
static inline void lowbit_cond_wait(lowbit_cond *c, lowbit_mutex *m) { pthread_cond_wait(c, m); }
static inline void lowbit_cond_signal(lowbit_cond *c) { pthread_cond_signal(c); }
static inline void lowbit_cond_broadcast(lowbit_cond *c) { pthread_cond_broadcast(c); }
#endif

/* Start fn(arg) on a new detached thread; 0 on success. */
int lowbit_thread_start(void (*fn)(void *), void *arg);
/* fn runs in the child of a fork() (POSIX; Windows has no fork: nothing to do). */
void lowbit_on_fork_child(void (*fn)(void));
#if defined(_WIN32)
/* Windows' default thread count rule (topology.c); 0 if Windows does not say. */
int lowbit_windows_threads(char *why, size_t why_len);
#endif

/* ---- CPU instructions ---------------------------------------------------------------------- */

#if defined(LOWBIT_X86)
#define lowbit_cpu_relax() _mm_pause()
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define lowbit_cpu_relax() __asm__ __volatile__("yield")
#else
#define lowbit_cpu_relax() ((void)0)
#endif

/* A read prefetch into every cache level: only a hint. */
#if defined(__GNUC__) || defined(__clang__)
#define lowbit_prefetch(p) __builtin_prefetch((p), 0, 3)
#elif defined(LOWBIT_X86)
#define lowbit_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define lowbit_prefetch(p) ((void)(p))
#endif

static inline int lowbit_popcount64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_popcountll(x);
#else /* MSVC's __popcnt64 needs the POPCNT instruction, which x86-64 does not guarantee */
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* fmaf, correctly rounded (one rounding), without trusting the C library's: mingw-w64's
 * (libmingwex) adds split float products in float precision.  The product of two floats is exact
 * in double (24 + 24 bits <= 53); their sum with c is rounded to odd in double (TwoSum's error term
 * tells an inexact sum, whose last bit is then forced to 1 toward the error), and a double rounded
 * to odd rounds to float exactly as the true sum would (53 >= 2 * 24 + 2: Boldo and Melquiond,
 * "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd").  Needs
 * round-to-nearest double arithmetic without contraction (-ffp-contract=off, /fp:precise). */
static inline float lowbit_fmaf_emulated(float a, float b, float c) {
    const double p = (double)a * (double)b, s = p + (double)c;
    if (!(s - s == 0)) return (float)s; /* inf or NaN */
    const double t = s - p, e = (p - (s - t)) + ((double)c - t); /* s + e == p + c exactly */
    uint64_t bits;
    memcpy(&bits, &s, 8);
    if (e != 0 && !(bits & 1)) { /* inexact and even: the odd neighbour on e's side */
        bits += (e > 0) == (s > 0) ? 1 : (uint64_t)-1;
        double odd;
        memcpy(&odd, &bits, 8);
        return (float)odd;
    }
    return (float)s;
}
#if defined(__MINGW32__)
#define lowbit_fmaf lowbit_fmaf_emulated
#else
#define lowbit_fmaf fmaf
#endif

#if defined(LOWBIT_X86)
/* CPUID leaf / subleaf into r = {eax, ebx, ecx, edx}; the caller checks the leaf against
 * lowbit_cpuid_max() first. */
void lowbit_cpuid(unsigned leaf, unsigned subleaf, unsigned r[4]);
unsigned lowbit_cpuid_max(void);
/* XCR0, the register state the OS saves; only valid when CPUID.1:ECX.OSXSAVE is set. */
uint64_t lowbit_xgetbv0(void);
#endif

#endif /* LOWBIT_PLATFORM_H */
