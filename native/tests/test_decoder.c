/* The layer loop (lowbit/decoder.h) against the public calls it is made of, made by hand in the
 * documented order: one attention layer and its FFN, a prompt then a decode step, with an input
 * rotation, BF16 input rounding and a group run by the host callback; and the refusals of
 * lowbit_decoder_check. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lowbit/decoder.h"
#include "lowbit/formats.h"

enum { D = 64, FF = 128, H = 2, HKV = 1, HD = 32, CTX = 8, HALF = 8, BLOCK = 16 };

static float rndf(void) { return (float)(rnd64() >> 40) / (float)(1 << 24) - 0.5f; }

static float *rand_f32(int64_t n) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) exit(2);
    for (int64_t i = 0; i < n; i++) p[i] = rndf();
    return p;
}

static lowbit_matrix *f32_matrix(const float *w, int64_t rows, int64_t cols) {
    int st;
    lowbit_matrix *m = lowbit_matrix_pack(LOWBIT_TYPE_F32, w, rows, cols, 1, &st);
    if (!m) exit(2);
    return m;
}

static void round_bf16(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u; /* test values are finite */
        memcpy(&x[i], &u, 4);
    }
}

static lowbit_matrix *g_down;

/* The host runs ffn_down: its product, as the loop would. */
static int host(void *ctx, int id, const float *x, int64_t T, float *const *ys) {
    (void)ctx;
    CHECK(id == 7, "host id %d", id);
    const lowbit_matrix *m[1] = {g_down};
    return lowbit_matrix_gemm_multi(m, 1, x, T, ys, 1);
}

/* x (T, D) through the layer op by op: the reference order of lowbit_decoder_run. */
static void by_hand(const lowbit_decoder_config *c, const lowbit_decoder_layer *L, float *x, int64_t T,
                    int64_t pos, const float *cs, const float *sn) {
    float h[4 * D], xin[4 * FF], q[4 * H * HD], k[4 * HKV * HD], v[4 * HKV * HD], att[4 * H * HD];
    float dout[4 * D], g[4 * FF], u[4 * FF];
    lowbit_rms_norm(x, L->attn_norm, T, D, c->eps, h);
    memcpy(xin, h, sizeof(float) * T * D);
    lowbit_fwht_f32(xin, T, D, BLOCK, 1, L->qkv.rot_signs, LOWBIT_FWHT_SIGNS_THEN_ROTATE, 0);
    float *qkv[3] = {q, k, v};
    lowbit_matrix_gemm_multi(L->qkv.m, 3, xin, T, qkv, 1);
    lowbit_rms_norm(q, L->q_norm, T * H, HD, c->eps, q);
    lowbit_rms_norm(k, L->k_norm, T * HKV, HD, c->eps, k);
    lowbit_rope(q, T, H, HD, cs, sn, HALF, 1);
    lowbit_rope(k, T, HKV, HD, cs, sn, HALF, 1);
    lowbit_attention_mt(q, k, v, T, H, HKV, HD, HD, L->k_cache, L->v_cache, CTX, pos, 0, c->attn_scale,
                        att, 1);
    memcpy(xin, att, sizeof(float) * T * H * HD);
    round_bf16(xin, T * H * HD);
    float *o[1] = {dout};
    lowbit_matrix_gemm_multi(L->out.m, 1, xin, T, o, 1);
    lowbit_add(x, dout, T * D, x);
    lowbit_rms_norm(x, L->ffn_norm, T, D, c->eps, h);
    lowbit_matrix_gemm_glu(L->ffn_glu.m[0], L->ffn_glu.m[1], c->ffn_act, h, T, g, u, 1);
    const lowbit_matrix *dm[1] = {g_down};
    lowbit_matrix_gemm_multi(dm, 1, g, T, o, 1);
    lowbit_add(x, dout, T * D, x);
}

int main(void) {
    const lowbit_decoder_config c = {.n_layer = 1, .d_model = D, .n_ff = FF, .n_head = H, .n_head_kv = HKV,
                                     .head_dim = HD, .v_head_dim = HD, .ctx = CTX, .rope_half = HALF,
                                     .rope_neox = 1, .eps = 1e-5f, .attn_scale = 0.17f,
                                     .ffn_act = LOWBIT_ACT_SILU};
    float *wq = rand_f32(H * HD * D), *wk = rand_f32(HKV * HD * D), *wv = rand_f32(HKV * HD * D);
    float *wo = rand_f32(D * H * HD), *wg = rand_f32(FF * D), *wu = rand_f32(FF * D), *wd = rand_f32(D * FF);
    float *norms = rand_f32(2 * D + 2 * HD), signs[D];
    for (int i = 0; i < D; i++) signs[i] = (rnd64() >> 63) ? 1.0f : -1.0f;
    g_down = f32_matrix(wd, D, FF);
    float *kc[2], *vc[2];
    for (int r = 0; r < 2; r++) {
        kc[r] = calloc(HKV * CTX * HD, sizeof(float));
        vc[r] = calloc(HKV * CTX * HD, sizeof(float));
    }
    lowbit_decoder_layer L = {
        .kind = LOWBIT_BLOCK_ATTENTION, .attn_norm = norms, .ffn_norm = norms + D,
        .q_norm = norms + 2 * D, .k_norm = norms + 2 * D + HD, .rope = 0, .k_cache = kc[0], .v_cache = vc[0],
        .qkv = {.n = 3, .m = {f32_matrix(wq, H * HD, D), f32_matrix(wk, HKV * HD, D), f32_matrix(wv, HKV * HD, D)},
                .rows = {H * HD, HKV * HD, HKV * HD}, .cols = D, .rot_block = BLOCK, .rot_signs = signs},
        .out = {.n = 1, .m = {f32_matrix(wo, D, H * HD)}, .rows = {D}, .cols = H * HD,
                .prep = LOWBIT_PREP_ROUND_BF16},
        .ffn_glu = {.n = 2, .m = {f32_matrix(wg, FF, D), f32_matrix(wu, FF, D)}, .rows = {FF, FF}, .cols = D,
                    .glu = 1},
        .ffn_down = {.n = 1, .rows = {D}, .cols = FF, .host_id = 7},
    };
    char why[200] = "";
    CHECK(lowbit_decoder_check(&c, &L, why, sizeof why) == LOWBIT_OK, "check: %s", why);

    float *x = rand_f32(4 * D), ref[4 * D], *cs = rand_f32(4 * HALF), *sn = rand_f32(4 * HALF);
    memcpy(ref, x, sizeof ref);
    float *scratch = malloc((size_t)lowbit_decoder_scratch_floats(&c, 3) * sizeof(float));
    const float *cos_tabs[1] = {cs}, *sin_tabs[1] = {sn};
    CHECK(lowbit_decoder_run(&c, &L, x, 3, 0, cos_tabs, sin_tabs, scratch, host, NULL, 1) == LOWBIT_OK, "run");
    lowbit_decoder_layer R = L;
    R.k_cache = kc[1], R.v_cache = vc[1];
    by_hand(&c, &R, ref, 3, 0, cs, sn);
    CHECK(memcmp(x, ref, sizeof(float) * 3 * D) == 0, "prompt: loop differs from the calls it makes");
    const float *step_cos[1] = {cs + 3 * HALF}, *step_sin[1] = {sn + 3 * HALF};
    CHECK(lowbit_decoder_run(&c, &L, x + 3 * D, 1, 3, step_cos, step_sin, scratch, host, NULL, 1) == 0, "step");
    by_hand(&c, &R, ref + 3 * D, 1, 3, cs + 3 * HALF, sn + 3 * HALF);
    CHECK(memcmp(x + 3 * D, ref + 3 * D, sizeof(float) * D) == 0, "decode step: loop differs");
    CHECK(memcmp(kc[0], kc[1], sizeof(float) * HKV * CTX * HD) == 0, "KV caches differ");
    CHECK(lowbit_decoder_run(&c, &L, x, 1, CTX, cos_tabs, sin_tabs, scratch, host, NULL, 1) == LOWBIT_EINVAL,
          "a position past the cache is refused");

    /* refusals name the problem */
    lowbit_decoder_layer bad = L;
    bad.qkv.rows[1] = 5;
    CHECK(lowbit_decoder_check(&c, &bad, why, sizeof why) == LOWBIT_EINVAL && strstr(why, "rows"), "%s", why);
    bad = L, bad.ffn_glu.glu = 0;
    CHECK(lowbit_decoder_check(&c, &bad, why, sizeof why) == LOWBIT_EINVAL && strstr(why, "GLU"), "%s", why);
    bad = L, bad.out.rot_block = 48;
    CHECK(lowbit_decoder_check(&c, &bad, why, sizeof why) == LOWBIT_EINVAL && strstr(why, "rotation"), "%s", why);
    bad = L, bad.kind = 9;
    CHECK(lowbit_decoder_check(&c, &bad, why, sizeof why) == LOWBIT_EINVAL && strstr(why, "kind"), "%s", why);
    bad = L, bad.k_norm = NULL;
    CHECK(lowbit_decoder_check(&c, &bad, why, sizeof why) == LOWBIT_EINVAL && strstr(why, "together"), "%s", why);

    const lowbit_decoder_group *groups[] = {&L.qkv, &L.out, &L.ffn_glu};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < groups[i]->n; j++) lowbit_matrix_free((lowbit_matrix *)groups[i]->m[j]);
    lowbit_matrix_free(g_down);
    float *owned[] = {wq, wk, wv, wo, wg, wu, wd, norms, kc[0], kc[1], vc[0], vc[1], x, cs, sn, scratch};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
    return report();
}
