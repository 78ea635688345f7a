/* Public GEMV / GEMM entry points: argument checks, activation quantization, splitting rows over
 * the thread pool, and the per-tensor scale of I2_S. */
#include <stdlib.h>

#include "internal.h"

/* Rows per task: big enough to amortize the task hand-out, small enough to balance two cores. */
#define ROWS_PER_TASK 64

int lowbit_quantize_act(const float *x, int64_t n, int64_t group, int8_t *q, float *d, int32_t *s) {
    if (!x || !q || !d || !s || n < 0 || group <= 0) return LOWBIT_EINVAL;
    if (n % group) return LOWBIT_ESIZE;
    lowbit_active_kernels()->quantize_act(x, n, group, q, d, s);
    return LOWBIT_OK;
}

/* ---- one job description shared by the GEMV and GEMM paths ------------------------------------ */

typedef struct {
    const lowbit_kernels *k;
    int type, kidx;
    const void *w;
    int64_t rows, cols, row_bytes;
    const lowbit_act *a; /* quantized activations (batch of them) */
    const float *x;      /* float activations (F32/F16 weights) */
    int64_t batch;
    float *y;
    float row_scale; /* I2_S per-tensor scale, else 1 */
} job;

static void run_chunk(void *ctx, int64_t t) {
    const job *J = (const job *)ctx;
    int64_t r0 = t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK;
    if (r1 > J->rows) r1 = J->rows;
    for (int64_t b = 0; b < (J->kidx < 0 ? J->batch : 1); b++) {
        float *yb = J->y + b * J->rows;
        if (J->type == LOWBIT_TYPE_F32)
            J->k->gemv_f32((const float *)J->w, J->cols, r0, r1, J->x + b * J->cols, yb + r0);
        else if (J->type == LOWBIT_TYPE_F16)
            J->k->gemv_f16((const uint16_t *)J->w, J->cols, r0, r1, J->x + b * J->cols, yb + r0);
    }
    if (J->kidx < 0) return;
    if (J->batch == 1)
        J->k->gemv[J->kidx](J->w, J->row_bytes, r0, r1, J->a, J->y + r0);
    else
        J->k->gemm[J->kidx](J->w, J->row_bytes, r0, r1, J->a, J->batch, J->y, J->rows);
    if (J->row_scale != 1.0f)
        for (int64_t b = 0; b < J->batch; b++)
            for (int64_t r = r0; r < r1; r++) J->y[b * J->rows + r] *= J->row_scale;
}

static int check_matrix(int type, const void *w, int64_t rows, int64_t cols, int64_t *row_bytes) {
    if (!w || rows < 0 || cols < 0) return LOWBIT_EINVAL;
    if (!lowbit_type_known(type) || type == LOWBIT_TYPE_Q8_K) return LOWBIT_ETYPE;
    int64_t rb = lowbit_row_bytes(type, cols);
    if (rb < 0) return (int)rb;
    *row_bytes = rb;
    return LOWBIT_OK;
}

static void run_job(job *J, int threads) {
    if (J->type == LOWBIT_TYPE_I2_S) {
        memcpy(&J->row_scale, (const uint8_t *)J->w + J->rows * J->row_bytes, 4);
    } else {
        J->row_scale = 1.0f;
    }
    int64_t ntasks = (J->rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    lowbit_parallel_for(ntasks, run_chunk, J, threads);
}

int lowbit_gemm_act(int type, const void *w, int64_t rows, int64_t cols, const lowbit_act *a,
                    int64_t batch, float *y, int threads) {
    int64_t rb;
    int st = check_matrix(type, w, rows, cols, &rb);
    if (st) return st;
    if (!a || !y || batch < 0) return LOWBIT_EINVAL;
    int kidx = lowbit_kernel_index(type);
    if (kidx < 0) return LOWBIT_ETYPE;
    for (int64_t b = 0; b < batch; b++)
        if (a[b].n != cols || a[b].group != lowbit_act_group(type)) return LOWBIT_ESIZE;
    job J = {lowbit_active_kernels(), type, kidx, w, rows, cols, rb, a, NULL, batch, y, 1.0f};
    run_job(&J, threads);
    return LOWBIT_OK;
}

int lowbit_gemm(int type, const void *w, int64_t rows, int64_t cols, const float *x, int64_t batch,
                float *y, int threads) {
    int64_t rb;
    int st = check_matrix(type, w, rows, cols, &rb);
    if (st) return st;
    if (!x || !y || batch < 0) return LOWBIT_EINVAL;
    if (batch == 0 || rows == 0) return LOWBIT_OK;
    const lowbit_kernels *k = lowbit_active_kernels();
    int kidx = lowbit_kernel_index(type);
    if (kidx < 0) { /* float weights: float activations */
        job J = {k, type, -1, w, rows, cols, rb, NULL, x, batch, y, 1.0f};
        run_job(&J, threads);
        return LOWBIT_OK;
    }
    const int64_t G = lowbit_act_group(type);
    if (cols % G) return LOWBIT_ESIZE;
    const int64_t ng = cols / G;
    /* One allocation for codes, scales, sums and descriptors of the whole batch. */
    size_t bytes = (size_t)batch * ((size_t)cols + (size_t)ng * 8 + sizeof(lowbit_act)) + 64;
    uint8_t *mem = (uint8_t *)malloc(bytes);
    if (!mem) return LOWBIT_ENOMEM;
    lowbit_act *acts = (lowbit_act *)mem;
    float *d = (float *)(acts + batch);
    int32_t *s = (int32_t *)(d + batch * ng);
    int8_t *q = (int8_t *)(s + batch * ng);
    for (int64_t b = 0; b < batch; b++) {
        k->quantize_act(x + b * cols, cols, G, q + b * cols, d + b * ng, s + b * ng);
        acts[b] = (lowbit_act){q + b * cols, d + b * ng, s + b * ng, cols, G};
    }
    job J = {k, type, kidx, w, rows, cols, rb, acts, NULL, batch, y, 1.0f};
    run_job(&J, threads);
    free(mem);
    return LOWBIT_OK;
}

int lowbit_gemv(int type, const void *w, int64_t rows, int64_t cols, const float *x, float *y,
                int threads) {
    return lowbit_gemm(type, w, rows, cols, x, 1, y, threads);
}
