/* liblowbit decoder: a model's layers, each a block kind (attention, gated attention,
 * Gated-DeltaNet) followed by the shared feed-forward block, run in one call.
 *
 * The loop is the sequence of lowbit.h / ops.h calls of the reference decoder
 * (pylowbit.model.forward), in the same order, so it gives the same bits.  The caller owns every
 * buffer (weights, norm vectors, KV caches, recurrent states, RoPE tables, scratch); the decoder
 * only reads and writes them.  Shapes below: T = tokens of this call, d = d_model, ff = n_ff,
 * H / Hkv query / KV heads, hd / vd their key / value head dims, ctx the cache length; for the
 * Gated-DeltaNet block Hk / Hv its K / V heads, ds the state (head) size, K the conv width,
 * Dk = Hk * ds, Dv = Hv * ds, C = 2 * Dk + Dv. */
#ifndef LOWBIT_DECODER_H
#define LOWBIT_DECODER_H

#include "lowbit/lowbit.h"
#include "lowbit/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowbit_block_kind {
    LOWBIT_BLOCK_ATTENTION = 0,       /* llama / qwen3 / bitnet / gemma3 self-attention */
    LOWBIT_BLOCK_GATED_ATTENTION = 1, /* qwen35: attn_q rows per head hd query then hd gate */
    LOWBIT_BLOCK_GDN = 2,             /* qwen35 Gated-DeltaNet */
} lowbit_block_kind;

/* What is done to a group's input before its folded rotation and its products. */
typedef enum lowbit_input_prep {
    LOWBIT_PREP_NONE = 0,
    LOWBIT_PREP_ROUND_BF16 = 1,    /* round to BF16, nearest even (a BF16 matrix's activations) */
    LOWBIT_PREP_GROUPED_HEADS = 2, /* (T, Dv) tiled V-head order -> grouped (ssm_out folded so) */
} lowbit_input_prep;

#define LOWBIT_GROUP_MAX 4

/* Matrices that read one input x (T, cols): ys[j] (T, rows[j]) = in(x) . m[j]^T, where in(x) is
 * x after `prep` and then, if rot_block > 0, the folded rotation H(signs * .) blockwise.  When
 * m[0] is NULL the host callback runs the whole group (prep and rotation included) instead. */
typedef struct lowbit_decoder_group {
    int n;                                  /* matrices, 1 .. LOWBIT_GROUP_MAX */
    const lowbit_matrix *m[LOWBIT_GROUP_MAX]; /* (rows[j], cols) each, or all NULL: host */
    int64_t rows[LOWBIT_GROUP_MAX];
    int64_t cols;
    int glu;               /* 1: n == 2, ys[0] = act(x . m[0]^T) * (x . m[1]^T) (cfg ffn_act) */
    int prep;              /* lowbit_input_prep */
    int64_t rot_block;     /* 0: no folded rotation */
    const float *rot_signs; /* (cols,) of +-1, or NULL (identity signs) */
    int host_id;           /* handed to the host callback */
} lowbit_decoder_group;

typedef struct lowbit_decoder_config {
    int64_t n_layer;
    int64_t d_model, n_ff;                          /* d, ff */
    int64_t n_head, n_head_kv, head_dim, v_head_dim; /* H, Hkv, hd, vd */
    int64_t ctx;                                    /* KV cache positions */
    int64_t rope_half;    /* rotated pairs per head: every cos / sin table is (T, rope_half) */
    int rope_neox;        /* pairs (i, i + half), else (2i, 2i + 1) */
    float eps;            /* every RMS / L2 norm's */
    float attn_scale;     /* scores = attn_scale * q . k */
    int ffn_act;          /* lowbit_act_kind of the gated FFN */
    /* Gated-DeltaNet sizes, 0 when no layer is one */
    int64_t ssm_k_heads, ssm_v_heads, ssm_state, ssm_conv; /* Hk, Hv, ds, K */
} lowbit_decoder_config;

typedef struct lowbit_decoder_layer {
    int kind;                         /* lowbit_block_kind */
    const float *attn_norm;           /* (d) */
    /* attention kinds */
    lowbit_decoder_group qkv;         /* rows q (H hd, gated 2 H hd), k (Hkv hd), v (Hkv vd); cols d */
    const float *q_norm, *k_norm;     /* (hd) each, or NULL */
    int rope;                         /* index of this layer's cos / sin tables in a run */
    int64_t window;                   /* sliding attention window, 0: none */
    float *k_cache;                   /* (Hkv, ctx, hd) */
    float *v_cache;                   /* (Hkv, ctx, vd) */
    const float *attn_sub_norm;       /* (H vd), or NULL */
    /* Gated-DeltaNet: the outputs qkv (C), z (Dv), beta (Hv), alpha (Hv) in this order, over
     * gdn_in[0] and (when gdn_in[1].n > 0) gdn_in[1] */
    lowbit_decoder_group gdn_in[2];
    const float *conv_w;              /* (C, K), tap K - 1 on the current input */
    float *conv_state;                /* (C, K - 1) */
    const float *ssm_a, *ssm_dt;      /* (Hv) each */
    float *ssm_state;                 /* (Hv, ds, ds) */
    const float *ssm_norm;            /* (ds) */
    /* both */
    lowbit_decoder_group out;         /* attn_output (d, H vd) or ssm_out (d, Dv) */
    const float *post_attn_norm;      /* (d), or NULL */
    /* feed-forward */
    const float *ffn_norm;            /* (d) */
    lowbit_decoder_group ffn_glu;     /* gate, up: (ff, d), glu */
    const float *ffn_sub_norm;        /* (ff), or NULL */
    lowbit_decoder_group ffn_down;    /* (d, ff) */
    const float *post_ffw_norm;       /* (d), or NULL */
} lowbit_decoder_layer;

/* Runs a group whose m[0] is NULL: ys[j] (T, rows[j]) from the untransformed input x (T, cols).
 * Returns a lowbit_status (nonzero stops the run, which returns it). */
typedef int (*lowbit_decoder_host_fn)(void *ctx, int host_id, const float *x, int64_t T,
                                      float *const *ys);

/* LOWBIT_OK if cfg and layers fit together (matrix shapes, norm presence, kinds); otherwise
 * LOWBIT_EINVAL with a sentence naming the problem in why[0 .. why_len). */
LOWBIT_API int lowbit_decoder_check(const lowbit_decoder_config *cfg,
                                    const lowbit_decoder_layer *layers, char *why, size_t why_len);

/* Floats of scratch a run of T tokens needs. */
LOWBIT_API int64_t lowbit_decoder_scratch_floats(const lowbit_decoder_config *cfg, int64_t T);

/* x (T, d) in place through every layer, for positions pos .. pos + T - 1 (pos + T <= ctx):
 * attention layers write their KV caches there, Gated-DeltaNet layers advance their states by T
 * tokens.  rope_cos[r], rope_sin[r]: (T, rope_half) tables of those positions for a layer's
 * rope = r.  scratch: lowbit_decoder_scratch_floats(cfg, T) floats.  host: runs host groups (may
 * be NULL when there are none).  threads: pool threads (<= 0: the default), the same bits for
 * any count.  Layers must have passed lowbit_decoder_check. */
LOWBIT_API int lowbit_decoder_run(const lowbit_decoder_config *cfg,
                                  const lowbit_decoder_layer *layers, float *x, int64_t T,
                                  int64_t pos, const float *const *rope_cos,
                                  const float *const *rope_sin, float *scratch,
                                  lowbit_decoder_host_fn host, void *host_ctx, int threads);

/* Benchmark timing: with enable = 1, each lowbit_decoder_run adds its wall time to *total_us and
 * that of the Gated-DeltaNet blocks' recurrent part (conv, L2 norms, gates, delta rule, gated
 * norm: everything between the input projections and ssm_out) to *recurrent_us.  Writes the sums
 * so far and resets them; enable = 0 stops timing.  For one decoding thread (not thread-safe);
 * no effect on results. */
LOWBIT_API void lowbit_decoder_timing(int enable, double *recurrent_us, double *total_us);

#ifdef __cplusplus
}
#endif

#endif
