/* Several matrices on one input in one dispatch (lowbit_matrix_gemm_multi, _glu) and the
 * read-ahead of the next such job's first tiles (lowbit_matrix_readahead). */
#include <stdatomic.h>
#include <stdlib.h>

#include "job.h"
#include "lowbit/ops.h"

/* ---- several matrices on one input, one dispatch ---------------------------------------------
 * A decode step multiplies one vector by q, k and v, then another by gate and up: as separate calls
 * that is five pool dispatches (wake, join) and five quantizations of the same input.  Here the
 * input is quantized once per activation group (and rule) and the tiles of all matrices, one matrix after the
 * other, form one task list, split over the threads like one matrix: each thread still streams one
 * contiguous run of weights.  (Not interleaved by gate and up tiles:
 * docs/PERFORMANCE.md#multi-dispatch.)  GLU mode (gate, up): whichever thread finishes the second of
 * the two tiles of a row range applies act(gate) * up to it, so the activation runs on every
 * thread too. */

typedef struct {
    job part[LOWBIT_MULTI_MAX];
    int64_t first[LOWBIT_MULTI_MAX + 1]; /* tasks of part j: [first[j], first[j + 1]) */
    int act;                             /* GLU mode: the lowbit_act_kind; -1 otherwise */
    _Atomic int32_t *tiles_done;         /* GLU mode: per gate tile, how many of (gate, up) are done */
} multi_job;

static void run_multi_chunk(void *ctx, int64_t t) {
    const multi_job *M = (const multi_job *)ctx;
    int j = 0;
    while (t >= M->first[j + 1]) j++;
    const int64_t tile = t - M->first[j];
    lowbit_job_run_chunk((void *)&M->part[j], tile);
    /* acq_rel: the second finisher sees the other tile's outputs */
    if (M->act < 0 || atomic_fetch_add_explicit(&M->tiles_done[tile], 1, memory_order_acq_rel) != 1)
        return;
    const job *G = &M->part[0], *U = &M->part[1];
    int64_t r[4]; /* gate and up pair alike (run_multi) */
    lowbit_job_task_rows(G, tile, r);
    int64_t c0 = (tile / G->row_tasks) * G->bt, c1 = c0 + G->bt;
    if (c1 > G->batch) c1 = G->batch;
    for (int64_t b = c0; b < c1; b++)
        for (int h = 0; h < 4; h += 2) {
            float *g = G->y + b * G->rows + r[h];
            lowbit_act_mul(M->act, g, U->y + b * U->rows + r[h], r[h + 1] - r[h], g);
        }
}

/* Activations quantized on the stack up to this many bytes (a decode step's vectors), else malloc. */
#define MULTI_STACK_BYTES (24 << 10)

/* The job of run_multi without its activations: parts, pairing, tiles, task ranges, threads.
 * Shared with lowbit_matrix_readahead, which must see the same tasks. */
static int multi_plan(multi_job *M, const lowbit_matrix *const *ms, int n, int64_t batch, int act,
                      int *threads) {
    if (!ms || batch < 0 || n < 1 || n > LOWBIT_MULTI_MAX) return LOWBIT_EINVAL;
    for (int j = 0; j < n; j++) {
        if (!ms[j]) return LOWBIT_EINVAL;
        if (ms[j]->cols != ms[0]->cols) return LOWBIT_ESIZE;
    }
    if (act >= 0 && n != 2) return LOWBIT_EINVAL; /* GLU: gate and up */
    if (act >= 0 && ms[0]->rows != ms[1]->rows) return LOWBIT_ESIZE;
    const lowbit_kernels *k = lowbit_active_kernels();
    M->act = act;
    double work = 0;
    int64_t row_tasks = 0;
    for (int j = 0; j < n; j++) {
        const lowbit_matrix *m = ms[j];
        job *J = &M->part[j];
        *J = (job){.k = k, .type = m->type, .kidx = m->kidx, .w = m->w, .m = m->packed ? m : NULL,
                   .rows = m->rows, .cols = m->cols, .batch = batch, .row_scale = 1.0f};
        if (!m->packed) J->row_bytes = lowbit_row_bytes(m->type, m->cols);
        lowbit_job_prepare(J);
    }
    if (act >= 0 && M->part[0].paired != M->part[1].paired) /* GLU: one counter per (gate, up) task */
        for (int j = 0; j < 2; j++) lowbit_job_set_pairing(&M->part[j], 0);
    for (int j = 0; j < n; j++) {
        work += lowbit_job_work(&M->part[j]);
        row_tasks += M->part[j].row_tasks;
    }
    int64_t bt = 0;
    const int64_t ncol = lowbit_plan_tiles(work, row_tasks, batch > 0 ? batch : 1, threads, &bt);
    /* GLU: gate and up widen together or not at all (one counter per task of both) */
    int widen[LOWBIT_MULTI_MAX];
    for (int j = 0; j < n; j++) widen[j] = lowbit_job_widens(&M->part[j]);
    if (act >= 0 && widen[0] != widen[1]) widen[0] = widen[1] = 0;
    for (int j = 0; j < n; j++)
        if (widen[j]) lowbit_job_widen(&M->part[j], *threads); /* batch 1: ncol stays 1 */
    M->first[0] = 0;
    for (int j = 0; j < n; j++) {
        M->part[j].bt = bt;
        M->first[j + 1] = M->first[j] + M->part[j].row_tasks * ncol;
    }
    return LOWBIT_OK;
}

static int run_multi(const lowbit_matrix *const *ms, int n, const float *x, int64_t batch,
                     float *const *ys, int act, int threads) {
    if (!x || !ys) return LOWBIT_EINVAL;
    multi_job M;
    int st = multi_plan(&M, ms, n, batch, act, &threads);
    if (st) return st;
    for (int j = 0; j < n; j++)
        if (!ys[j]) return LOWBIT_EINVAL;
    const int64_t cols = ms[0]->cols;
    if (batch == 0) return LOWBIT_OK;
    /* One quantization per distinct (activation group, rule) -- I2_S and PQ2_0 share group 128
     * but not its rule -- (float weights take x itself). */
    int64_t groups[LOWBIT_MULTI_MAX];
    int rules[LOWBIT_MULTI_MAX];
    int ngroups = 0, gi[LOWBIT_MULTI_MAX];
    size_t bytes = 0;
    for (int j = 0; j < n; j++) {
        gi[j] = -1;
        if (ms[j]->kidx < 0) continue;
        const int64_t G = lowbit_act_group(ms[j]->type);
        const int rule = lowbit_act_rule_of_type(ms[j]->type);
        if (G <= 0 || cols % G) return LOWBIT_ESIZE;
        int g = 0;
        while (g < ngroups && (groups[g] != G || rules[g] != rule)) g++;
        if (g == ngroups) {
            rules[ngroups] = rule;
            groups[ngroups++] = G;
            bytes += lowbit_act_bytes(batch, cols, G);
        }
        gi[j] = g;
    }
    for (int j = 0; j < n; j++)
        if (ms[j]->type == LOWBIT_TYPE_I2_S) bytes += lowbit_job_i2s_bytes(&M.part[j]);
    const size_t counters = act >= 0 ? (size_t)(M.first[1] + 1) * sizeof(int32_t) : 0;
    _Alignas(64) uint8_t stack[MULTI_STACK_BYTES];
    uint8_t *mem = bytes + counters <= sizeof stack ? stack : (uint8_t *)malloc(bytes + counters);
    if (!mem) return LOWBIT_ENOMEM;
    lowbit_act *acts[LOWBIT_MULTI_MAX];
    uint8_t *p = mem;
    const lowbit_kernels *k = M.part[0].k; /* the plan's kernels quantize too */
    for (int g = 0; g < ngroups; g++) {
        acts[g] = lowbit_act_layout(k, x, batch, cols, groups[g], rules[g], p);
        p = (uint8_t *)(((uintptr_t)(p + lowbit_act_bytes(batch, cols, groups[g]) - 64) + 63) & ~(uintptr_t)63);
    }
    for (int j = 0; j < n; j++) {
        M.part[j].x = x;
        M.part[j].y = ys[j];
        if (gi[j] >= 0) M.part[j].a = acts[gi[j]];
        if (M.part[j].type == LOWBIT_TYPE_I2_S) {
            lowbit_job_i2s_exponents(&M.part[j], p);
            p = (uint8_t *)(((uintptr_t)(p + lowbit_job_i2s_bytes(&M.part[j]) - 64) + 63) & ~(uintptr_t)63);
        }
    }
    M.tiles_done = NULL;
    if (act >= 0) {
        M.tiles_done = (_Atomic int32_t *)(mem + bytes);
        for (int64_t i = 0; i < M.first[1]; i++) atomic_init(&M.tiles_done[i], 0);
    }
    lowbit_parallel_for(M.first[n], run_multi_chunk, &M, threads);
    if (mem != stack) free(mem);
    return LOWBIT_OK;
}

int lowbit_matrix_gemm_multi(const lowbit_matrix *const *ms, int n, const float *x, int64_t batch,
                             float *const *ys, int threads) {
    return run_multi(ms, n, x, batch, ys, -1, threads);
}

int lowbit_matrix_gemm_glu(const lowbit_matrix *gate, const lowbit_matrix *up, int act,
                           const float *x, int64_t batch, float *y, float *y_up, int threads) {
    if (!gate || !up) return LOWBIT_EINVAL;
    if (act < LOWBIT_ACT_SILU || act > LOWBIT_ACT_GELU_TANH) return LOWBIT_EINVAL;
    if (y == y_up) return LOWBIT_EINVAL;
    const lowbit_matrix *ms[2] = {gate, up};
    float *ys[2] = {y, y_up};
    return run_multi(ms, 2, x, batch, ys, act, threads);
}

/* ---- read-ahead ------------------------------------------------------------------------------
 * Between two GEMVs of a decode step the caller normalizes, rotates, attends: a few to tens of
 * microseconds a time in which memory idles and the pool's other threads spin.  Given the next
 * job's matrices, the idle threads prefetch the first row tiles each thread will take (the task
 * plan is run_multi's own, multi_plan), so the job starts on cached weights while the streams
 * behind them ramp up. */
#define READAHEAD_TASKS 2 /* first tasks of each thread's range */

/* The weight bytes of rows [r0, r1) of a job's matrix. */
static lowbit_span rows_span(const job *J, int64_t r0, int64_t r1) {
    if (J->m) {
        const int64_t group_bytes = lowbit_packed_group_bytes(J->m); /* a row group: 4 rows */
        return (lowbit_span){J->m->codes + r0 / 4 * group_bytes, (r1 - r0 + 3) / 4 * group_bytes};
    }
    return (lowbit_span){(const uint8_t *)J->w + r0 * J->row_bytes, (r1 - r0) * J->row_bytes};
}

int lowbit_matrix_readahead(const lowbit_matrix *const *ms, int n, int act, int threads) {
    if (act < -1 || act > LOWBIT_ACT_GELU_TANH) return LOWBIT_EINVAL;
    multi_job M;
    int st = multi_plan(&M, ms, n, 1, act, &threads);
    if (st) return st;
    const int64_t ntasks = M.first[n];
    const int nslots = ntasks > 0 ? lowbit_pool_slots(ntasks, threads) : 1;
    if (nslots < 2) return LOWBIT_OK; /* one thread: none idle to read ahead */
    lowbit_span spans[LOWBIT_READAHEAD_MAX];
    int ns = 0;
    for (int d = 0; d < READAHEAD_TASKS; d++) /* depth first: every thread's first task first */
        for (int s = 0; s < nslots; s++) {
            const int64_t t = ntasks * s / nslots + d;
            if (t >= ntasks * (s + 1) / nslots) continue;
            int j = 0;
            while (t >= M.first[j + 1]) j++;
            int64_t r[4];
            lowbit_job_task_rows(&M.part[j], t - M.first[j], r);
            for (int h = 0; h < 4 && ns < LOWBIT_READAHEAD_MAX; h += 2)
                if (r[h + 1] > r[h]) spans[ns++] = rows_span(&M.part[j], r[h], r[h + 1]);
        }
    lowbit_pool_readahead(spans, ns);
    return LOWBIT_OK;
}
