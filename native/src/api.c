/* Public GEMV / GEMM entry points: argument checks, activation quantization, splitting rows over
 * the thread pool, and the per-tensor scale of I2_S. */
#include <float.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"
#include "lowbit/ops.h"

/* Rows per task: big enough to amortize the task hand-out, small enough to balance two cores.
 * A multiple of LOWBIT_PACK_ROWS, so a task covers whole packed row groups (at 2560 columns a task
 * is 40 KB of codes: ten pages, each thread streaming its own contiguous share of them). */
#define ROWS_PER_TASK 64
/* Weight bytes x batch below which one more thread costs more (waking it, joining it: a few
 * microseconds) than it saves: a 256 x 256 ternary matrix runs on one thread. */
#define MIN_WORK_PER_THREAD (32 << 10)

/* ---- one job description shared by the GEMV and GEMM paths ------------------------------------
 * Tasks tile rows x columns: ROWS_PER_TASK rows by `bt` activation columns (GEMM), so that a
 * batch keeps both cores busy even when a matrix has few rows.  A paired GEMV (the matrix's
 * planned pair kernel, kernel_table.h) gives task t row tile t and its twin t + row_tasks in the second
 * half of the matrix: split over the threads as usual, each thread then streams two runs of
 * memory half a matrix apart, side by side. */

typedef struct {
    const lowbit_kernels *k;
    int type, kidx;
    const void *w;
    const lowbit_matrix *m; /* packed matrix, or NULL for the file layout */
    int64_t rows, cols, row_bytes;
    const lowbit_act *a; /* quantized activations (batch of them) */
    const float *x;      /* float activations (F32/F16/BF16 weights) */
    int64_t batch;
    float *y;
    float row_scale; /* I2_S per-tensor scale, else 1 */
    int64_t row_tasks, bt;
    int paired;
    /* paired tasks' kernel (pair_kernel) */
    lowbit_pair_fn pair;
    const float *row_factor; /* I2_S (i2s_exponents): per batch item, in place of row_scale */
} job;

/* The rows of task t: [r[0], r[1]) and, paired, its twin tile [r[2], r[3]) (empty: r[2] == r[3]). */
static void task_rows(const job *J, int64_t t, int64_t r[4]) {
    const int64_t tile = t % J->row_tasks;
    r[0] = tile * ROWS_PER_TASK;
    r[1] = r[0] + ROWS_PER_TASK < J->rows ? r[0] + ROWS_PER_TASK : J->rows;
    r[2] = r[3] = 0;
    if (J->paired && (tile + J->row_tasks) * ROWS_PER_TASK < J->rows) {
        r[2] = (tile + J->row_tasks) * ROWS_PER_TASK;
        r[3] = r[2] + ROWS_PER_TASK < J->rows ? r[2] + ROWS_PER_TASK : J->rows;
    }
}

static void run_chunk(void *ctx, int64_t t) {
    const job *J = (const job *)ctx;
    int64_t r[4];
    task_rows(J, t, r);
    const int64_t r0 = r[0], r1 = r[1];
    int64_t c0 = (t / J->row_tasks) * J->bt, c1 = c0 + J->bt;
    if (c1 > J->batch) c1 = J->batch;
    if (J->kidx < 0) {
        for (int64_t b = c0; b < c1; b++) {
            float *yb = J->y + b * J->rows;
            if (J->type == LOWBIT_TYPE_F32)
                J->k->gemv_f32((const float *)J->w, J->cols, r0, r1, J->x + b * J->cols, yb + r0);
            else if (J->type == LOWBIT_TYPE_F16)
                J->k->gemv_f16((const uint16_t *)J->w, J->cols, r0, r1, J->x + b * J->cols, yb + r0);
            else if (J->type == LOWBIT_TYPE_BF16)
                J->k->gemv_bf16((const uint16_t *)J->w, J->cols, r0, r1, J->x + b * J->cols, yb + r0);
        }
        return;
    }
    if (J->m) {
        if (r[3] > r[2]) /* paired: batch 1 */
            J->pair(J->m, r0, r1, r[2], r[3], J->a, J->y);
        else if (c1 - c0 == 1)
            J->m->plan[J->k->isa].gemv(J->m, r0, r1, J->a + c0, J->y + c0 * J->rows);
        else
            J->m->plan[J->k->isa].gemm(J->m, r0, r1, J->a + c0, c1 - c0, J->y + c0 * J->rows, J->rows);
    } else if (c1 - c0 == 1) {
        J->k->gemv[J->kidx](J->w, J->row_bytes, r0, r1, J->a + c0, J->y + c0 * J->rows + r0);
    } else {
        J->k->gemm[J->kidx](J->w, J->row_bytes, r0, r1, J->a + c0, c1 - c0, J->y + c0 * J->rows,
                            J->rows);
    }
    for (int64_t b = c0; b < c1; b++) {
        const float f = J->row_factor ? J->row_factor[b] : J->row_scale;
        if (f != 1.0f)
            for (int h = 0; h < 4; h += 2)
                for (int64_t i = r[h]; i < r[h + 1]; i++) J->y[b * J->rows + i] *= f;
    }
}

static int check_matrix(int type, const void *w, int64_t rows, int64_t cols, int64_t *row_bytes) {
    if (!w || rows < 0 || cols < 0) return LOWBIT_EINVAL;
    if (!lowbit_type_known(type) || type == LOWBIT_TYPE_Q8_K) return LOWBIT_ETYPE;
    int64_t rb = lowbit_row_bytes(type, cols);
    if (rb < 0) return (int)rb;
    *row_bytes = rb;
    return LOWBIT_OK;
}

/* The job's row tasks: one row tile each, or paired (a tile and its twin) where `pair` allows it
 * and there are two tiles or more. */
static void job_set_pairing(job *J, int pair) {
    const int64_t tiles = (J->rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    J->paired = pair && tiles > 1;
    J->row_tasks = J->paired ? (tiles + 1) / 2 : tiles;
}

/* The pair kernel the active table's variant planned for a packed matrix, or NULL (no pairing). */
static lowbit_pair_fn pair_kernel(const lowbit_kernels *k, const lowbit_matrix *m) {
    return m->packed ? m->plan[k->isa].pair : NULL;
}

/* The per-tensor scale and row tiles of a job. */
static void job_prepare(job *J) {
    if (J->m) {
        J->row_scale = J->m->tensor_scale;
    } else if (J->type == LOWBIT_TYPE_I2_S) {
        memcpy(&J->row_scale, (const uint8_t *)J->w + J->rows * J->row_bytes, 4);
    } else {
        J->row_scale = 1.0f;
    }
    J->pair = J->m && J->batch == 1 ? pair_kernel(J->k, J->m) : NULL;
    job_set_pairing(J, J->pair != NULL);
}

/* Bytes i2s_exponents needs for a job, 64 of slack for alignment. */
static size_t i2s_bytes(const job *J) {
    return (size_t)J->batch * (sizeof(lowbit_act) + sizeof(float) * (size_t)(J->cols / 128 + 1)) + 64;
}

/* I2_S activations with one scale d for the whole vector (every group's alike: S8, P2): the
 * kernels get d's power of two 2^k in every group, which makes their per-group float steps and
 * their row-sum paths exact alike (isum * 2^k), and the row's one float step takes
 * m * tensor_scale with m = d / 2^k in [1, 2) instead of the tensor scale: y = (isum * 2^k) *
 * fl(m * ts) = fl(isum * fl(d * ts)), the formats.h result whatever path a variant takes.  Other
 * activation vectors keep their scales and the tensor scale.  mem: i2s_bytes(J), 64-aligned. */
static void i2s_exponents(job *J, uint8_t *mem) {
    const int64_t ng = J->cols / 128;
    lowbit_act *acts = (lowbit_act *)mem;
    float *factor = (float *)(acts + J->batch);
    float *pow2 = factor + J->batch;
    for (int64_t b = 0; b < J->batch; b++) {
        const lowbit_act *a = &J->a[b];
        acts[b] = *a;
        factor[b] = J->row_scale;
        const float d = ng > 0 ? a->d[0] : 0.0f;
        int uniform = d >= FLT_MIN && d <= FLT_MAX; /* normal: 2^k and m exact */
        for (int64_t g = 1; uniform && g < ng; g++) uniform = a->d[g] == d;
        if (!uniform) continue;
        int e;
        const float f = frexpf(d, &e); /* d = f * 2^e, f in [0.5, 1) */
        for (int64_t g = 0; g < ng; g++) pow2[b * ng + g] = ldexpf(1.0f, e - 1);
        acts[b].d = pow2 + b * ng;
        factor[b] = (2.0f * f) * J->row_scale;
    }
    J->a = acts;
    J->row_factor = factor;
}

/* Weight bytes the job reads, times the batch: what decides how many threads pay off. */
static double job_work(const job *J) {
    const int64_t row_bytes = J->m ? J->m->nbytes / (J->rows > 0 ? J->rows : 1) : J->row_bytes;
    return (double)J->rows * (double)(row_bytes > 0 ? row_bytes : J->cols) * J->batch;
}

/* Threads for `work` and the column tiles (returned; tile width in *bt) for `row_tasks` row tiles
 * of a batch: enough tasks for every thread to take several, tiles of >= 8 columns so the GEMM
 * kernels still reuse each unpacked weight across many activations. */
static int64_t plan_tiles(double work, int64_t row_tasks, int64_t batch, int *threads, int64_t *bt) {
    if (*threads <= 0) *threads = lowbit_get_threads();
    if (work / MIN_WORK_PER_THREAD < *threads) *threads = (int)(work / MIN_WORK_PER_THREAD) + 1;
    int64_t ncol = 1;
    while (row_tasks * ncol < 4 * (int64_t)*threads && batch / (2 * ncol) >= 8) ncol *= 2;
    *bt = (batch + ncol - 1) / ncol;
    return (batch + *bt - 1) / *bt;
}

/* i2s_exponents' memory on the stack up to this many bytes (a decode step's), else malloc. */
#define I2S_STACK_BYTES (4 << 10)

static int run_job(job *J, int threads) {
    job_prepare(J);
    if (J->batch <= 0 || J->rows <= 0) return LOWBIT_OK;
    _Alignas(64) uint8_t stack[I2S_STACK_BYTES];
    uint8_t *heap = NULL;
    if (J->type == LOWBIT_TYPE_I2_S && J->a) {
        const size_t nb = i2s_bytes(J);
        uint8_t *mem = nb <= sizeof stack ? stack : (heap = (uint8_t *)malloc(nb));
        if (!mem) return LOWBIT_ENOMEM;
        i2s_exponents(J, mem);
    }
    const int64_t ncol = plan_tiles(job_work(J), J->row_tasks, J->batch, &threads, &J->bt);
    lowbit_parallel_for(J->row_tasks * ncol, run_chunk, J, threads);
    free(heap);
    return LOWBIT_OK;
}

/* Bytes of `batch` quantized activation rows laid out by act_layout, 64 of slack for alignment. */
static size_t act_bytes(int64_t batch, int64_t cols, int64_t G) {
    return (size_t)batch * ((size_t)cols + (size_t)(cols / G) * 8 + sizeof(lowbit_act)) + 64;
}

/* Quantize `batch` activation rows with group G and rule `rule` into mem (descriptors, scales,
 * sums, codes); returns the descriptors. */
static lowbit_act *act_layout(const lowbit_kernels *k, const float *x, int64_t batch, int64_t cols,
                              int64_t G, int rule, uint8_t *mem) {
    const int64_t ng = cols / G;
    lowbit_act *acts = (lowbit_act *)mem;
    float *d = (float *)(acts + batch);
    int32_t *s = (int32_t *)(d + batch * ng);
    int8_t *q = (int8_t *)(s + batch * ng);
    for (int64_t b = 0; b < batch; b++) {
        k->quantize_act(x + b * cols, cols, G, rule, q + b * cols, d + b * ng, s + b * ng);
        acts[b] = (lowbit_act){q + b * cols, d + b * ng, s + b * ng, cols, G};
    }
    return acts;
}

/* Quantize `batch` activation rows for weight type `type` (its group and rule) into one
 * allocation (*mem_out, to free). */
static lowbit_act *quantize_batch(const lowbit_kernels *k, int type, const float *x, int64_t batch,
                                  int64_t cols, void **mem_out) {
    const int64_t G = lowbit_act_group(type);
    uint8_t *mem = (uint8_t *)malloc(act_bytes(batch, cols, G));
    *mem_out = mem;
    return mem ? act_layout(k, x, batch, cols, G, lowbit_act_rule_of_type(type), mem) : NULL;
}

int lowbit_gemm_act(int type, const void *w, int64_t rows, int64_t cols, const lowbit_act *a,
                    int64_t batch, float *y, int threads) {
    int64_t rb = 0;
    int st = check_matrix(type, w, rows, cols, &rb);
    if (st) return st;
    if (!a || !y || batch < 0) return LOWBIT_EINVAL;
    int kidx = lowbit_kernel_index(type);
    if (kidx < 0) return LOWBIT_ETYPE;
    for (int64_t b = 0; b < batch; b++)
        if (a[b].n != cols || a[b].group != lowbit_act_group(type)) return LOWBIT_ESIZE;
    job J = {.k = lowbit_active_kernels(), .type = type, .kidx = kidx, .w = w, .rows = rows,
             .cols = cols, .row_bytes = rb, .a = a, .batch = batch, .y = y, .row_scale = 1.0f};
    return run_job(&J, threads);
}

int lowbit_gemm(int type, const void *w, int64_t rows, int64_t cols, const float *x, int64_t batch,
                float *y, int threads) {
    int64_t rb = 0;
    int st = check_matrix(type, w, rows, cols, &rb);
    if (st) return st;
    if (!x || !y || batch < 0) return LOWBIT_EINVAL;
    if (batch == 0 || rows == 0) return LOWBIT_OK;
    const lowbit_kernels *k = lowbit_active_kernels();
    int kidx = lowbit_kernel_index(type);
    if (kidx < 0) { /* float weights: float activations */
        job J = {.k = k, .type = type, .kidx = -1, .w = w, .rows = rows, .cols = cols,
                 .row_bytes = rb, .x = x, .batch = batch, .y = y, .row_scale = 1.0f};
        run_job(&J, threads);
        return LOWBIT_OK;
    }
    const int64_t G = lowbit_act_group(type);
    if (cols % G) return LOWBIT_ESIZE;
    void *mem;
    lowbit_act *acts = quantize_batch(k, type, x, batch, cols, &mem);
    if (!acts) return LOWBIT_ENOMEM;
    job J = {.k = k, .type = type, .kidx = kidx, .w = w, .rows = rows, .cols = cols,
             .row_bytes = rb, .a = acts, .batch = batch, .y = y, .row_scale = 1.0f};
    st = run_job(&J, threads);
    free(mem);
    return st;
}

int lowbit_gemv(int type, const void *w, int64_t rows, int64_t cols, const float *x, float *y,
                int threads) {
    return lowbit_gemm(type, w, rows, cols, x, 1, y, threads);
}

/* ---- packed matrices ------------------------------------------------------------------------ */

int lowbit_matrix_gemm_act(const lowbit_matrix *m, const lowbit_act *a, int64_t batch, float *y,
                           int threads) {
    if (!m || !a || !y || batch < 0) return LOWBIT_EINVAL;
    if (!m->packed) return lowbit_gemm_act(m->type, m->w, m->rows, m->cols, a, batch, y, threads);
    for (int64_t b = 0; b < batch; b++)
        if (a[b].n != m->cols || a[b].group != m->group) return LOWBIT_ESIZE;
    if (batch == 0 || m->rows == 0) return LOWBIT_OK;
    job J = {.k = lowbit_active_kernels(), .type = m->type, .kidx = m->kidx, .m = m,
             .rows = m->rows, .cols = m->cols, .a = a, .batch = batch, .y = y, .row_scale = 1.0f};
    return run_job(&J, threads);
}

int lowbit_matrix_gemm(const lowbit_matrix *m, const float *x, int64_t batch, float *y,
                       int threads) {
    if (!m || !x || !y || batch < 0) return LOWBIT_EINVAL;
    if (!m->packed) return lowbit_gemm(m->type, m->w, m->rows, m->cols, x, batch, y, threads);
    if (batch == 0 || m->rows == 0) return LOWBIT_OK;
    void *mem;
    lowbit_act *acts = quantize_batch(lowbit_active_kernels(), m->type, x, batch, m->cols, &mem);
    if (!acts) return LOWBIT_ENOMEM;
    int st = lowbit_matrix_gemm_act(m, acts, batch, y, threads);
    free(mem);
    return st;
}

int lowbit_matrix_gemv(const lowbit_matrix *m, const float *x, float *y, int threads) {
    return lowbit_matrix_gemm(m, x, 1, y, threads);
}

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
    run_chunk((void *)&M->part[j], tile);
    /* acq_rel: the second finisher sees the other tile's outputs */
    if (M->act < 0 || atomic_fetch_add_explicit(&M->tiles_done[tile], 1, memory_order_acq_rel) != 1)
        return;
    const job *G = &M->part[0], *U = &M->part[1];
    int64_t r[4]; /* gate and up pair alike (run_multi) */
    task_rows(G, tile, r);
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
        job_prepare(J);
    }
    if (act >= 0 && M->part[0].paired != M->part[1].paired) /* GLU: one counter per (gate, up) task */
        for (int j = 0; j < 2; j++) job_set_pairing(&M->part[j], 0);
    for (int j = 0; j < n; j++) {
        work += job_work(&M->part[j]);
        row_tasks += M->part[j].row_tasks;
    }
    int64_t bt = 0;
    const int64_t ncol = plan_tiles(work, row_tasks, batch > 0 ? batch : 1, threads, &bt);
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
            bytes += act_bytes(batch, cols, G);
        }
        gi[j] = g;
    }
    for (int j = 0; j < n; j++)
        if (ms[j]->type == LOWBIT_TYPE_I2_S) bytes += i2s_bytes(&M.part[j]);
    const size_t counters = act >= 0 ? (size_t)(M.first[1] + 1) * sizeof(int32_t) : 0;
    _Alignas(64) uint8_t stack[MULTI_STACK_BYTES];
    uint8_t *mem = bytes + counters <= sizeof stack ? stack : (uint8_t *)malloc(bytes + counters);
    if (!mem) return LOWBIT_ENOMEM;
    lowbit_act *acts[LOWBIT_MULTI_MAX];
    uint8_t *p = mem;
    const lowbit_kernels *k = M.part[0].k; /* the plan's kernels quantize too */
    for (int g = 0; g < ngroups; g++) {
        acts[g] = act_layout(k, x, batch, cols, groups[g], rules[g], p);
        p = (uint8_t *)(((uintptr_t)(p + act_bytes(batch, cols, groups[g]) - 64) + 63) & ~(uintptr_t)63);
    }
    for (int j = 0; j < n; j++) {
        M.part[j].x = x;
        M.part[j].y = ys[j];
        if (gi[j] >= 0) M.part[j].a = acts[gi[j]];
        if (M.part[j].type == LOWBIT_TYPE_I2_S) {
            i2s_exponents(&M.part[j], p);
            p = (uint8_t *)(((uintptr_t)(p + i2s_bytes(&M.part[j]) - 64) + 63) & ~(uintptr_t)63);
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
            task_rows(&M.part[j], t - M.first[j], r);
            for (int h = 0; h < 4 && ns < LOWBIT_READAHEAD_MAX; h += 2)
                if (r[h + 1] > r[h]) spans[ns++] = rows_span(&M.part[j], r[h], r[h + 1]);
        }
    lowbit_pool_readahead(spans, ns);
    return LOWBIT_OK;
}
