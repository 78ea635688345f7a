/* The Windows side of platform.h, on Win32 itself (built empty elsewhere), and Windows' default
 * thread count (lowbit_windows_threads, used by topology.c). */
#if defined(_WIN32)
#if !defined(_WIN32_WINNT) || _WIN32_WINNT < 0x0601
#undef _WIN32_WINNT
#define _WIN32_WINNT 0x0601 /* Windows 7: GetActiveProcessorCount, GetLogicalProcessorInformationEx */
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#include <malloc.h>  /* _aligned_malloc */
#include <process.h> /* _beginthreadex */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "platform.h"

_Static_assert(sizeof(lowbit_mutex) == sizeof(SRWLOCK), "lowbit_mutex holds an SRWLOCK");
_Static_assert(sizeof(lowbit_cond) == sizeof(CONDITION_VARIABLE), "lowbit_cond holds a CONDITION_VARIABLE");
_Static_assert(sizeof(lowbit_once) == sizeof(INIT_ONCE), "lowbit_once holds an INIT_ONCE");

/* ---- memory: large blocks from VirtualAlloc, large pages when the process may lock memory ---- */

#define LARGE_BLOCK ((size_t)2 << 20)

static INIT_ONCE g_large_once = INIT_ONCE_STATIC_INIT;
static size_t g_large_page; /* 0: no large pages for this process */

/* Large pages need the "Lock pages in memory" right (SeLockMemoryPrivilege), which an
 * administrator grants and which is disabled in a token until enabled: enable it if held. */
static BOOL CALLBACK large_pages_init(PINIT_ONCE once, PVOID param, PVOID *ctx) {
    (void)once, (void)param, (void)ctx;
    const size_t page = GetLargePageMinimum();
    HANDLE token;
    if (page == 0 || !OpenProcessToken(GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &token))
        return TRUE;
    TOKEN_PRIVILEGES tp;
    tp.PrivilegeCount = 1;
    tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
    if (LookupPrivilegeValueA(NULL, "SeLockMemoryPrivilege", &tp.Privileges[0].Luid) &&
        AdjustTokenPrivileges(token, FALSE, &tp, 0, NULL, NULL) && GetLastError() == ERROR_SUCCESS)
        g_large_page = page; /* ERROR_NOT_ALL_ASSIGNED: the right is not held */
    CloseHandle(token);
    return TRUE;
}

void *lowbit_alloc_pages(size_t n) {
    if (n < LARGE_BLOCK) return _aligned_malloc(n ? n : 1, 64);
    InitOnceExecuteOnce(&g_large_once, large_pages_init, NULL, NULL);
    if (g_large_page) {
        const size_t rounded = (n + g_large_page - 1) / g_large_page * g_large_page;
        void *p = VirtualAlloc(NULL, rounded, MEM_RESERVE | MEM_COMMIT | MEM_LARGE_PAGES, PAGE_READWRITE);
        if (p) return p; /* no contiguous physical memory left: ordinary pages */
    }
    return VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE); /* 64 KB aligned */
}

void lowbit_free_pages(void *p, size_t n) {
    if (!p) return;
    if (n < LARGE_BLOCK) _aligned_free(p);
    else VirtualFree(p, 0, MEM_RELEASE); /* large or ordinary pages alike */
}

/* ---- CPU count, time ------------------------------------------------------------------------ */

int lowbit_online_cpus(void) {
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int)n : 1;
}

double lowbit_now_us(void) {
    static LARGE_INTEGER freq; /* the same value from every thread: a benign race */
    LARGE_INTEGER t;
    if (freq.QuadPart == 0) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (double)t.QuadPart * 1e6 / (double)freq.QuadPart;
}

void lowbit_yield(void) { SwitchToThread(); }

/* ---- once, locks, threads ------------------------------------------------------------------- */

static BOOL CALLBACK once_trampoline(PINIT_ONCE once, PVOID param, PVOID *ctx) {
    (void)once, (void)ctx;
    (*(void (**)(void))param)();
    return TRUE;
}

void lowbit_once_run(lowbit_once *once, void (*fn)(void)) {
    InitOnceExecuteOnce((PINIT_ONCE)once, once_trampoline, (PVOID)&fn, NULL);
}

void lowbit_mutex_init(lowbit_mutex *m) { InitializeSRWLock((PSRWLOCK)m); }
void lowbit_mutex_lock(lowbit_mutex *m) { AcquireSRWLockExclusive((PSRWLOCK)m); }
int lowbit_mutex_trylock(lowbit_mutex *m) { return TryAcquireSRWLockExclusive((PSRWLOCK)m) != 0; }
void lowbit_mutex_unlock(lowbit_mutex *m) { ReleaseSRWLockExclusive((PSRWLOCK)m); }
void lowbit_cond_init(lowbit_cond *c) { InitializeConditionVariable((PCONDITION_VARIABLE)c); }
void lowbit_cond_wait(lowbit_cond *c, lowbit_mutex *m) {
    SleepConditionVariableSRW((PCONDITION_VARIABLE)c, (PSRWLOCK)m, INFINITE, 0);
}
void lowbit_cond_signal(lowbit_cond *c) { WakeConditionVariable((PCONDITION_VARIABLE)c); }
void lowbit_cond_broadcast(lowbit_cond *c) { WakeAllConditionVariable((PCONDITION_VARIABLE)c); }

typedef struct {
    void (*fn)(void *);
    void *arg;
} thread_start;

/* _beginthreadex rather than CreateThread: the C runtime's per-thread state is set up for it. */
static unsigned __stdcall thread_main(void *p) {
    thread_start s = *(thread_start *)p;
    free(p);
    s.fn(s.arg);
    return 0;
}

int lowbit_thread_start(void (*fn)(void *), void *arg) {
    thread_start *s = (thread_start *)malloc(sizeof *s);
    if (!s) return -1;
    s->fn = fn;
    s->arg = arg;
    uintptr_t h = _beginthreadex(NULL, 0, thread_main, s, 0, NULL);
    if (h == 0) {
        free(s);
        return -1;
    }
    CloseHandle((HANDLE)h); /* detached: the thread runs on */
    return 0;
}

void lowbit_on_fork_child(void (*fn)(void)) { (void)fn; }

/* ---- the default thread count --------------------------------------------------------------- */

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* One thread per physical core this process may run on, performance cores only on a hybrid CPU
 * (the cores of the highest efficiency class), from GetLogicalProcessorInformationEx and the
 * process's affinity mask; 0 if Windows does not say. */
int lowbit_windows_threads(char *why, size_t why_len) {
    /* The affinity mask is that of the process's one processor group; a process spread over
     * several groups (machines of more than 64 logical CPUs) is allowed every CPU. */
    DWORD_PTR proc_mask = 0, sys_mask = 0;
    USHORT groups[4], ngroups = 4;
    int have_mask = GetProcessAffinityMask(GetCurrentProcess(), &proc_mask, &sys_mask) && proc_mask &&
                    GetProcessGroupAffinity(GetCurrentProcess(), &ngroups, groups) && ngroups == 1;
    DWORD len = 0;
    GetLogicalProcessorInformationEx(RelationProcessorCore, NULL, &len);
    if (len == 0) return 0;
    char *buf = (char *)malloc(len);
    if (!buf) return 0;
    if (!GetLogicalProcessorInformationEx(RelationProcessorCore,
                                          (PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX)buf, &len)) {
        free(buf);
        return 0;
    }
    /* Two passes: the highest efficiency class among the allowed cores, then its cores. */
    int best = -1, cores = 0, cpus = 0, left_out = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (DWORD off = 0; off < len;) {
            const SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX *e =
                (const SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX *)(buf + off);
            if (e->Size == 0) break;
            off += e->Size;
            if (e->Relationship != RelationProcessorCore || e->Processor.GroupCount < 1) continue;
            const GROUP_AFFINITY *g = &e->Processor.GroupMask[0];
            KAFFINITY mask = g->Mask;
            if (have_mask) mask = g->Group == groups[0] ? mask & proc_mask : 0;
            if (!mask) continue;
            /* EfficiencyClass is the byte after Flags (older SDK headers call it Reserved[0]);
             * higher is faster, all 0 on a CPU of one core type. */
            const int cls = ((const BYTE *)&e->Processor.Flags)[1];
            const int n = lowbit_popcount64((uint64_t)mask);
            if (pass == 0) {
                best = cls > best ? cls : best;
                cpus += n;
            } else if (cls == best) {
                cores++;
            } else {
                left_out += n;
            }
        }
    }
    free(buf);
    if (cores == 0) return 0;
    int k = snprintf(why, why_len, "%d %s core%s of %d allowed logical CPU%s (Windows processor "
                     "information: SMT siblings once", cores, left_out ? "performance" : "physical",
                     plural(cores), cpus, plural(cpus));
    if (k >= 0 && (size_t)k < why_len && left_out)
        k += snprintf(why + k, why_len - k, ", %d efficiency-core CPU%s left out", left_out,
                      plural(left_out));
    if (k >= 0 && (size_t)k < why_len) snprintf(why + k, why_len - k, ")");
    return cores;
}
#else
typedef int lowbit_platform_win32_unused; /* ISO C: a translation unit declares something */
#endif
