/* Internal plumbing shared by the reference code, the SIMD variants and the dispatcher. */
#ifndef LOWBIT_INTERNAL_H
#define LOWBIT_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lowbit/lowbit.h"

/* Linux-only facilities (sysfs topology, sched_getaffinity, getauxval, madvise huge pages) are used
 * only under LOWBIT_LINUX.  A LOWBIT_PORTABLE build leaves it undefined, so that the fallbacks the
 * other systems take are built and tested on Linux too. */
#if defined(__linux__) && !defined(LOWBIT_PORTABLE)
#define LOWBIT_LINUX 1
#endif

/* The machine's default thread count (topology.c); writes how it was chosen into why. */
int lowbit_detect_threads(char *why, size_t why_len);
#include "act_rules.h"
#include "fp16.h"
#include "kernel_table.h"
#include "packed.h"
#include "pool.h"

#endif /* LOWBIT_INTERNAL_H */
