/* AVX-512 VNNI GEMV / GEMM in the file layout for ggml's group-32 blocks with Q8_0 activations:
 * Q5_0 (GEMV and GEMM) and Q8_0 (GEMM; its GEMV is q8_0_gemv_avx512vnni.c).  Equal to the scalar
 * references (ref/kquant.c, ref/dot.c) bit for bit.
 *
 * vpdpbusd multiplies unsigned by signed bytes, so both types enter as unsigned codes u = w + OFF:
 * Q5_0's 5-bit codes as they are (value c - 16, OFF 16), Q8_0's signed codes flipped (w ^ 0x80 =
 * w + 128, OFF 128).  A block's dpbusd sum is then sum(w a) + OFF s[b], with s[b] the activation
 * code sum (formats.h), and subtracting OFF s[b] leaves the reference's exact int32 block sum
 * (|partial sums| <= 32 * 255 * 128 + 128 * 4096, far inside int32).  The float step per block is
 * the reference's: acc += (float)isum * (dw * da), blocks in order.
 *
 * GEMV: one zmm holds two consecutive blocks of one row (bytes 0-31 block b, 32-63 block b + 1);
 * the dpbusd of 8 rows are reduced by one transpose-add tree into the 16 (row, block) sums, lanes
 * [block b: rows 0-7 | block b + 1: rows 0-7], and the float steps run on 16 lanes, block b's
 * before b + 1's.  GEMM: see below. */
#include <immintrin.h>
#include <stddef.h>

#include "../internal.h"
#include "avx512_reduce.h"

#define AI static inline __attribute__((always_inline))

enum { T_Q8_0, T_Q5_0 };
#define BB(T) ((T) == T_Q8_0 ? (int64_t)sizeof(lowbit_block_q8_0) : (int64_t)sizeof(lowbit_block_q5_0))
#define OFF(T) ((T) == T_Q8_0 ? 128 : 16)
/* both blocks start with their fp16 scale */
#define DOFF 0

/* L2 prefetch distance of the GEMV's 8-row run (as q8_0_gemv_avx512vnni.c) */
#ifndef LOWBIT_PF_G32_512
#define LOWBIT_PF_G32_512 32768
#endif

AI uint64_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

AI uint64_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Unsigned codes u = w + OFF of the block at p (bytes 0-31) and of the next one (bytes 32-63;
 * zero unless two). */
AI __m512i codes2(int T, const uint8_t *p, int two) {
    if (T == T_Q8_0) {
        const uint8_t *c = p + offsetof(lowbit_block_q8_0, qs);
        const __m256i lo = _mm256_loadu_si256((const __m256i *)c);
        const __m256i flip = _mm256_set1_epi8((char)0x80);
        if (!two) return _mm512_zextsi256_si512(_mm256_xor_si256(lo, flip));
        const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                             _mm256_loadu_si256((const __m256i *)(c + BB(T))), 1);
        return _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80));
    }
    /* Q5_0: code j < 16 is the low nibble of qs[j], code j + 16 its high nibble, bit 4 is bit j
     * of qh: 128-bit lanes [qs_b, qs_b >> 4, qs_b+1, qs_b+1 >> 4], nibbles masked, then the qh
     * bits of both blocks as one 64-bit byte mask */
    const uint8_t *qs = p + offsetof(lowbit_block_q5_0, qs);
    const __m128i q0 = _mm_loadu_si128((const __m128i *)qs);
    const __m128i q1 = two ? _mm_loadu_si128((const __m128i *)(qs + BB(T))) : _mm_setzero_si128();
    const __m512i t = _mm512_castsi256_si512(_mm256_set_m128i(q1, q0));
    __m512i x = _mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(1, 1, 0, 0));
    x = _mm512_and_si512(_mm512_mask_srli_epi16(x, 0xff00ff00u, x, 4), _mm512_set1_epi8(15));
    const uint8_t *qh = p + offsetof(lowbit_block_q5_0, qh);
    const uint64_t hi = ld32(qh) | (two ? ld32(qh + BB(T)) << 32 : 0);
    return _mm512_mask_add_epi8(x, (__mmask64)hi, x, _mm512_set1_epi8(16));
}

/* The 16 fp16 scales [block b: rows 0-7 | block b + 1: rows 0-7] (rows at p + i rb) as floats;
 * gathered in general-purpose registers. */
AI __m512 row_scales(int T, const uint8_t *p, int64_t rb, int two) {
    uint64_t h[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        h[0] |= ld16(p + i * rb + DOFF) << (16 * i);
        h[1] |= ld16(p + (i + 4) * rb + DOFF) << (16 * i);
        if (two) {
            h[2] |= ld16(p + i * rb + BB(T) + DOFF) << (16 * i);
            h[3] |= ld16(p + (i + 4) * rb + BB(T) + DOFF) << (16 * i);
        }
    }
    return _mm512_cvtph_ps(_mm256_set_epi64x((long long)h[3], (long long)h[2], (long long)h[1],
                                             (long long)h[0]));
}

/* acc (8 lanes) += (float)isum * (dw * da) for block b's lanes, then block b + 1's if two */
AI __m256 fstep2(__m256 acc, __m512i isum, __m512 dw, __m512 da, int two) {
    const __m512 prod = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, da));
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(prod));
    if (two) acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(prod, 1));
    return acc;
}

/* ---- GEMV: 8 rows x one activation ---------------------------------------------------------- */

/* Blocks b, b + 1 of rows r .. r + 7 (p at block b of row r). */
AI __m256 rows8_step(int T, const uint8_t *p, int64_t rb, int64_t b, const lowbit_act *a,
                     __m256 acc, int two) {
    const __m512i av = two ? _mm512_loadu_si512(a->q + 32 * b)
                           : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(a->q + 32 * b)));
    __m512i v[8];
    for (int i = 0; i < 8; i++)
        v[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes2(T, p + i * rb, two), av);
    /* OFF s[b] on block b's lanes, OFF s[b + 1] on block b + 1's */
    __m512i off = _mm512_set1_epi32(OFF(T) * a->s[b]);
    if (two) off = _mm512_mask_set1_epi32(off, 0xff00, OFF(T) * a->s[b + 1]);
    const __m512i isum = _mm512_sub_epi32(reduce8(v), off);
    __m512 da = _mm512_set1_ps(a->d[b]);
    if (two) da = _mm512_mask_broadcastss_ps(da, 0xff00, _mm_load_ss(a->d + b + 1));
    return fstep2(acc, isum, row_scales(T, p, rb, two), da, two);
}

AI __m256 rows8(int T, const uint8_t *p, int64_t rb, int64_t nb, const lowbit_act *a) {
    const char *run = (const char *)p, *pf = run + LOWBIT_PF_G32_512;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        if (LOWBIT_PF_G32_512)
            for (const char *lim = run + 8 * BB(T) * (b + 2) + LOWBIT_PF_G32_512; pf < lim; pf += 64)
                _mm_prefetch(pf, _MM_HINT_T1);
        acc = rows8_step(T, p + b * BB(T), rb, b, a, acc, 1);
    }
    if (b < nb) acc = rows8_step(T, p + b * BB(T), rb, b, a, acc, 0);
    return acc;
}

/* One row (matrices of fewer than 8 rows), block by block. */
AI float row1(int T, const uint8_t *row, int64_t nb, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const __m512i av = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(a->q + 32 * b)));
        const __m512i v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes2(T, row + b * BB(T), 0), av);
        const int32_t isum = _mm512_reduce_add_epi32(v) - OFF(T) * a->s[b];
        acc += (float)isum * (lowbit_fp16_to_fp32((uint16_t)ld16(row + b * BB(T) + DOFF)) * a->d[b]);
    }
    return acc;
}

AI void gemv_g32(int T, const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                 float *y) {
    const int64_t nb = a->n / 32;
    const uint8_t *w8 = (const uint8_t *)w;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) _mm256_storeu_ps(y + r - r0, rows8(T, w8 + r * rb, rb, nb, a));
    if (r == r1) return;
    if (r1 >= 8) { /* rows r1 - 8 .. r1 - 1 (all exist), keeping the new ones */
        float t[8];
        _mm256_storeu_ps(t, rows8(T, w8 + (r1 - 8) * rb, rb, nb, a));
        memcpy(y + r - r0, t + 8 - (r1 - r), sizeof(float) * (size_t)(r1 - r));
    } else {
        for (; r < r1; r++) y[r - r0] = row1(T, w8 + r * rb, nb, a);
    }
}

/* ---- GEMM: rows x 16 activations, one activation per lane -------------------------------------
 *
 * The activation codes of 16 activations are laid out once per call and window of blocks as
 * [block][4-code group k][activation][4 codes], so that one dpbusd of a row's 4 codes k
 * (broadcast) against group k adds 4 products to each activation's lane: after a block's 8 groups
 * every lane holds its exact block sum and no horizontal reduction is needed.  A row's codes are
 * unpacked once per block into 32 bytes, 8 rows share each activation load.  A short last group
 * of activations repeats its last one and keeps its own lanes. */

#define GEMM_WINDOW 32
#define NACT 16

typedef struct {
    int8_t q[GEMM_WINDOW][8][NACT][4];
    float d[GEMM_WINDOW][NACT];
    int32_t off[GEMM_WINDOW][NACT]; /* OFF x code sum */
} act_tile;

AI void fill_tile(int T, const lowbit_act *const *A, int64_t w0, int64_t wn, act_tile *t) {
    for (int64_t b = 0; b < wn; b++)
        for (int j = 0; j < NACT; j++) {
            const int8_t *q = A[j]->q + 32 * (w0 + b);
            for (int k = 0; k < 8; k++) memcpy(t->q[b][k][j], q + 4 * k, 4);
            t->d[b][j] = A[j]->d[w0 + b];
            t->off[b][j] = OFF(T) * A[j]->s[w0 + b];
        }
}

/* R rows (p[i] at the window's first block) x the tile's activations, blocks 0 .. wn - 1.  The
 * rows' codes are unpacked into cu first, so that the broadcasts are loads (not shuffles). */
AI void rows_x16(int T, int R, const uint8_t *const *p, int64_t wn, const act_tile *t, __m512 *acc) {
    uint8_t cu[8][GEMM_WINDOW][32];
    for (int i = 0; i < R; i++)
        for (int64_t b = 0; b < wn; b++)
            _mm256_storeu_si256((__m256i *)cu[i][b], _mm512_castsi512_si256(codes2(T, p[i] + b * BB(T), 0)));
    for (int64_t b = 0; b < wn; b++) {
        __m512i v[8];
        for (int i = 0; i < R; i++) v[i] = _mm512_setzero_si512();
        for (int k = 0; k < 8; k++) {
            const __m512i av = _mm512_loadu_si512(t->q[b][k]);
            for (int i = 0; i < R; i++) {
                int32_t u;
                memcpy(&u, cu[i][b] + 4 * k, 4);
                v[i] = _mm512_dpbusd_epi32(v[i], _mm512_set1_epi32(u), av);
            }
        }
        const __m512i off = _mm512_loadu_si512(t->off[b]);
        const __m512 da = _mm512_loadu_ps(t->d[b]);
        for (int i = 0; i < R; i++) {
            const __m512 dw = _mm512_set1_ps(lowbit_fp16_to_fp32((uint16_t)ld16(p[i] + b * BB(T) + DOFF)));
            const __m512 prod = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v[i], off)),
                                              _mm512_mul_ps(dw, da));
            acc[i] = _mm512_add_ps(acc[i], prod);
        }
    }
}

/* Rows r .. r + R - 1 against activations c .. c + nv - 1 over one window (accumulators from y
 * after the first). */
AI void rows_tile(int T, int R, const void *w, int64_t rb, int64_t r, int64_t w0, int64_t wn,
                  const act_tile *t, int64_t c, int nv, float *y, int64_t ldy) {
    const uint8_t *p[8];
    __m512 acc[8];
    float o[NACT];
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w + (r + i) * rb + w0 * BB(T);
        memset(o, 0, sizeof o);
        if (w0)
            for (int j = 0; j < nv; j++) o[j] = y[(c + j) * ldy + r + i];
        acc[i] = _mm512_loadu_ps(o);
    }
    rows_x16(T, R, p, wn, t, acc);
    for (int i = 0; i < R; i++) {
        _mm512_storeu_ps(o, acc[i]);
        for (int j = 0; j < nv; j++) y[(c + j) * ldy + r + i] = o[j];
    }
}

AI void gemm_g32(int T, const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                 int64_t batch, float *y, int64_t ldy) {
    const int64_t nb = a->n / 32;
    act_tile t;
    for (int64_t c = 0; c < batch; c += NACT) {
        const int nv = batch - c < NACT ? (int)(batch - c) : NACT;
        const lowbit_act *A[NACT];
        for (int j = 0; j < NACT; j++) A[j] = &a[c + (j < nv ? j : nv - 1)];
        for (int64_t w0 = 0; w0 < nb; w0 += GEMM_WINDOW) {
            const int64_t wn = nb - w0 < GEMM_WINDOW ? nb - w0 : GEMM_WINDOW;
            fill_tile(T, A, w0, wn, &t);
            int64_t r = r0;
            for (; r + 8 <= r1; r += 8) rows_tile(T, 8, w, rb, r, w0, wn, &t, c, nv, y, ldy);
            for (; r < r1; r++) rows_tile(T, 1, w, rb, r, w0, wn, &t, c, nv, y, ldy);
        }
    }
}

void gemv_q5_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    gemv_g32(T_Q5_0, w, rb, r0, r1, a, y);
}

void gemm_q5_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    gemm_g32(T_Q5_0, w, rb, r0, r1, a, batch, y, ldy);
}

void gemm_q8_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    gemm_g32(T_Q8_0, w, rb, r0, r1, a, batch, y, ldy);
}
