/* The token-by-token delta rule over a variant's 16-lane vectors, shared by ops_gdn_avx2.c and
 * ops_gdn_avx512.c, each compiled with its own flags.  The includer defines, after including
 * ops_gdn-inl.h and before this:
 *   v16                 16 float lanes (GDN_LANES): one zmm, or two ymm for lanes 0-7 and 8-15
 *   v16_zero(), v16_set1(x), v16_load(p), v16_store(p, v), v16_add(a, b), v16_mul(a, b)
 *                       lane by lane, each one IEEE single operation (no contraction)
 *   v16_fold(v)         fold16's tree: lanes l + (l + 8), then + 4, + 2, + 1
 *   GDN_ENTRY           the variant's kernel-list entry, which returns its table
 * rows16 then does gdn_row's operations in their order on each lane: the scalar bits. */
#ifndef LOWBIT_GDN_DELTA_RULE_INL_H
#define LOWBIT_GDN_DELTA_RULE_INL_H

#define R 4 /* rows at once: independent add chains */
/* Prefetch the state PF_ROWS rows (8 KiB at d = 128) ahead, one line per 16 floats: the out-of-order
 * window spans less than one block of R rows, so without it the loads of the next block wait for the
 * arithmetic of this one.  Past the head's last row it reads the next head's state (a prefetch
 * never faults). */
#define PF_ROWS 16

/* gdn_row on rows s, s + d, .., s + (R - 1) d; prefetch: the rows PF_ROWS ahead too. */
static inline void rows16(float *restrict s, const float *restrict k, const float *restrict q,
                          v16 alpha, float beta, const float *restrict v, float scale, int64_t d,
                          float *restrict o, int prefetch) {
    v16 acc[R], delta[R];
    for (int r = 0; r < R; r++) acc[r] = v16_zero();
    for (int64_t i = 0; i < d; i += 16) {  /* decay the rows, e = S^T k */
        const v16 kb = v16_load(k + i);
        for (int r = 0; r < R; r++) {
            float *p = s + r * d + i;
            if (prefetch) _mm_prefetch((const char *)(p + PF_ROWS * d), _MM_HINT_T0);
            const v16 x = v16_mul(v16_load(p), alpha);
            v16_store(p, x);
            acc[r] = v16_add(acc[r], v16_mul(x, kb));
        }
    }
    for (int r = 0; r < R; r++) {
        delta[r] = v16_set1(beta * (v[r] - v16_fold(acc[r])));
        acc[r] = v16_zero();
    }
    for (int64_t i = 0; i < d; i += 16) {  /* S += k delta^T, o = S^T q */
        const v16 kb = v16_load(k + i), qb = v16_load(q + i);
        for (int r = 0; r < R; r++) {
            float *p = s + r * d + i;
            const v16 x = v16_add(v16_load(p), v16_mul(kb, delta[r]));
            v16_store(p, x);
            acc[r] = v16_add(acc[r], v16_mul(x, qb));
        }
    }
    for (int r = 0; r < R; r++) o[r] = v16_fold(acc[r]) * scale;
}

/* gdn_delta_rule's loops (rows outside, blocks of tokens inside) over rows16. */
static void delta_rule(const gdn_args *a, int64_t h) {
    const int64_t d = a->d, kh = h % a->Hk, Hk = a->Hk, Hv = a->Hv;
    if (d % 16 || d % R) {
        gdn_delta_rule(a, h);
        return;
    }
    float *S = a->state + h * d * d;
    float alpha[GDN_TOKEN_BLOCK], o[R];
    for (int64_t t0 = 0; t0 < a->T; t0 += GDN_TOKEN_BLOCK) {
        const int64_t n = a->T - t0 < GDN_TOKEN_BLOCK ? a->T - t0 : GDN_TOKEN_BLOCK;
        gdn_alphas(a, h, t0, n, alpha);
        for (int64_t j = 0; j < d; j += R)
            for (int64_t t = t0; t < t0 + n; t++) {
                const float *k = a->k + (t * Hk + kh) * d, *q = a->q + (t * Hk + kh) * d;
                float *out = a->out + (t * Hv + h) * d + j;
                rows16(S + j * d, k, q, v16_set1(alpha[t - t0]), a->beta[t * Hv + h],
                       a->v + (t * Hv + h) * d + j, a->scale, d, o, t == t0);
                for (int r = 0; r < R; r++) out[r] = o[r];
            }
    }
}

static const gdn_kernels table = GDN_KERNELS_WITH(delta_rule);
const gdn_kernels *GDN_ENTRY(void); /* lowbit_gdn_sig (kernel_table.h) */
const gdn_kernels *GDN_ENTRY(void) { return &table; }

#endif /* LOWBIT_GDN_DELTA_RULE_INL_H */
