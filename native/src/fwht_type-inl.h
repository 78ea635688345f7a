/* The body of fwht-inl.h for one element type: T with vectors V of W lanes, names suffixed with
 * FWHT_SUF.  Included by fwht-inl.h only, once for f32 and once for f64. */

#define T FWHT_T
#define V FN(vec)
#define W ((int)(sizeof(V) / sizeof(T)))
#define LOGW __builtin_ctz(W)

AI void FN(bfly)(V *a, V *b) {
    const V s = FN(vadd)(*a, *b), d = FN(vsub)(*a, *b);
    *a = s;
    *b = d;
}

/* Radix-2 stages across the register index: strides 1 .. R/2 (R = 2^G) of r[]. */
AI void FN(regstages)(V *r, const int G) {
#pragma GCC unroll 8
    for (int l = 0; l < G; l++) {
        const int h = 1 << l;
#pragma GCC unroll 32
        for (int i = 0; i < (1 << G); i += 2 * h)
#pragma GCC unroll 32
            for (int j = i; j < i + h; j++) FN(bfly)(&r[j], &r[j + h]);
    }
}

/* First pass: tiles of R = 2^G consecutive vectors; in-vector stages then register stages. */
AI void FN(first_pass)(const T *src, T *dst, int64_t n, const T *pre, const T *post, T scale,
                       const int G, const int PRE, const int LAST, const int POST) {
    const V vs = FN(vset1)(scale);
    for (int64_t i = 0; i < n; i += (W << G)) {
        V r[32];
        /* Pull in the block after this one (the next row of a batch, the next sub-block of a large
         * transform) while this one computes; a prefetch past the end is harmless. */
#pragma GCC unroll 32
        for (int j = 0; j < (W << G); j += 64 / (int)sizeof(T)) __builtin_prefetch(src + n + i + j);
#pragma GCC unroll 32
        for (int j = 0; j < (1 << G); j++) {
            V v = FN(vld)(src + i + j * W);
            if (PRE) v = FN(vmul)(v, FN(vld)(pre + i + j * W));
            r[j] = FN(vinreg)(v);
        }
        FN(regstages)(r, G);
#pragma GCC unroll 32
        for (int j = 0; j < (1 << G); j++) {
            V v = r[j];
            if (LAST) v = FN(vmul)(v, vs);
            if (POST) v = FN(vmul)(v, FN(vld)(post + i + j * W));
            FN(vst)(dst + i + j * W, v);
        }
    }
}

/* Mid pass: stages s, 2s, .., s * 2^(G-1) on tiles of R = 2^G rows s apart, FWHT_COLS vectors per
 * row (a whole 64-byte line where registers allow: rows a power of two apart share L1 sets, so a
 * half-used line would be evicted before the next tile comes back for its other half). */
AI void FN(mid_pass)(T *x, int64_t n, int64_t s, const T *post, T scale, const int G,
                     const int LAST, const int POST) {
    const V vs = FN(vset1)(scale);
    const int U = s >= FWHT_COLS * W ? FWHT_COLS : 1;
    for (int64_t base = 0; base < n; base += s << G)
        for (int64_t c = 0; c < s; c += U * W) {
            const int64_t o = base + c;
            V r[FWHT_COLS][32];
#pragma GCC unroll 4
            for (int u = 0; u < U; u++) {
#pragma GCC unroll 32
                for (int t = 0; t < (1 << G); t++) r[u][t] = FN(vld)(x + o + t * s + u * W);
                FN(regstages)(r[u], G);
            }
#pragma GCC unroll 4
            for (int u = 0; u < U; u++)
#pragma GCC unroll 32
                for (int t = 0; t < (1 << G); t++) {
                    V v = r[u][t];
                    if (LAST) v = FN(vmul)(v, vs);
                    if (POST) v = FN(vmul)(v, FN(vld)(post + o + t * s + u * W));
                    FN(vst)(x + o + t * s + u * W, v);
                }
        }
}

static void FN(first)(const T *src, T *dst, int64_t n, const T *pre, const T *post, T scale, int G,
                      int last) {
    const int key = G * 8 + (pre != NULL) + 2 * (last != 0) + 4 * (last && post != NULL);
    switch (key) {
        FIRST_CASES(0)
        FIRST_CASES(1)
        FIRST_CASES(2)
        FIRST_CASES(3)
        FIRST_CASES(4)
#if FWHT_LOGR_FIRST >= 5
        FIRST_CASES(5)
#endif
    default: break;
    }
}

static void FN(mid)(T *x, int64_t n, int64_t s, const T *post, T scale, int G, int last) {
    const int key = G * 4 + (last != 0) + 2 * (last && post != NULL);
    switch (key) {
        MID_CASES(1)
        MID_CASES(2)
        MID_CASES(3)
#if FWHT_GMAX >= 4
        MID_CASES(4)
#endif
#if FWHT_GMAX >= 5
        MID_CASES(5)
#endif
    default: break;
    }
}

/* Stages [lo, hi) as mid passes, lowest strides first, FWHT_GMAX stages each (fewer at the end). */
static void FN(mid_range)(T *x, int64_t n, int lo, int hi, const T *post, T scale, int last) {
    while (lo < hi) {
        const int g = hi - lo < FWHT_GMAX ? hi - lo : FWHT_GMAX;
        FN(mid)(x, n, (int64_t)1 << lo, post, scale, g, last && lo + g == hi);
        lo += g;
    }
}

/* A transform that fits in L1: one first pass plus mid passes over the whole vector. */
static void FN(in_cache)(const T *src, T *dst, int64_t n, int L, const T *pre, const T *post,
                         T scale, int last) {
    int G = L - LOGW;
    if (G > FWHT_LOGR_FIRST) G = FWHT_LOGR_FIRST;
    const int done = LOGW + G;
    FN(first)(src, dst, n, pre, post, scale, G, last && done == L);
    if (done < L) FN(mid_range)(dst, n, done, L, post, scale, last);
}

/* Larger than L1: transform the 2^g sub-blocks of n / 2^g elements recursively (depth first, so a
 * sub-block that fits L2 is finished while it is there), then do the top g stages in one sweep.
 * Each level adds one sweep at its own size: about two sweeps over memory for 2^20 floats instead
 * of log2(n) / FWHT_GMAX.  A transform of up to 2^LB runs in cache whole; a larger one splits down
 * to sub-blocks of 2^LEAF (<= 2^LB), which may be smaller so that a leaf leaves room in L1 for the
 * lines streaming in next. */
static void FN(rec)(const T *src, T *dst, int64_t n, int L, const T *pre, const T *post, T scale,
                    int last) {
    if (L <= FN(FWHT_LB)) {
        FN(in_cache)(src, dst, n, L, pre, post, scale, last);
        return;
    }
    int g = L - FN(FWHT_LEAF);
    if (g > FWHT_GMAX) g = FWHT_GMAX;
    const int64_t sub = n >> g;
    for (int64_t b = 0; b < n; b += sub)
        FN(rec)(src + b, dst + b, sub, L - g, pre ? pre + b : NULL, NULL, (T)1, 0);
    FN(mid)(dst, n, sub, post, scale, g, last);
}

static void FN(pow2)(const T *src, T *dst, int64_t n, const T *pre, const T *post, T scale) {
    if (n < W) {
        REF(pow2)(src, dst, n, pre, post, scale);
        return;
    }
    int L = 0;
    while (((int64_t)1 << L) < n) L++;
    FN(rec)(src, dst, n, L, pre, post, scale, scale != (T)1 || post != NULL);
}

/* m-point stage of an m * 2^k transform; the same accumulation order as the reference. */
static void FN(mstage)(T *x, int m, int64_t len, const T *post, T scale) {
    if (len % W) {
        REF(mstage)(x, m, len, post, scale);
        return;
    }
    const signed char *H = lowbit_hadamard_m(m);
    const V vs = FN(vset1)(scale), zero = FN(vset1)(0);
    for (int64_t i = 0; i < len; i += W) {
        V col[28];
        for (int k = 0; k < m; k++) col[k] = FN(vld)(x + k * len + i);
        for (int j = 0; j < m; j++) {
            V acc = zero;
            for (int k = 0; k < m; k++)
                acc = H[j * m + k] > 0 ? FN(vadd)(acc, col[k]) : FN(vsub)(acc, col[k]);
            acc = FN(vmul)(acc, vs);
            if (post) acc = FN(vmul)(acc, FN(vld)(post + j * len + i));
            FN(vst)(x + j * len + i, acc);
        }
    }
}

/* 1 if every s[i] is exactly +1 or -1 (the reference's bit-pattern test, W lanes at a time). */
static int FN(signs_ok)(const T *s, int64_t n) {
    sign_bits b[FWHT_SIGN_CHAINS];
    for (int c = 0; c < FWHT_SIGN_CHAINS; c++) b[c] = sign_bits_zero();
    int64_t i = 0;
    for (; i + FWHT_SIGN_CHAINS * W <= n; i += FWHT_SIGN_CHAINS * W)
        for (int c = 0; c < FWHT_SIGN_CHAINS; c++)
            b[c] = sign_bits_or(b[c], FN(sign_err)(s + i + c * W));
    for (; i + W <= n; i += W) b[0] = sign_bits_or(b[0], FN(sign_err)(s + i));
    for (int c = 1; c < FWHT_SIGN_CHAINS; c++) b[0] = sign_bits_or(b[0], b[c]);
    return !sign_bits_any(b[0]) && REF(signs_ok)(s + i, n - i);
}

#undef LOGW
#undef W
#undef V
#undef T

