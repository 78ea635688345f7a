/* The decoder's layer loop (declared in lowbit/decoder.h): one function per block kind, one for
 * the feed-forward block, one for a group of matrix products; decoder_run walks the layers.
 * Every step is a public liblowbit call, in the order the op-by-op decoder makes them, so the
 * bits are that decoder's.  Adding a block kind is a new block function and a case in
 * decoder_run. */
#include "lowbit/decoder.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "platform.h" /* lowbit_now_us */

/* ---- benchmark timing (lowbit_decoder_timing) ---------------------------------------------- */

static int g_timing;
static double g_recurrent_us, g_total_us;

void lowbit_decoder_timing(int enable, double *recurrent_us, double *total_us) {
    if (recurrent_us) *recurrent_us = g_recurrent_us;
    if (total_us) *total_us = g_total_us;
    g_recurrent_us = g_total_us = 0.0;
    g_timing = enable;
}

/* ---- scratch ------------------------------------------------------------------------------ */

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; } /* 64-byte pieces */

/* The run's buffers, carved out of one scratch array; each (T, width) float32. */
typedef struct scratch {
    float *h;      /* (T, d) a norm's output, the next products' input */
    float *xin;    /* (T, max(d, ff, H vd, Dv)) a group's prepared / rotated input */
    float *y[LOWBIT_GROUP_MAX]; /* group outputs: q | qkv | gate;  k | z | up;  v | beta;  alpha */
    float *q, *gate; /* (T, H hd) each: gated attention's query and gate, split per head */
    float *att;    /* (T, max(H vd, Dv)) attention / delta-rule output */
    float *dout;   /* (T, d) a block's output, before the residual add */
    float *conv;   /* (T, C) ssm_conv output */
    float *gq, *gk, *gv; /* (T, Dk), (T, Dk), (T, Dv) the delta rule's q, k, v */
    float *beta, *g; /* (T, Hv) gates */
} scratch;

/* Widths of the pieces in scratch order; returns the total floats for T tokens (and fills s if
 * base is not NULL). */
static int64_t scratch_layout(const lowbit_decoder_config *c, int64_t T, float *base, scratch *s) {
    const int64_t d = c->d_model, ff = c->n_ff, Hhd = c->n_head * c->head_dim;
    const int64_t Hvd = c->n_head * c->v_head_dim, Hv = c->ssm_v_heads;
    const int64_t Dk = c->ssm_k_heads * c->ssm_state, Dv = Hv * c->ssm_state, C = 2 * Dk + Dv;
    const int64_t widths[] = {
        d, max2(max2(d, ff), max2(Hvd, Dv)),
        max2(2 * Hhd, max2(C, ff)), max2(c->n_head_kv * c->head_dim, max2(Dv, ff)),
        max2(c->n_head_kv * c->v_head_dim, Hv), Hv,
        Hhd, Hhd, max2(Hvd, Dv), d, C, Dk, Dk, Dv, Hv, Hv,
    };
    float **slots[] = {&s->h, &s->xin, &s->y[0], &s->y[1], &s->y[2], &s->y[3], &s->q, &s->gate,
                       &s->att, &s->dout, &s->conv, &s->gq, &s->gk, &s->gv, &s->beta, &s->g};
    int64_t off = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        if (base) *slots[i] = base + off;
        off += round16(T * max2(widths[i], 1));
    }
    return off;
}

int64_t lowbit_decoder_scratch_floats(const lowbit_decoder_config *cfg, int64_t T) {
    if (!cfg || T < 0) return LOWBIT_EINVAL;
    scratch unused;
    return scratch_layout(cfg, T, NULL, &unused);
}

/* ---- a group of matrix products ----------------------------------------------------------- */

/* x rounded to BF16, nearest even, as float32 bits; a NaN stays a quiet NaN. */
static void round_bf16(const float *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u, r;
        memcpy(&u, &x[i], 4);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u)
            r = (u & 0xFFFF0000u) | 0x00400000u;
        else
            r = (u + (0x7FFFu + ((u >> 16) & 1u))) & 0xFFFF0000u;
        memcpy(&y[i], &r, 4);
    }
}

/* (T, r, Hk, ds) -> (T, Hk, r, ds), r = Hv / Hk: V head slot rho * Hk + kappa of the recurrence
 * moves to kappa * r + rho, the order ssm_out's columns were folded in. */
static void grouped_heads(const lowbit_decoder_config *c, const float *x, int64_t T, float *y) {
    const int64_t hk = c->ssm_k_heads, r = c->ssm_v_heads / hk, ds = c->ssm_state;
    for (int64_t t = 0; t < T; t++)
        for (int64_t kappa = 0; kappa < hk; kappa++)
            for (int64_t rho = 0; rho < r; rho++)
                memcpy(y + ((t * hk + kappa) * r + rho) * ds, x + ((t * r + rho) * hk + kappa) * ds,
                       (size_t)ds * sizeof(float));
}

typedef struct run_ctx {
    const lowbit_decoder_config *cfg;
    scratch s;
    lowbit_decoder_host_fn host;
    void *host_ctx;
    int threads;
} run_ctx;

/* ys[j] = in(x) . m[j]^T over the group (see lowbit_decoder_group). */
static int group_run(const run_ctx *rc, const lowbit_decoder_group *g, const float *x, int64_t T,
                     float *const *ys) {
    if (!g->m[0]) return rc->host ? rc->host(rc->host_ctx, g->host_id, x, T, ys) : LOWBIT_EINVAL;
    const float *in = x;
    const int64_t n = T * g->cols;
    if (g->prep == LOWBIT_PREP_ROUND_BF16) {
        round_bf16(x, n, rc->s.xin);
        in = rc->s.xin;
    } else if (g->prep == LOWBIT_PREP_GROUPED_HEADS) {
        grouped_heads(rc->cfg, x, T, rc->s.xin);
        in = rc->s.xin;
    }
    if (g->rot_block > 0) {
        if (in != rc->s.xin) memcpy(rc->s.xin, in, (size_t)n * sizeof(float));
        int st = lowbit_fwht_f32(rc->s.xin, T, g->cols, g->rot_block, 1, g->rot_signs,
                                 LOWBIT_FWHT_SIGNS_THEN_ROTATE, 0);
        if (st) return st;
        in = rc->s.xin;
    }
    if (g->glu)
        return lowbit_matrix_gemm_glu(g->m[0], g->m[1], rc->cfg->ffn_act, in, T, ys[0], ys[1],
                                      rc->threads);
    return lowbit_matrix_gemm_multi(g->m, g->n, in, T, ys, rc->threads);
}

/* Decode only: the pool's idle threads prefetch the group's first weights while this thread
 * does the work before its call (a hint: no effect on any result). */
static void group_readahead(const run_ctx *rc, const lowbit_decoder_group *g, int64_t T) {
    if (T == 1 && g->n > 0 && g->m[0])
        lowbit_matrix_readahead(g->m, g->n, g->glu ? rc->cfg->ffn_act : -1, rc->threads);
}

/* ---- block kinds: h (T, d) normed input -> s.dout (T, d) ------------------------------------ */

static int attention_block(const run_ctx *rc, const lowbit_decoder_layer *L, int64_t T,
                           int64_t pos, const float *cos, const float *sin) {
    const lowbit_decoder_config *c = rc->cfg;
    const scratch *s = &rc->s;
    const int64_t H = c->n_head, Hkv = c->n_head_kv, hd = c->head_dim, vd = c->v_head_dim;
    int st = group_run(rc, &L->qkv, s->h, T, s->y);
    group_readahead(rc, &L->out, T);
    float *q = s->y[0], *k = s->y[1], *gate = NULL;
    if (!st && L->kind == LOWBIT_BLOCK_GATED_ATTENTION) { /* per head: hd query, then hd gate */
        for (int64_t th = 0; th < T * H; th++) {
            memcpy(s->q + th * hd, q + 2 * th * hd, (size_t)hd * sizeof(float));
            memcpy(s->gate + th * hd, q + (2 * th + 1) * hd, (size_t)hd * sizeof(float));
        }
        q = s->q, gate = s->gate;
    }
    if (L->q_norm) {
        st = st || lowbit_rms_norm(q, L->q_norm, T * H, hd, c->eps, q);
        st = st || lowbit_rms_norm(k, L->k_norm, T * Hkv, hd, c->eps, k);
    }
    st = st || lowbit_rope(q, T, H, hd, cos, sin, c->rope_half, c->rope_neox);
    st = st || lowbit_rope(k, T, Hkv, hd, cos, sin, c->rope_half, c->rope_neox);
    st = st || lowbit_attention_mt(q, k, s->y[2], T, H, Hkv, hd, vd, L->k_cache, L->v_cache,
                                   c->ctx, pos, L->window, c->attn_scale, s->att, rc->threads);
    if (gate) st = st || lowbit_sigmoid_mul(s->att, gate, T * H * vd, s->att);
    if (L->attn_sub_norm) st = st || lowbit_rms_norm(s->att, L->attn_sub_norm, T, H * vd, c->eps, s->att);
    float *out[1] = {s->dout};
    st = st || group_run(rc, &L->out, s->att, T, out);
    return st;
}

static int gdn_block(const run_ctx *rc, const lowbit_decoder_layer *L, int64_t T) {
    const lowbit_decoder_config *c = rc->cfg;
    const scratch *s = &rc->s;
    const int64_t Hk = c->ssm_k_heads, Hv = c->ssm_v_heads, ds = c->ssm_state;
    const int64_t Dk = Hk * ds, Dv = Hv * ds, C = 2 * Dk + Dv;
    int st = group_run(rc, &L->gdn_in[0], s->h, T, s->y);
    if (L->gdn_in[1].n > 0) st = st || group_run(rc, &L->gdn_in[1], s->h, T, s->y + L->gdn_in[0].n);
    group_readahead(rc, &L->out, T);
    const double t0 = g_timing ? lowbit_now_us() : 0.0;
    const float *z = s->y[1], *b = s->y[2], *a = s->y[3];
    st = st || lowbit_ssm_conv(s->y[0], L->conv_w, L->conv_state, T, C, c->ssm_conv, s->conv);
    for (int64_t t = 0; t < T && !st; t++) { /* q, k: L2-normed per head; v as it is */
        const float *row = s->conv + t * C;
        st = lowbit_l2_norm(row, Hk, ds, c->eps, s->gq + t * Dk);
        st = st || lowbit_l2_norm(row + Dk, Hk, ds, c->eps, s->gk + t * Dk);
        memcpy(s->gv + t * Dv, row + 2 * Dk, (size_t)Dv * sizeof(float));
    }
    st = st || lowbit_gdn_gates(b, a, L->ssm_a, L->ssm_dt, T, Hv, s->beta, s->g);
    st = st || lowbit_gated_delta_rule(s->gq, s->gk, s->gv, s->g, s->beta, L->ssm_state, T, Hk, Hv,
                                       ds, s->att, rc->threads, -1);
    st = st || lowbit_gated_rms_norm_silu(s->att, L->ssm_norm, z, T * Hv, ds, c->eps, s->att);
    if (g_timing) g_recurrent_us += lowbit_now_us() - t0;
    float *out[1] = {s->dout};
    st = st || group_run(rc, &L->out, s->att, T, out);
    return st;
}

/* x += the feed-forward block: norm, act(gate) * up, sub-norm, down, post-norm. */
static int ffn_block(const run_ctx *rc, const lowbit_decoder_layer *L, const lowbit_decoder_layer *next,
                     float *x, int64_t T) {
    const lowbit_decoder_config *c = rc->cfg;
    const scratch *s = &rc->s;
    const int64_t d = c->d_model, ff = c->n_ff;
    int st = lowbit_rms_norm(x, L->ffn_norm, T, d, c->eps, s->h);
    st = st || group_run(rc, &L->ffn_glu, s->h, T, s->y);
    group_readahead(rc, &L->ffn_down, T);
    if (L->ffn_sub_norm) st = st || lowbit_rms_norm(s->y[0], L->ffn_sub_norm, T, ff, c->eps, s->y[0]);
    float *out[1] = {s->dout};
    st = st || group_run(rc, &L->ffn_down, s->y[0], T, out);
    if (next) group_readahead(rc, next->kind == LOWBIT_BLOCK_GDN ? &next->gdn_in[0] : &next->qkv, T);
    if (L->post_ffw_norm) st = st || lowbit_rms_norm(s->dout, L->post_ffw_norm, T, d, c->eps, s->dout);
    st = st || lowbit_add(x, s->dout, T * d, x);
    return st;
}

int lowbit_decoder_run(const lowbit_decoder_config *cfg, const lowbit_decoder_layer *layers,
                       float *x, int64_t T, int64_t pos, const float *const *rope_cos,
                       const float *const *rope_sin, float *scratch_base,
                       lowbit_decoder_host_fn host, void *host_ctx, int threads) {
    if (!cfg || !layers || !x || !scratch_base || T < 1 || pos < 0 || pos > cfg->ctx - T)
        return LOWBIT_EINVAL;
    run_ctx rc = {.cfg = cfg, .host = host, .host_ctx = host_ctx, .threads = threads};
    const double t0 = g_timing ? lowbit_now_us() : 0.0;
    scratch_layout(cfg, T, scratch_base, &rc.s);
    const int64_t d = cfg->d_model;
    for (int64_t il = 0; il < cfg->n_layer; il++) {
        const lowbit_decoder_layer *L = &layers[il];
        int st = lowbit_rms_norm(x, L->attn_norm, T, d, cfg->eps, rc.s.h);
        switch (L->kind) {
        case LOWBIT_BLOCK_ATTENTION:
        case LOWBIT_BLOCK_GATED_ATTENTION:
            if (!rope_cos || !rope_sin) return LOWBIT_EINVAL;
            st = st || attention_block(&rc, L, T, pos, rope_cos[L->rope], rope_sin[L->rope]);
            break;
        case LOWBIT_BLOCK_GDN:
            st = st || gdn_block(&rc, L, T);
            break;
        default:
            return LOWBIT_EINVAL;
        }
        group_readahead(&rc, &L->ffn_glu, T);
        if (L->post_attn_norm) st = st || lowbit_rms_norm(rc.s.dout, L->post_attn_norm, T, d, cfg->eps, rc.s.dout);
        st = st || lowbit_add(x, rc.s.dout, T * d, x);
        st = st || ffn_block(&rc, L, il + 1 < cfg->n_layer ? &layers[il + 1] : NULL, x, T);
        if (st) return st;
    }
    if (g_timing) g_total_us += lowbit_now_us() - t0;
    return LOWBIT_OK;
}

/* ---- checks ------------------------------------------------------------------------------- */

static int refuse(char *why, size_t len, const char *fmt, ...) {
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return LOWBIT_EINVAL;
}

/* A group of n matrices of the given rows reading cols-wide inputs. */
static int check_group(const lowbit_decoder_group *g, const char *name, int64_t il, int n,
                       const int64_t *rows, int64_t cols, char *why, size_t len) {
    if (g->n != n || g->cols != cols)
        return refuse(why, len, "layer %lld: %s has %d matrices of %lld columns, expected %d of %lld",
                      (long long)il, name, g->n, (long long)g->cols, n, (long long)cols);
    for (int j = 0; j < n; j++) {
        if (g->rows[j] != rows[j])
            return refuse(why, len, "layer %lld: %s matrix %d has %lld rows, expected %lld",
                          (long long)il, name, j, (long long)g->rows[j], (long long)rows[j]);
        if (!g->m[0]) continue;
        if (!g->m[j] || lowbit_matrix_rows(g->m[j]) != rows[j] || lowbit_matrix_cols(g->m[j]) != cols)
            return refuse(why, len, "layer %lld: %s matrix %d is not (%lld, %lld)", (long long)il,
                          name, j, (long long)rows[j], (long long)cols);
    }
    if (g->glu && n != 2) return refuse(why, len, "layer %lld: %s: a GLU group has 2 matrices", (long long)il, name);
    if (g->prep < LOWBIT_PREP_NONE || g->prep > LOWBIT_PREP_GROUPED_HEADS)
        return refuse(why, len, "layer %lld: %s: unknown input preparation %d", (long long)il, name, g->prep);
    if (g->rot_block < 0 || (g->rot_block > 0 && cols % g->rot_block))
        return refuse(why, len, "layer %lld: %s: rotation block %lld does not divide %lld", (long long)il,
                      name, (long long)g->rot_block, (long long)cols);
    return LOWBIT_OK;
}

int lowbit_decoder_check(const lowbit_decoder_config *c, const lowbit_decoder_layer *layers,
                         char *why, size_t len) {
    if (!c || !layers || c->n_layer < 1) return refuse(why, len, "the decoder needs at least one layer");
    const int64_t d = c->d_model, ff = c->n_ff, H = c->n_head, Hkv = c->n_head_kv;
    const int64_t hd = c->head_dim, vd = c->v_head_dim;
    if (d < 1 || ff < 1 || H < 1 || Hkv < 1 || H % Hkv || hd < 1 || vd < 1 || c->ctx < 1 ||
        c->rope_half < 0 || 2 * c->rope_half > hd || !(c->eps >= 0))
        return refuse(why, len, "bad sizes: d %lld, ff %lld, %lld x %lld query / %lld KV heads, value "
                      "dim %lld, ctx %lld, %lld rotated pairs", (long long)d, (long long)ff, (long long)H,
                      (long long)hd, (long long)Hkv, (long long)vd, (long long)c->ctx, (long long)c->rope_half);
    const int64_t Hk = c->ssm_k_heads, Hv = c->ssm_v_heads, ds = c->ssm_state;
    const int64_t Dk = Hk * ds, Dv = Hv * ds;
    for (int64_t il = 0; il < c->n_layer; il++) {
        const lowbit_decoder_layer *L = &layers[il];
        if (!L->attn_norm || !L->ffn_norm)
            return refuse(why, len, "layer %lld: attn_norm and ffn_norm are required", (long long)il);
        int st;
        const int64_t d1[1] = {d};
        if (L->kind == LOWBIT_BLOCK_ATTENTION || L->kind == LOWBIT_BLOCK_GATED_ATTENTION) {
            const int gated = L->kind == LOWBIT_BLOCK_GATED_ATTENTION;
            const int64_t rows[3] = {(gated ? 2 : 1) * H * hd, Hkv * hd, Hkv * vd};
            if ((st = check_group(&L->qkv, "attn_q/k/v", il, 3, rows, d, why, len))) return st;
            const int64_t o_cols = H * vd;
            if ((st = check_group(&L->out, "attn_output", il, 1, d1, o_cols, why, len))) return st;
            if (!L->k_cache || !L->v_cache || L->window < 0)
                return refuse(why, len, "layer %lld: an attention layer needs its KV cache", (long long)il);
            if (!L->q_norm != !L->k_norm)
                return refuse(why, len, "layer %lld: attn_q_norm and attn_k_norm go together", (long long)il);
            if (gated && vd != hd)
                return refuse(why, len, "layer %lld: a gated attention layer needs value dim %lld = head dim %lld",
                              (long long)il, (long long)vd, (long long)hd);
            if (L->rope < 0) return refuse(why, len, "layer %lld: no RoPE table", (long long)il);
        } else if (L->kind == LOWBIT_BLOCK_GDN) {
            if (Hk < 1 || Hv < 1 || Hv % Hk || ds < 1 || c->ssm_conv < 1)
                return refuse(why, len, "layer %lld: bad Gated-DeltaNet sizes (%lld K / %lld V heads of "
                              "%lld, conv %lld)", (long long)il, (long long)Hk, (long long)Hv, (long long)ds,
                              (long long)c->ssm_conv);
            const int64_t rows[4] = {2 * Dk + Dv, Dv, Hv, Hv};
            const int n0 = L->gdn_in[0].n;
            if (n0 < 1 || n0 > 4 || (n0 < 4) != (L->gdn_in[1].n > 0))
                return refuse(why, len, "layer %lld: the Gated-DeltaNet input groups must hold the 4 "
                              "projections", (long long)il);
            if ((st = check_group(&L->gdn_in[0], "Gated-DeltaNet inputs", il, n0, rows, d, why, len))) return st;
            if (n0 < 4 && (st = check_group(&L->gdn_in[1], "Gated-DeltaNet inputs", il, 4 - n0, rows + n0,
                                            d, why, len))) return st;
            if ((st = check_group(&L->out, "ssm_out", il, 1, d1, Dv, why, len))) return st;
            if (!L->conv_w || !L->conv_state || !L->ssm_a || !L->ssm_dt || !L->ssm_state || !L->ssm_norm)
                return refuse(why, len, "layer %lld: a Gated-DeltaNet vector or state is missing", (long long)il);
        } else {
            return refuse(why, len, "layer %lld: unknown block kind %d", (long long)il, L->kind);
        }
        const int64_t ff2[2] = {ff, ff};
        if ((st = check_group(&L->ffn_glu, "ffn_gate/up", il, 2, ff2, d, why, len))) return st;
        if (!L->ffn_glu.glu) return refuse(why, len, "layer %lld: ffn_gate/up is not a GLU group", (long long)il);
        if ((st = check_group(&L->ffn_down, "ffn_down", il, 1, d1, ff, why, len))) return st;
    }
    return LOWBIT_OK;
}
