/* Public GEMV / GEMM entry points of one matrix: argument checks, activation quantization, the
 * job over the thread pool (job.h), and the per-tensor scale of I2_S. */
#include <stdlib.h>

#include "job.h"

static int check_matrix(int type, const void *w, int64_t rows, int64_t cols, int64_t *row_bytes) {
    if (!w || rows < 0 || cols < 0) return LOWBIT_EINVAL;
    if (!lowbit_type_known(type) || type == LOWBIT_TYPE_Q8_K) return LOWBIT_ETYPE;
    int64_t rb = lowbit_row_bytes(type, cols);
    if (rb < 0) return (int)rb;
    *row_bytes = rb;
    return LOWBIT_OK;
}

/* lowbit_job_i2s_exponents' memory on the stack up to this many bytes (a decode step's), else malloc. */
#define I2S_STACK_BYTES (4 << 10)

static int run_job(job *J, int threads) {
    lowbit_job_prepare(J);
    if (J->batch <= 0 || J->rows <= 0) return LOWBIT_OK;
    _Alignas(64) uint8_t stack[I2S_STACK_BYTES];
    uint8_t *heap = NULL;
    if (J->type == LOWBIT_TYPE_I2_S && J->a) {
        const size_t nb = lowbit_job_i2s_bytes(J);
        uint8_t *mem = nb <= sizeof stack ? stack : (heap = (uint8_t *)malloc(nb));
        if (!mem) return LOWBIT_ENOMEM;
        lowbit_job_i2s_exponents(J, mem);
    }
    const int64_t ncol = lowbit_plan_tiles(lowbit_job_work(J), J->row_tasks, J->batch, &threads, &J->bt);
    if (lowbit_job_widens(J)) lowbit_job_widen(J, threads); /* batch 1: ncol stays 1 */
    lowbit_parallel_for(J->row_tasks * ncol, lowbit_job_run_chunk, J, threads);
    free(heap);
    return LOWBIT_OK;
}

/* Quantize `batch` activation rows for weight type `type` (its group and rule) into one
 * allocation (*mem_out, to free). */
static lowbit_act *quantize_batch(const lowbit_kernels *k, int type, const float *x, int64_t batch,
                                  int64_t cols, void **mem_out) {
    const int64_t G = lowbit_act_group(type);
    uint8_t *mem = (uint8_t *)malloc(lowbit_act_bytes(batch, cols, G));
    *mem_out = mem;
    return mem ? lowbit_act_layout(k, x, batch, cols, G, lowbit_act_rule_of_type(type), mem) : NULL;
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
