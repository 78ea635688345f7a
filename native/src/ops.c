/* Decoder ops between the matrix products (declared in lowbit/ops.h).
 *
 * Plain loops written so that gcc -O3 vectorizes them without -ffast-math: float sums are split
 * into 8 independent partial sums (a fixed order the compiler may keep in one vector register).
 * expf stays a scalar libm call in lowbit_softmax; SiLU, GELU and the attention loop use the
 * vectorizable exp of ops_attention-inl.h.  The attention loop, SiLU * up and GELU * up are also
 * built with AVX2 (x86/ops_avx2.c): kernel-list entries (role OP) the selector chooses among.
 * The attention loop is split over the thread pool by query rows when it is large. */
#include "lowbit/ops.h"

#include "internal.h"
#include "ops_attention-inl.h"
#include "ops_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int lowbit_rms_norm(const float *x, const float *w, int64_t rows, int64_t n, float eps, float *y) {
    if (!x || !y || rows < 0 || n <= 0 || !(eps >= 0)) return LOWBIT_EINVAL;
    const lowbit_rms_norm_fn row = lowbit_active_kernels()->rms_norm;
    for (int64_t r = 0; r < rows; r++) row(x + r * n, w, n, eps, y + r * n);
    return LOWBIT_OK;
}

int lowbit_rope(float *x, int64_t T, int64_t heads, int64_t hd, const float *cos, const float *sin,
                int64_t half, int neox) {
    if (!x || !cos || !sin || T < 0 || heads < 0 || hd <= 0 || half < 0 || 2 * half > hd)
        return LOWBIT_EINVAL;
    for (int64_t t = 0; t < T; t++) {
        const float *c = cos + t * half, *s = sin + t * half;
        for (int64_t h = 0; h < heads; h++) {
            float *p = x + (t * heads + h) * hd;
            if (neox) { /* pairs (i, i + half): two contiguous runs, vectorizes */
                float *a = p, *b = p + half;
                for (int64_t i = 0; i < half; i++) {
                    const float ai = a[i], bi = b[i];
                    a[i] = ai * c[i] - bi * s[i];
                    b[i] = ai * s[i] + bi * c[i];
                }
            } else {
                for (int64_t i = 0; i < half; i++) {
                    const float ai = p[2 * i], bi = p[2 * i + 1];
                    p[2 * i] = ai * c[i] - bi * s[i];
                    p[2 * i + 1] = ai * s[i] + bi * c[i];
                }
            }
        }
    }
    return LOWBIT_OK;
}

/* Softmax of one row in place; returns 0 if every entry is -inf (nothing to normalize). */
static int softmax_row(float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    if (m == -INFINITY) return 0;
    float s = 0;
    for (int64_t j = 0; j < n; j++) {
        x[j] = expf(x[j] - m);
        s += x[j];
    }
    const float inv = 1.0f / s;
    for (int64_t j = 0; j < n; j++) x[j] *= inv;
    return 1;
}

int lowbit_softmax(float *x, int64_t rows, int64_t n) {
    if (!x || rows < 0 || n <= 0) return LOWBIT_EINVAL;
    for (int64_t r = 0; r < rows; r++)
        if (!softmax_row(x + r * n, n)) return LOWBIT_EINVAL;
    return LOWBIT_OK;
}

/* One task of a threaded lowbit_attention: a contiguous run of query rows, with its own scores. */
typedef struct {
    const float *q, *kc, *vc;
    int64_t H, Hkv, hd, vd, ctx, pos, window, rows, ntasks;
    float scale, *out, *p; /* p: ntasks scratches of attn_scratch_floats(pos, T) */
    lowbit_attention_fn loop;
} attn_job;

static void attn_task(void *ctx, int64_t i) {
    const attn_job *j = (const attn_job *)ctx;
    /* whole groups of the H / Hkv rows that share a key head: a loop runs those together */
    const int64_t G = j->H / j->Hkv, groups = j->rows / G;
    const int64_t r0 = groups * i / j->ntasks * G, r1 = groups * (i + 1) / j->ntasks * G;
    float *p = j->p + i * attn_scratch_floats(j->pos, j->rows / j->H);
    j->loop(j->q, j->H, j->Hkv, j->hd, j->vd, j->kc, j->vc, j->ctx, j->pos, j->window,
                   j->scale, j->out, p, r0, r1);
}

/* Below this many multiply-adds (scores and weighted sums) the pool's wake-up costs more than
 * a second thread saves: a decode step at a short context stays on the calling thread. */
#define ATTN_PARALLEL_MIN (1 << 18)

int lowbit_attention_mt(const float *q, const float *k, const float *v, int64_t T, int64_t H,
                        int64_t Hkv, int64_t hd, int64_t vd, float *kc, float *vc, int64_t ctx,
                        int64_t pos, int64_t window, float scale, float *out, int threads) {
    if (!q || !k || !v || !kc || !vc || !out) return LOWBIT_EINVAL;
    if (T <= 0 || H <= 0 || Hkv <= 0 || H % Hkv || hd <= 0 || vd <= 0 || ctx <= 0 || pos < 0 ||
        pos > ctx - T || window < 0)
        return LOWBIT_EINVAL;
    const int64_t keys = window > 0 && window < pos + T ? window : pos + T; /* per query, at most */
    const int64_t work = T * H * keys * (hd + vd);
    int64_t ntasks = 1;
    if (threads != 1 && work >= ATTN_PARALLEL_MIN) {
        const int nt = threads > 0 ? threads : lowbit_get_threads();
        ntasks = T * Hkv < 4 * (int64_t)nt ? T * Hkv : 4 * (int64_t)nt; /* 4 per thread: balance */
    }
    float *p = malloc((size_t)(ntasks * attn_scratch_floats(pos, T)) * sizeof(float));
    if (!p) return LOWBIT_ENOMEM;
    for (int64_t t = 0; t < T; t++) /* the new positions into the caches, (T, Hkv) -> (Hkv, T) */
        for (int64_t kh = 0; kh < Hkv; kh++) {
            memcpy(kc + (kh * ctx + pos + t) * hd, k + (t * Hkv + kh) * hd, (size_t)hd * sizeof(float));
            memcpy(vc + (kh * ctx + pos + t) * vd, v + (t * Hkv + kh) * vd, (size_t)vd * sizeof(float));
        }
    attn_job job = {q,     kc,  vc, H, Hkv, hd, vd, ctx, pos, window, T * H, ntasks,
                    scale, out, p,  lowbit_active_kernels()->attention};
    if (ntasks == 1)
        attn_task(&job, 0);
    else
        lowbit_parallel_for(ntasks, attn_task, &job, threads);
    free(p);
    return LOWBIT_OK;
}

int lowbit_attention(const float *q, const float *k, const float *v, int64_t T, int64_t H,
                     int64_t Hkv, int64_t hd, int64_t vd, float *kc, float *vc, int64_t ctx,
                     int64_t pos, int64_t window, float scale, float *out) {
    return lowbit_attention_mt(q, k, v, T, H, Hkv, hd, vd, kc, vc, ctx, pos, window, scale, out, 1);
}

int lowbit_act_mul(int act, const float *gate, const float *up, int64_t n, float *out) {
    if (!gate || !up || !out || n < 0) return LOWBIT_EINVAL;
    switch (act) {
    case LOWBIT_ACT_SILU: {
        const int64_t i = lowbit_active_kernels()->silu_mul(gate, up, n, out); /* a prefix, same bits */
        ops_silu_mul(gate + i, up + i, n - i, out + i);
        break;
    }
    case LOWBIT_ACT_RELU2:
        for (int64_t i = 0; i < n; i++) {
            const float r = gate[i] > 0 ? gate[i] : 0.0f;
            out[i] = r * r * up[i];
        }
        break;
    case LOWBIT_ACT_GELU_TANH: {
        const int64_t i = lowbit_active_kernels()->gelu_mul(gate, up, n, out); /* a prefix, same bits */
        ops_gelu_mul(gate + i, up + i, n - i, out + i);
        break;
    }
    default:
        return LOWBIT_EINVAL;
    }
    return LOWBIT_OK;
}

int lowbit_add(const float *a, const float *b, int64_t n, float *out) {
    if (!a || !b || !out || n < 0) return LOWBIT_EINVAL;
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    return LOWBIT_OK;
}
