/* lowbit_attention's loop on AVX-512 (ops_attention-inl.h's attention_loop, the same bits): the
 * query rows that share a key / value head (grouped-query attention) are run together, up to 4 at a
 * time, so each key and value row is loaded once for all of them.
 *
 * Scores: 16 (row, key) slots at a time, each slot's 16 partial sums in one zmm (dot16's lanes),
 * and the 16 slots folded together, transposed: fold16's four halving steps on 16 vectors take 15
 * adds and 30 shuffles instead of 16 horizontal folds.  Softmax 16 scores a vector (attn_exp's
 * operations lane by lane), then the weighted sum of the value rows for 64 columns of every row of
 * the group at once (attn_pv's order per column).  Head sizes that are not a multiple of 16 take
 * the plain loop (attention_loop, built with this file's flags). */
#include <immintrin.h>

#include "../ops_attention-inl.h"

#define AI static inline __attribute__((always_inline))

/* attn_exp on 16 lanes: its operations in its order */
AI __m512 exp16(__m512 x) {
    x = _mm512_castsi512_ps(_mm512_min_epu32(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xC2AE0000u)));
    const __m512i k = _mm512_cvttps_epi32(
        _mm512_sub_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _mm512_set1_ps(0.5f)));
    const __m512 kf = _mm512_cvtepi32_ps(k);
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(0.693145752f))),
                                   _mm512_mul_ps(kf, _mm512_set1_ps(1.42860677e-6f)));
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    const __m512 two_k = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
    return _mm512_mul_ps(p, two_k);
}

/* fold16 of 16 vectors at once: lane 4 k + m of the result is fold16 of a[k + 4 m]. */
AI __m512 fold16x16(const __m512 a[16]) {
    __m512 t[8], u[4], w[2];
    for (int i = 0; i < 8; i++) /* lanes l + (l + 8): [a l0..7 | b l0..7] */
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* + 4: [a 0..3 | b 0..3 | c 0..3 | d 0..3] */
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* + 2, within each 128-bit block: [x 0, x 1, y 0, y 1] */
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    /* + 1 */
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
}

/* Scores of G rows (q, hd apart) against keys K[0 .. n) into p (stride ps a row), scaled:
 * 16 / G keys a step.  Slot x of fold16x16 lands in lane L = 4 (x % 4) + x / 4, which serves row
 * L / (16 / G), key L % (16 / G): each row's scores are one run of the result. */
AI void scores(const float *q, const float *K, int64_t hd, int64_t n, float scale, float *p,
               int64_t ps, const int G) {
    const int KS = 16 / G; /* keys a step */
    for (int64_t j0 = 0; j0 < n; j0 += KS) {
        const float *kr[16]; /* the step's key rows (past n: the last one again, not stored) */
        for (int k = 0; k < KS; k++) kr[k] = K + (j0 + k < n ? j0 + k : n - 1) * hd;
        __m512 acc[16];
        for (int x = 0; x < 16; x++) acc[x] = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            __m512 qv[ATTN_GROUP];
            for (int r = 0; r < G; r++) qv[r] = _mm512_loadu_ps(q + r * hd + i);
            for (int x = 0; x < 16; x++) {
                const int L = 4 * (x % 4) + x / 4;
                acc[x] = _mm512_add_ps(acc[x], _mm512_mul_ps(qv[L / KS], _mm512_loadu_ps(kr[L % KS] + i)));
            }
        }
        const __m512 s = _mm512_mul_ps(fold16x16(acc), _mm512_set1_ps(scale));
        const int64_t left = n - j0 < KS ? n - j0 : KS;
        for (int r = 0; r < G; r++) /* row r's run, lanes r KS .., moved down to lane 0 */
            _mm512_mask_storeu_ps(p + r * ps + j0, (__mmask16)((1u << left) - 1),
                                  r ? _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                                             _mm512_set1_epi32(r * KS)), s)
                                    : s);
    }
}

/* attention_loop's max and NaN test, then attn_exp_sum, on one row of n scores: returns 1 / sum,
 * or 0 if the row is NaN (a NaN or infinite score). */
AI float softmax_row(float *p, int64_t n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(p + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mx = _mm512_max_ps(mx, v);
    }
    if (j < n) {
        const __mmask16 t = (__mmask16)((1u << (n - j)) - 1);
        const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), t, p + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mx = _mm512_max_ps(mx, v);
    }
    const float m = _mm512_reduce_max_ps(mx); /* exact; the sign of a zero maximum does not matter */
    if (nan || !(m > -INFINITY && m < INFINITY)) return 0;
    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(p + j), mv));
        _mm512_storeu_ps(p + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    float a[16];
    _mm512_storeu_ps(a, acc);
    float s = fold16(a);
    if (j < n) {
        const __mmask16 t = (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(p + j, t, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, p + j), mv)));
        for (; j < n; j++) s += p[j];
    }
    return 1.0f / s;
}

/* o_r[c] = sum over j in order of (p_r[j] * inv_r) * V[j][c], 64 columns of G rows at a time */
AI void weighted_values(float *out, const float *p, int64_t ps, const float *inv, const float *V,
                        int64_t n, int64_t vd, const int G) {
    for (int64_t c0 = 0; c0 < vd; c0 += 64) {
        const int nv = vd - c0 >= 64 ? 4 : (int)((vd - c0) / 16);
        __m512 acc[ATTN_GROUP][4];
        for (int r = 0; r < G; r++)
            for (int b = 0; b < 4; b++) acc[r][b] = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j++) {
            const float *v = V + j * vd + c0;
            __m512 vv[4];
            for (int b = 0; b < 4; b++) vv[b] = b < nv ? _mm512_loadu_ps(v + 16 * b) : _mm512_setzero_ps();
            for (int r = 0; r < G; r++) {
                const __m512 a = _mm512_set1_ps(p[r * ps + j] * inv[r]);
                for (int b = 0; b < 4; b++)
                    if (b < nv) acc[r][b] = _mm512_add_ps(acc[r][b], _mm512_mul_ps(a, vv[b]));
            }
        }
        for (int r = 0; r < G; r++)
            for (int b = 0; b < nv; b++) _mm512_storeu_ps(out + r * vd + c0 + 16 * b, acc[r][b]);
    }
}

/* G rows of one group: query rows q (hd apart), outputs out (vd apart), keys lo .. lo + n - 1 */
AI void group_rows(const float *q, const float *K, const float *V, int64_t hd, int64_t vd, int64_t n,
                   float scale, float *out, float *p, int64_t ps, const int G) {
    scores(q, K, hd, n, scale, p, ps, G);
    float inv[ATTN_GROUP];
    for (int r = 0; r < G; r++) inv[r] = softmax_row(p + r * ps, n);
    weighted_values(out, p, ps, inv, V, n, vd, G);
    for (int r = 0; r < G; r++)
        if (inv[r] == 0) /* NaN / inf scores: NaN out, as numpy */
            for (int64_t c = 0; c < vd; c++) out[r * vd + c] = NAN;
}

void attention_loop_avx512(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                           const float *kc, const float *vc, int64_t ctx, int64_t pos, int64_t window,
                           float scale, float *out, float *p, int64_t r0, int64_t r1);

void attention_loop_avx512(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                           const float *kc, const float *vc, int64_t ctx, int64_t pos, int64_t window,
                           float scale, float *out, float *p, int64_t r0, int64_t r1) {
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
