/* The steps of a GEMV / GEMM job (job.h): its tasks, pairing, tiles, I2_S scales and the
 * activation layout. */
#include <float.h>

#include "job.h"

/* The rows of task t: [r[0], r[1]) and, paired, its twin tile [r[2], r[3]) (empty: r[2] == r[3]). */
void lowbit_job_task_rows(const job *J, int64_t t, int64_t r[4]) {
    const int64_t tile = t % J->row_tasks, tr = J->task_rows;
    r[0] = tile * tr;
    r[1] = r[0] + tr < J->rows ? r[0] + tr : J->rows;
    r[2] = r[3] = 0;
    if (J->paired && (tile + J->row_tasks) * tr < J->rows) {
        r[2] = (tile + J->row_tasks) * tr;
        r[3] = r[2] + tr < J->rows ? r[2] + tr : J->rows;
    }
}

void lowbit_job_run_chunk(void *ctx, int64_t t) {
    const job *J = (const job *)ctx;
    int64_t r[4];
    lowbit_job_task_rows(J, t, r);
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

/* The job's row tasks: one row tile each, or paired (a tile and its twin) where `pair` allows it
 * and there are two tiles or more. */
void lowbit_job_set_pairing(job *J, int pair) {
    const int64_t tiles = (J->rows + J->task_rows - 1) / J->task_rows;
    J->paired = pair && tiles > 1;
    J->row_tasks = J->paired ? (tiles + 1) / 2 : tiles;
}

/* The pair kernel the active table's variant planned for a packed matrix, or NULL (no pairing). */
static lowbit_pair_fn pair_kernel(const lowbit_kernels *k, const lowbit_matrix *m) {
    return m->packed ? m->plan[k->isa].pair : NULL;
}

/* The per-tensor scale and row tiles of a job. */
void lowbit_job_prepare(job *J) {
    if (J->m) {
        J->row_scale = J->m->tensor_scale;
    } else if (J->type == LOWBIT_TYPE_I2_S) {
        memcpy(&J->row_scale, (const uint8_t *)J->w + J->rows * J->row_bytes, 4);
    } else {
        J->row_scale = 1.0f;
    }
    J->pair = J->m && J->batch == 1 ? pair_kernel(J->k, J->m) : NULL;
    J->task_rows = ROWS_PER_TASK;
    lowbit_job_set_pairing(J, J->pair != NULL);
}

/* A rows64 GEMV (Q1_0) sets up per kernel call: it takes the activation's tables out of a shared
 * cache (q1_lut_cache.h) with locked instructions, which hold back the loads behind them (the
 * next call's weights), and compares the codes.  So its tasks are as large as balance allows:
 * on one thread one call takes all the rows, on more 4 tasks a thread (the pool steals). */
int lowbit_job_widens(const job *J) {
    return J->m && J->m->rows64 && J->batch == 1 && !J->paired;
}

void lowbit_job_widen(job *J, int threads) {
    const int64_t tasks = threads == 1 ? 1 : 4 * (int64_t)threads;
    const int64_t rows = (J->rows + tasks - 1) / tasks; /* in whole tiles */
    if (rows > ROWS_PER_TASK) J->task_rows = (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK * ROWS_PER_TASK;
    lowbit_job_set_pairing(J, 0);
}

/* Bytes i2s_exponents needs for a job, 64 of slack for alignment. */
size_t lowbit_job_i2s_bytes(const job *J) {
    return (size_t)J->batch * (sizeof(lowbit_act) + sizeof(float) * (size_t)(J->cols / 128 + 1)) + 64;
}

/* I2_S activations with one scale d for the whole vector (every group's alike: S8, P2): the
 * kernels get d's power of two 2^k in every group, which makes their per-group float steps and
 * their row-sum paths exact alike (isum * 2^k), and the row's one float step takes
 * m * tensor_scale with m = d / 2^k in [1, 2) instead of the tensor scale: y = (isum * 2^k) *
 * fl(m * ts) = fl(isum * fl(d * ts)), the formats.h result whatever path a variant takes.  Other
 * activation vectors keep their scales and the tensor scale.  mem: lowbit_job_i2s_bytes(J), 64-aligned. */
void lowbit_job_i2s_exponents(job *J, uint8_t *mem) {
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
double lowbit_job_work(const job *J) {
    const int64_t row_bytes = J->m ? J->m->nbytes / (J->rows > 0 ? J->rows : 1) : J->row_bytes;
    return (double)J->rows * (double)(row_bytes > 0 ? row_bytes : J->cols) * J->batch;
}

/* Threads for `work` and the column tiles (returned; tile width in *bt) for `row_tasks` row tiles
 * of a batch: enough tasks for every thread to take several, tiles of >= 8 columns so the GEMM
 * kernels still reuse each unpacked weight across many activations. */
int64_t lowbit_plan_tiles(double work, int64_t row_tasks, int64_t batch, int *threads, int64_t *bt) {
    if (*threads <= 0) *threads = lowbit_get_threads();
    if (work / MIN_WORK_PER_THREAD < *threads) *threads = (int)(work / MIN_WORK_PER_THREAD) + 1;
    int64_t ncol = 1;
    while (row_tasks * ncol < 4 * (int64_t)*threads && batch / (2 * ncol) >= 8) ncol *= 2;
    *bt = (batch + ncol - 1) / ncol;
    return (batch + *bt - 1) / *bt;
}

/* Bytes of `batch` quantized activation rows laid out by act_layout, 64 of slack for alignment. */
size_t lowbit_act_bytes(int64_t batch, int64_t cols, int64_t G) {
    return (size_t)batch * ((size_t)cols + (size_t)(cols / G) * 8 + sizeof(lowbit_act)) + 64;
}

/* Quantize `batch` activation rows with group G and rule `rule` into mem (descriptors, scales,
 * sums, codes); returns the descriptors. */
lowbit_act *lowbit_act_layout(const lowbit_kernels *k, const float *x, int64_t batch, int64_t cols,
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
