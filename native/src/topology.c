/* The default thread count: one thread per physical performance core this process may run on.
 *
 * A decode step streams the weights once per token, so it is bound by memory bandwidth: an SMT
 * sibling adds no bandwidth and competes for its core's load ports, and an efficiency core joining a
 * job whose tasks are cut into equal ranges makes every other thread wait for its slower share.
 *  - Linux: the CPUs of the affinity mask (taskset, cgroup cpusets), SMT siblings counted once
 *    (cpuN/topology/core_cpus_list), on Intel hybrid CPUs only those of the cpu_core PMU
 *    (/sys/devices/cpu_core/cpus; the E-cores are listed under cpu_atom).  A mask holding only
 *    efficiency cores keeps them all: they are what the process was given.
 *  - Apple: hw.perflevel0.physicalcpu (the performance cluster), else hw.physicalcpu.
 *  - Windows: the cores of GetLogicalProcessorInformationEx within the process's affinity mask,
 *    SMT siblings counted once, on hybrid CPUs only those of the highest efficiency class
 *    (platform_win32.c).
 *  - Elsewhere, and whenever the above cannot be read: the online logical CPUs.
 * Linux-only code is under LOWBIT_LINUX, which a LOWBIT_PORTABLE build leaves undefined, so that the
 * fallbacks other systems take run in a Linux test too. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "platform.h" /* lowbit_online_cpus, lowbit_mutex */
#if defined(LOWBIT_LINUX)
#include <sched.h>
#endif

#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#define MAX_CPUS 4096 /* CPU numbers at or above it are ignored */

typedef struct {
    uint64_t w[MAX_CPUS / 64];
} cpu_bits;

static void bits_set(cpu_bits *s, long cpu) {
    if (cpu >= 0 && cpu < MAX_CPUS) s->w[cpu / 64] |= (uint64_t)1 << (cpu % 64);
}

static int bits_has(const cpu_bits *s, int cpu) { return (int)(s->w[cpu / 64] >> (cpu % 64)) & 1; }

static int bits_count(const cpu_bits *s) {
    int n = 0;
    for (int i = 0; i < MAX_CPUS / 64; i++) n += lowbit_popcount64(s->w[i]);
    return n;
}

/* Parse a kernel CPU list ("0-3,8,10-11\n") into *s; 0 on success, -1 if malformed or empty. */
static int parse_cpulist(const char *text, cpu_bits *s) {
    memset(s, 0, sizeof *s);
    const char *p = text;
    int any = 0;
    while (*p && *p != '\n') {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0) return -1;
        p = end;
        b = a;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a) return -1;
            p = end;
        }
        for (long c = a; c <= b && c < MAX_CPUS; c++) bits_set(s, c);
        any = 1;
        if (*p == ',') p++;
        else if (*p && *p != '\n') return -1;
    }
    return any ? 0 : -1;
}

/* The CPU list in the file root/rel (printf-style rel); 0 on success. */
static int read_cpulist(cpu_bits *s, const char *root, const char *rel, int arg) {
    char path[1024], name[256], text[8192];
    snprintf(name, sizeof name, rel, arg);
    snprintf(path, sizeof path, "%s/%s", root, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return parse_cpulist(text, s);
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* One thread per physical core among the online CPUs of root that are in `allowed` (NULL: all),
 * performance cores only on a hybrid CPU; 0 if root lists no such CPU. */
static int from_sysfs(const char *root, const cpu_bits *allowed_in, char *why, size_t why_len) {
    static cpu_bits allowed, perf, eff, core_of, seen; /* static: 512 B each; callers serialized */
    if (read_cpulist(&allowed, root, "devices/system/cpu/online", 0) != 0) return 0;
    if (allowed_in)
        for (int i = 0; i < MAX_CPUS / 64; i++) allowed.w[i] &= allowed_in->w[i];
    const int n_allowed = bits_count(&allowed);
    if (n_allowed == 0) return 0;
    /* Intel hybrid: both PMUs present.  Non-hybrid CPUs have neither (their PMU is devices/cpu). */
    int hybrid = read_cpulist(&perf, root, "devices/cpu_core/cpus", 0) == 0 &&
                 read_cpulist(&eff, root, "devices/cpu_atom/cpus", 0) == 0;
    int n_perf_allowed = 0;
    if (hybrid)
        for (int c = 0; c < MAX_CPUS; c++) n_perf_allowed += bits_has(&allowed, c) && bits_has(&perf, c);
    const int skip_eff = hybrid && n_perf_allowed > 0;
    memset(&seen, 0, sizeof seen);
    int cores = 0, untold = 0, left_out = 0;
    for (int c = 0; c < MAX_CPUS; c++) {
        if (!bits_has(&allowed, c)) continue;
        if (skip_eff && !bits_has(&perf, c)) {
            left_out++;
            continue;
        }
        int first = c; /* a core is named by its lowest-numbered logical CPU */
        if (read_cpulist(&core_of, root, "devices/system/cpu/cpu%d/topology/core_cpus_list", c) == 0 ||
            read_cpulist(&core_of, root, "devices/system/cpu/cpu%d/topology/thread_siblings_list", c) == 0) {
            for (first = 0; first < MAX_CPUS && !bits_has(&core_of, first); first++) {
            }
            if (first == MAX_CPUS) first = c;
        } else {
            untold++; /* no topology for this CPU: it counts as a core of its own */
        }
        if (!bits_has(&seen, first)) {
            bits_set(&seen, first);
            cores++;
        }
    }
    int k = snprintf(why, why_len, "%d %s core%s of %d allowed logical CPU%s (Linux topology: SMT "
                     "siblings once", cores, skip_eff ? "performance" : "physical", plural(cores),
                     n_allowed, plural(n_allowed));
    if (k < 0 || (size_t)k >= why_len) return cores;
    if (skip_eff)
        k += snprintf(why + k, why_len - k, ", %d efficiency-core CPU%s left out", left_out,
                      plural(left_out));
    else if (hybrid)
        k += snprintf(why + k, why_len - k, ", only efficiency cores allowed");
    if (k >= 0 && (size_t)k < why_len && untold)
        k += snprintf(why + k, why_len - k, ", %d CPU%s without topology counted alone", untold,
                      plural(untold));
    if (k >= 0 && (size_t)k < why_len) snprintf(why + k, why_len - k, ")");
    return cores;
}

int lowbit_threads_for_topology(const char *sys_root, const char *allowed_cpus, char *why,
                                size_t why_len) {
    static lowbit_mutex lock = LOWBIT_MUTEX_INIT;
    static cpu_bits allowed;
    char scratch[8];
    if (!why || why_len == 0) {
        why = scratch;
        why_len = sizeof scratch;
    }
    why[0] = 0;
    lowbit_mutex_lock(&lock);
    int n = 0;
    if (allowed_cpus && parse_cpulist(allowed_cpus, &allowed) != 0) {
        lowbit_mutex_unlock(&lock);
        snprintf(why, why_len, "not a CPU list: '%.64s'", allowed_cpus);
        return LOWBIT_EINVAL;
    }
    if (sys_root) n = from_sysfs(sys_root, allowed_cpus ? &allowed : NULL, why, why_len);
    lowbit_mutex_unlock(&lock);
    if (n > 0) return n;
    if (allowed_cpus) {
        n = bits_count(&allowed);
        snprintf(why, why_len, "%d logical CPU%s allowed (no CPU topology)", n, plural(n));
    } else {
        n = lowbit_online_cpus();
        snprintf(why, why_len, "%d online logical CPU%s (no CPU topology)", n, plural(n));
    }
    return n;
}

#if defined(__APPLE__)
static int apple_cores(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v > 0 ? v : 0;
}
#endif

int lowbit_detect_threads(char *why, size_t why_len) {
#if defined(LOWBIT_LINUX)
    cpu_set_t set; /* sizeof: 1024 CPUs, enough for the affinity of any laptop or workstation */
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
        char list[8192];
        int k = 0;
        for (int c = 0; c < CPU_SETSIZE && k < (int)sizeof list - 16; c++)
            if (CPU_ISSET(c, &set)) k += snprintf(list + k, sizeof list - k, "%s%d", k ? "," : "", c);
        return lowbit_threads_for_topology("/sys", list, why, why_len);
    }
    return lowbit_threads_for_topology("/sys", NULL, why, why_len);
#elif defined(__APPLE__)
    int n = apple_cores("hw.perflevel0.physicalcpu");
    if (n > 0) {
        snprintf(why, why_len, "%d performance cores (hw.perflevel0.physicalcpu)", n);
        return n;
    }
    n = apple_cores("hw.physicalcpu");
    if (n > 0) {
        snprintf(why, why_len, "%d physical cores (hw.physicalcpu)", n);
        return n;
    }
    return lowbit_threads_for_topology(NULL, NULL, why, why_len);
#elif defined(_WIN32)
    const int n = lowbit_windows_threads(why, why_len);
    return n > 0 ? n : lowbit_threads_for_topology(NULL, NULL, why, why_len);
#else
    return lowbit_threads_for_topology(NULL, NULL, why, why_len);
#endif
}
