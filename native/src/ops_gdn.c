/* The Gated-DeltaNet (qwen35) ops, declared in lowbit/ops.h: argument checks, the active ISA's
 * loops (ops_gdn-inl.h, built once per ISA, chosen by the kernel selector) and the split of the
 * delta rule over the thread pool by V heads. */
#include "lowbit/ops.h"

#include "internal.h"
#include "ops_gdn-inl.h"

#include <math.h>
#include <stdlib.h>

static const gdn_kernels *gdn_active(void) { return lowbit_active_kernels()->gdn; }

int lowbit_ssm_conv(const float *x, const float *w, float *state, int64_t T, int64_t C, int64_t K,
                    float *out) {
    if (!x || !w || !out || T < 0 || C < 0 || K < 1 || (K > 1 && !state)) return LOWBIT_EINVAL;
    gdn_active()->ssm_conv(x, w, state, T, C, K, out);
    return LOWBIT_OK;
}

int lowbit_l2_norm(const float *x, int64_t rows, int64_t n, float eps, float *y) {
    if (!x || !y || rows < 0 || n <= 0 || !(eps >= 0)) return LOWBIT_EINVAL;
    gdn_active()->l2_norm(x, rows, n, eps, y);
    return LOWBIT_OK;
}

/* A handful of values a token: libm, in every build. */
int lowbit_gdn_gates(const float *b, const float *a, const float *ssm_a, const float *dt_bias,
                     int64_t T, int64_t Hv, float *beta, float *g) {
    if (!b || !a || !ssm_a || !dt_bias || !beta || !g || T < 0 || Hv < 0) return LOWBIT_EINVAL;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < Hv; h++) {
            const float x = a[t * Hv + h] + dt_bias[h];
            const float sp = x > 20.0f ? x : log1pf(expf(x)); /* softplus, ggml's cut at 20 */
            beta[t * Hv + h] = ops_sigmoid(b[t * Hv + h]);
            g[t * Hv + h] = ssm_a[h] * sp;
        }
    return LOWBIT_OK;
}

/* One task of lowbit_gated_delta_rule: the V heads [Hv i / ntasks, Hv (i + 1) / ntasks), each
 * computed alone (the same bits for any split). */
typedef struct {
    gdn_args a;
    const gdn_kernels *kern;
    int64_t ntasks;
    float *scratch; /* chunked: gdn_chunk_floats(d) per task */
} gdn_job;

static void gdn_task(void *ctx, int64_t i) {
    const gdn_job *j = (const gdn_job *)ctx;
    const int64_t h0 = j->a.Hv * i / j->ntasks, h1 = j->a.Hv * (i + 1) / j->ntasks;
    for (int64_t h = h0; h < h1; h++) {
        if (j->scratch)
            j->kern->delta_rule_chunked(&j->a, h, j->scratch + i * gdn_chunk_floats(j->a.d));
        else
            j->kern->delta_rule(&j->a, h);
    }
}

/* Below this many state updates (T * Hv * d * d) one thread does it: the pool's wake-up costs
 * more than a second thread saves. */
#define GDN_PARALLEL_MIN (1 << 16)

int lowbit_gated_delta_rule(const float *q, const float *k, const float *v, const float *g,
                            const float *beta, float *state, int64_t T, int64_t Hk, int64_t Hv,
                            int64_t d, float *out, int threads, int chunked) {
    if (!q || !k || !v || !g || !beta || !state || !out) return LOWBIT_EINVAL;
    if (T < 0 || Hk <= 0 || Hv <= 0 || Hv % Hk || d <= 0 || chunked < -1 || chunked > 1)
        return LOWBIT_EINVAL;
    if (T == 0) return LOWBIT_OK;
    /* auto: token by token (the chunked form did not measure faster, docs/PERFORMANCE.md) */
    const int use_chunked = chunked == 1;
    gdn_job job = {{q, k, v, g, beta, state, out, T, Hk, Hv, d, 1.0f / sqrtf((float)d)},
                   gdn_active(), 1, NULL};
    if (threads != 1 && T * Hv * d * d >= GDN_PARALLEL_MIN) {
        const int nt = threads > 0 ? threads : lowbit_get_threads();
        job.ntasks = Hv < 4 * (int64_t)nt ? Hv : 4 * (int64_t)nt; /* 4 per thread: balance */
    }
    if (use_chunked) {
        job.scratch = malloc((size_t)(job.ntasks * gdn_chunk_floats(d)) * sizeof(float));
        if (!job.scratch) return LOWBIT_ENOMEM;
    }
    if (job.ntasks == 1)
        gdn_task(&job, 0);
    else
        lowbit_parallel_for(job.ntasks, gdn_task, &job, threads);
    free(job.scratch);
    return LOWBIT_OK;
}

int lowbit_gated_rms_norm_silu(const float *o, const float *w, const float *z, int64_t rows,
                               int64_t n, float eps, float *out) {
    if (!o || !w || !z || !out || rows < 0 || n <= 0 || !(eps >= 0)) return LOWBIT_EINVAL;
    gdn_active()->gated_rms_norm_silu(o, w, z, rows, n, eps, out);
    return LOWBIT_OK;
}

int lowbit_sigmoid_mul(const float *x, const float *gate, int64_t n, float *out) {
    if (!x || !gate || !out || n < 0) return LOWBIT_EINVAL;
    gdn_active()->sigmoid_mul(x, gate, n, out);
    return LOWBIT_OK;
}
