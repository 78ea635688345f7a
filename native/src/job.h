/* A GEMV / GEMM job over the thread pool: its description, shared by the one-matrix entry points
 * (api.c) and the several-matrices ones (api_multi.c), and the steps both take (job.c). */
#ifndef LOWBIT_JOB_H
#define LOWBIT_JOB_H

#include "internal.h"

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
    int64_t task_rows; /* rows of a task (paired: of each of its two ranges) */
    int paired;
    /* paired tasks' kernel (pair_kernel) */
    lowbit_pair_fn pair;
    const float *row_factor; /* I2_S (i2s_exponents): per batch item, in place of row_scale */
} job;

/* The rows of task t: [r[0], r[1]) and, paired, its twin tile [r[2], r[3]) (empty: r[2] == r[3]). */
void lowbit_job_task_rows(const job *J, int64_t t, int64_t r[4]);
/* Task t of a job (a lowbit_parallel_for task) */
void lowbit_job_run_chunk(void *ctx, int64_t t);
/* The job's row tasks: one row tile each, or paired (a tile and its twin) where `pair` allows it
 * and there are two tiles or more. */
void lowbit_job_set_pairing(job *J, int pair);
/* The per-tensor scale and row tiles of a job. */
void lowbit_job_prepare(job *J);
/* Whether the job should take larger tasks (lowbit_job_widen) */
int lowbit_job_widens(const job *J);
/* Tasks of whole tiles as large as `threads` threads balance: one on one thread (batch 1, unpaired) */
void lowbit_job_widen(job *J, int threads);
/* Bytes lowbit_job_i2s_exponents needs for a job, 64 of slack for alignment; and the I2_S
 * activations it makes there (job.c) */
size_t lowbit_job_i2s_bytes(const job *J);
void lowbit_job_i2s_exponents(job *J, uint8_t *mem);
/* Weight bytes the job reads, times the batch: what decides how many threads pay off. */
double lowbit_job_work(const job *J);
/* Threads for `work` and the column tiles (returned; tile width in *bt) for `row_tasks` row tiles
 * of a batch (job.c) */
int64_t lowbit_plan_tiles(double work, int64_t row_tasks, int64_t batch, int *threads, int64_t *bt);
/* Bytes of `batch` quantized activation rows laid out by lowbit_act_layout, 64 of slack for
 * alignment; and the layout: `batch` rows quantized with group G and rule `rule` into mem
 * (descriptors, scales, sums, codes), returning the descriptors. */
size_t lowbit_act_bytes(int64_t batch, int64_t cols, int64_t G);
lowbit_act *lowbit_act_layout(const lowbit_kernels *k, const float *x, int64_t batch, int64_t cols,
                              int64_t G, int rule, uint8_t *mem);

#endif /* LOWBIT_JOB_H */
