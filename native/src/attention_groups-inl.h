/* lowbit_attention's loop (ops_attention-inl.h's attention_loop, the same bits) with the query rows
 * that share a key / value head (grouped-query attention) run together, up to ATTN_GROUP at a time,
 * so that each key and value row is loaded once for all of them.  Shared by x86/ops_avx2.c,
 * x86/ops_avx512.c and arm/ops_neon.c, each compiled with its own flags; the includer defines, after including
 * ops_attention-inl.h and before this:
 *   v16                     16 float lanes: one zmm, two ymm or four NEON registers
 *   v16_zero(), v16_set1(x), v16_load(p), v16_store(p, v), v16_add(a, b), v16_sub(a, b),
 *   v16_mul(a, b), v16_max(a, b) lane by lane, each one IEEE single operation (no contraction)
 *   v16_unordered(a)        nonzero if a lane is NaN;  v16_hmax(a): the largest lane
 *   v16_exp(x)              attn_exp's operations lane by lane
 *   SLOTS                   (row, key) scores a step: 16 or 4
 *   sv, slots_fold(acc)     fold16 of each of the SLOTS vectors acc[x], in one register: slot x
 *                           lands in lane slot_lane(x)
 *   sv_mul(s, f), sv_store_run(dst, s, lane0, n): lanes lane0 .. lane0 + n - 1 of s to dst
 *   PV_VECS                 v16 of values a row per pass over the keys
 *   ATTN_ENTRY              the kernel-list entry's name
 * Scores: SLOTS (row, key) slots a step, each slot's 16 partial sums in one v16 (dot16's lanes), then
 * fold16 of all of them at once, transposed (a SIMD reduction's halving steps on SLOTS vectors).
 * Softmax 16 scores a v16 (the tail one by one), then the weighted sum of the value rows for
 * 16 PV_VECS columns of every row of the group at once (attn_pv's order per column).  Head sizes that
 * are not a multiple of 16 take the plain loop (attention_loop, built with the includer's flags). */
#ifndef LOWBIT_ATTENTION_GROUPS_INL_H
#define LOWBIT_ATTENTION_GROUPS_INL_H

#define AI static inline __attribute__((always_inline))

/* Software prefetch this far ahead in the key and value rows: each head's rows are one run, but
 * a run is short (a few hundred KB) and the hardware prefetchers ramp up too late on it. */
#ifndef ATTN_PF_BYTES
#define ATTN_PF_BYTES 4096
#endif
AI void prefetch_run(const void *p, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch((const char *)p + b);
}
AI void prefetch_rows(const float *row, int64_t floats) {
    prefetch_run((const char *)row + ATTN_PF_BYTES, 4 * floats);
}

/* Scores of G rows (q, hd apart) against keys K[0 .. n) into p (stride ps a row), scaled:
 * SLOTS / G keys a step.  The slot whose result lands in lane L serves row L / (SLOTS / G), key
 * L % (SLOTS / G): each row's scores are one run of the result. */
AI void scores(const float *q, const float *K, int64_t hd, int64_t n, float scale, float *p,
               int64_t ps, const int G) {
    const int KS = SLOTS / G; /* keys a step */
    for (int64_t j0 = 0; j0 < n; j0 += KS) {
        const float *kr[SLOTS]; /* the step's key rows (past n: the last one again, not stored) */
        for (int k = 0; k < KS; k++) kr[k] = K + (j0 + k < n ? j0 + k : n - 1) * hd;
        prefetch_rows(K + j0 * hd, KS * hd);
        v16 acc[SLOTS];
        for (int x = 0; x < SLOTS; x++) acc[x] = v16_zero();
        for (int64_t i = 0; i < hd; i += 16)
            for (int x = 0; x < SLOTS; x++) {
                const int L = slot_lane(x);
                acc[x] = v16_add(acc[x], v16_mul(v16_load(q + L / KS * hd + i), v16_load(kr[L % KS] + i)));
            }
        const sv s = sv_mul(slots_fold(acc), scale);
        const int left = n - j0 < KS ? (int)(n - j0) : KS;
        for (int r = 0; r < G; r++) sv_store_run(p + r * ps + j0, s, r * KS, left);
    }
}

/* attention_loop's max and NaN test, then attn_exp_sum, on one row of n scores: returns 1 / sum,
 * or 0 if the row is NaN (a NaN or infinite score). */
AI float softmax_row(float *p, int64_t n) {
    v16 mx = v16_set1(-INFINITY);
    int nan = 0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const v16 v = v16_load(p + j);
        nan |= v16_unordered(v);
        mx = v16_max(mx, v);
    }
    float m = v16_hmax(mx); /* exact; the sign of a zero maximum does not matter */
    for (int64_t t = j; t < n; t++) {
        m = p[t] > m ? p[t] : m;
        nan |= p[t] != p[t];
    }
    if (nan || !(m > -INFINITY && m < INFINITY)) return 0;
    const v16 mv = v16_set1(m);
    v16 acc = v16_zero();
    for (j = 0; j + 16 <= n; j += 16) {
        const v16 e = v16_exp(v16_sub(v16_load(p + j), mv));
        v16_store(p + j, e);
        acc = v16_add(acc, e);
    }
    float a[16];
    v16_store(a, acc);
    float s = fold16(a);
    for (; j < n; j++) {
        p[j] = attn_exp(p[j] - m);
        s += p[j];
    }
    return 1.0f / s;
}

/* o_r[c] = sum over j in order of (p_r[j] * inv_r) * V[j][c], 16 PV_VECS columns of G rows a pass */
AI void weighted_values(float *out, const float *p, int64_t ps, const float *inv, const float *V,
                        int64_t n, int64_t vd, const int G) {
    for (int64_t c0 = 0; c0 < vd; c0 += 16 * PV_VECS) {
        const int nv = vd - c0 >= 16 * PV_VECS ? PV_VECS : (int)((vd - c0) / 16);
        v16 acc[ATTN_GROUP][PV_VECS];
        for (int r = 0; r < G; r++)
            for (int b = 0; b < PV_VECS; b++) acc[r][b] = v16_zero();
        for (int64_t j = 0; j < n; j++) {
            const float *v = V + j * vd + c0;
            if (c0 == 0) prefetch_rows(V + j * vd, vd);
            v16 vv[PV_VECS];
            for (int b = 0; b < PV_VECS; b++) vv[b] = b < nv ? v16_load(v + 16 * b) : v16_zero();
            for (int r = 0; r < G; r++) {
                const v16 a = v16_set1(p[r * ps + j] * inv[r]);
                for (int b = 0; b < PV_VECS; b++)
                    if (b < nv) acc[r][b] = v16_add(acc[r][b], v16_mul(a, vv[b]));
            }
        }
        for (int r = 0; r < G; r++)
            for (int b = 0; b < nv; b++) v16_store(out + r * vd + c0 + 16 * b, acc[r][b]);
    }
}

/* G rows of one group: query rows q (hd apart), outputs out (vd apart), keys K / values V, n of them */
AI void group_rows(const float *q, const float *K, const float *V, int64_t hd, int64_t vd, int64_t n,
                   float scale, float *out, float *p, int64_t ps, const int G) {
    const int64_t vbytes = 4 * n * vd; /* the values' first rows, for when the scores are done */
    prefetch_run(V, vbytes < ATTN_PF_BYTES ? vbytes : ATTN_PF_BYTES);
    scores(q, K, hd, n, scale, p, ps, G);
    float inv[ATTN_GROUP];
    for (int r = 0; r < G; r++) inv[r] = softmax_row(p + r * ps, n);
    weighted_values(out, p, ps, inv, V, n, vd, G);
    for (int r = 0; r < G; r++)
        if (inv[r] == 0) /* NaN / inf scores: NaN out, as numpy */
            for (int64_t c = 0; c < vd; c++) out[r * vd + c] = NAN;
}

void ATTN_ENTRY(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd, const float *kc,
                const float *vc, int64_t ctx, int64_t pos, int64_t window, float scale, float *out,
                float *p, int64_t r0, int64_t r1);

void ATTN_ENTRY(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd, const float *kc,
                const float *vc, int64_t ctx, int64_t pos, int64_t window, float scale, float *out,
                float *p, int64_t r0, int64_t r1) {
    if (hd % 16 || vd % 16) {
        attention_loop(q, H, Hkv, hd, vd, kc, vc, ctx, pos, window, scale, out, p, r0, r1);
        return;
    }
    const int64_t G = H / Hkv, ps = pos + (r1 - 1) / H + 1; /* score rows: every query's keys fit */
    for (int64_t r = r0; r < r1;) {
        const int64_t t = r / H, h = r % H, kh = h / G;
        /* the rows of this key head and token left in [r, r1), up to ATTN_GROUP */
        int64_t g = (kh + 1) * G - h;
        g = g < r1 - r ? g : r1 - r;
        g = g >= 4 ? 4 : g >= 2 ? 2 : 1;
        const int64_t i = pos + t;
        const int64_t lo = window > 0 && i >= window ? i - window + 1 : 0;
        const int64_t n = i + 1 - lo;
        const float *K = kc + (kh * ctx + lo) * hd, *V = vc + (kh * ctx + lo) * vd;
        const float *qr = q + r * hd;
        float *o = out + r * vd;
        if (g == 4)
            group_rows(qr, K, V, hd, vd, n, scale, o, p, ps, 4);
        else if (g == 2)
            group_rows(qr, K, V, hd, vd, n, scale, o, p, ps, 2);
        else
            group_rows(qr, K, V, hd, vd, n, scale, o, p, ps, 1);
        r += g;
    }
}

#undef AI
#endif
