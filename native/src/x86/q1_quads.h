/* Q1_0's activation quads (q1_0_avx512-inl.h, file-inl.h): a group's 32 bits of a row read as
 * 4 bytes, bit t of byte k is weight 8k + t, so the quad {t, t + 8, t + 16, t + 24} is bit t of
 * every byte; q'[32 G + 4 t + k] = q[32 G + 8 k + t] puts each quad's activation codes side by
 * side for one broadcast dword.  Reordered once per call, for NC columns, into `stack` when it
 * is large enough (LOWBIT_Q1_STACK bytes), else the heap (NULL: no memory). */
#ifndef LOWBIT_Q1_QUADS_H
#define LOWBIT_Q1_QUADS_H
#include <stdlib.h>

#include "../internal.h"

#define LOWBIT_Q1_STACK 16384

static inline int8_t *q1_quads_of(const lowbit_act *const *aq, int NC, int8_t *stack,
                                  const int8_t *qp[4]) {
    const int64_t n = aq[0]->n;
    int8_t *buf = n * NC <= LOWBIT_Q1_STACK ? stack : (int8_t *)malloc((size_t)(n * NC));
    if (!buf) return NULL;
    for (int j = 0; j < NC; j++) {
        for (int64_t g = 0; g < n; g += 32)
            for (int t = 0; t < 8; t++)
                for (int k = 0; k < 4; k++) buf[j * n + g + 4 * t + k] = aq[j]->q[g + 8 * k + t];
        qp[j] = buf + j * n;
    }
    return buf;
}
#endif
