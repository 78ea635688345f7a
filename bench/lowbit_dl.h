/* What the C bench tools share: liblowbit builds opened with dlopen (so that two builds run side
 * by side in one process) and the test data. */
#ifndef PYLOWBIT_BENCH_LOWBIT_DL_H
#define PYLOWBIT_BENCH_LOWBIT_DL_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void *open_build(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        exit(1);
    }
    return h;
}

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "missing %s\n", name);
        exit(1);
    }
    return p;
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* roughly normal: sum of 4 uniforms */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
    }
    return s;
}

#endif
