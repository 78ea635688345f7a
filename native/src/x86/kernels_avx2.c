/* AVX2 (+FMA, F16C) kernels: GEMV / GEMM of every weight format with A8 activations, on the file
 * layout and on the packed layout (repack.c; the packed GEMM is gemm_avx2.c), the A8 activation
 * quantizer, F32 / F16 GEMV.
 *
 * The results equal the scalar reference (ref/dot.c) bit for bit, not just within a tolerance:
 *  - every format is unpacked to one byte per weight *in activation order* (32 weights per ymm),
 *    so one vpmaddubsw (unsigned code x signed activation) per 32 weights gives exact int16 pair
 *    sums.  Codes are <= 3 (Q1_0: 0 or 2) and |activation| <= 128, so a pair is <= 768 and the sum
 *    of four vpmaddubsw (one 128-weight group) <= 3072: no int16 saturation anywhere.  Q8_0 codes
 *    are signed: |w| x sign(a, w) keeps the product and fits (2 * 128 * 127 < 32767); this needs
 *    A8 codes in [-127, 127] as formats.h defines them (sign(-128, w < 0) would wrap).
 *  - the +1 code offset is undone once per group with the activation code sum s[g];
 *  - the int32 group sums of 4 rows (GEMV) or 4 activation columns (GEMM) are reduced together
 *    into one xmm (lane = row / column) -- the packed group-32 GEMV instead transposes its codes
 *    so that a lane is a row from the start (packed_gemv32) -- and combined as the spec does,
 *    acc += (float)isum * (d_w * d_a), a multiply and an add that the library's -ffp-contract=off
 *    keeps from fusing into an FMA (the spec rounds the product).
 */
#include <immintrin.h>
#include <stdlib.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))

/* Software prefetch distances (bytes) of the GEMV weight streams, measured here (DRAM regime, one
 * thread, in-run bandwidth probe; the shares are against the probe of then, which read 1.1-1.25x
 * slower than read_bytes_avx2 does): hardware prefetch alone streamed the packed layout at ~65 % of
 * the read bandwidth; prefetching both lines of each 128-byte 4-row tile 2 KB ahead gave 75-85 %,
 * 16 KB ahead ~1.1x more for TQ2_0 (85-95 %; 4 KB: 1.05x, 32-64 KB: no better; the 32-group
 * formats are compute-bound and gain little).  The Q8_0 file layout
 * (8 row streams side by side, prefetched as the one run of memory they form) wants 32 KB:
 * 1.5x the 4-row kernel with per-row prefetch 1 KB ahead.  LOWBIT_PF_FILE: the other file-layout
 * kernels, per row stream. */
#ifndef LOWBIT_PF_DIST
#define LOWBIT_PF_DIST 16384
#endif
#ifndef LOWBIT_PF_Q8
#define LOWBIT_PF_Q8 32768
#endif
#ifndef LOWBIT_PF_FILE
#define LOWBIT_PF_FILE 1024
#endif

/* ---- shared pieces ---------------------------------------------------------------------------- */

/* Horizontal sums as transposes: unpack lo/hi + add halves the vectors at each step.  vphaddd
 * would do it in fewer instructions, but on Zen 3 it issues one per 2 cycles (unpacks: ~2 per
 * cycle).  Integer sums: exact in any order. */
AI __m256i tr32(__m256i x, __m256i y) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y));
}
AI __m256i tr64(__m256i x, __m256i y) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
}

/* lane i of the result = sum of the 8 int32 lanes of v_i */
AI __m128i hsum4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i h = tr64(tr32(v0, v1), tr32(v2, v3)); /* [v0 v1 v2 v3] per half */
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* lane g of the result = sum of the 8 int32 lanes of v[g] */
AI __m256i hsum_8x8(const __m256i *v) {
    __m256i u0 = tr64(tr32(v[0], v[1]), tr32(v[2], v[3]));
    __m256i u1 = tr64(tr32(v[4], v[5]), tr32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                            _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* acc += (float)(isum - off) * (dw * da), lane by lane: the spec's order and roundings */
AI __m128 group_acc(__m128 acc, __m128i isum, __m128i off, __m128 dw, __m128 da) {
    __m128 sc = _mm_mul_ps(dw, da);
    __m128 p = _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(isum, off)), sc);
    return _mm_add_ps(acc, p);
}
AI __m256 group_acc8(__m256 acc, __m256i isum, __m256i off, __m256 dw, __m256 da) { /* 8 lanes */
    __m256 sc = _mm256_mul_ps(dw, da);
    __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, off)), sc);
    return _mm256_add_ps(acc, p);
}

AI uint16_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ---- formats: unit size, group size, code unpacking ------------------------------------------- */

/* A "unit" is what one unpack produces: a file block (Q2_0: two 64-blocks; packed: one 128-weight
 * chunk), as NV = U / 32 vectors of byte codes in activation order. */
enum { F_TQ1, F_TQ2, F_I2S, F_Q1, F_Q2, F_PQ2, F_PTQ1, F_Q8, F_PK };

AI int unit_of(int F) { return F == F_TQ1 || F == F_TQ2 ? 256 : F == F_Q8 ? 32 : 128; }
/* activation group of the file-layout kernels: lowbit_act_group of the format */
AI int group_of(int F) {
    return F == F_TQ1 || F == F_TQ2 ? 256 : F == F_I2S || F == F_PQ2 || F == F_PTQ1 ? 128 : 32;
}
/* bytes per unit in the file layout */
AI int ustride_of(int F) {
    switch (F) {
    case F_TQ1: return 54;
    case F_TQ2: return 66;
    case F_I2S: return 32;
    case F_Q1: return 18;
    case F_Q2: return 36;
    case F_PQ2: return 34;
    case F_PTQ1: return 28;
    case F_Q8: return 34;
    default: return 32;
    }
}

/* Base-3 trits: byte x with 16-bit-lane multiplier m = 3^n gives ((uint8)(x * 3^n) * 3) >> 8.
 * With x in the high byte of a 16-bit lane (low byte zero), vpmullw keeps (x * 3^n mod 256) << 8
 * exactly; vpmulhuw by 3 then reads 3 * that >> 16 = the trit.  Even and odd bytes go separately
 * and are merged back in place. */
AI __m256i trits(__m256i b, __m256i m) {
    const __m256i hi = _mm256_set1_epi16((short)0xFF00);
    __m256i te = _mm256_mullo_epi16(_mm256_slli_epi16(b, 8), m);
    __m256i to = _mm256_mullo_epi16(_mm256_and_si256(b, hi), m);
    __m256i re = _mm256_mulhi_epu16(te, _mm256_set1_epi16(3));      /* trit in the low byte */
    __m256i ro = _mm256_mulhi_epu16(to, _mm256_set1_epi16(0x300));  /* 3t: trit in the high byte */
    return _mm256_blendv_epi8(re, ro, hi);
}

AI __m256i m16(int a, int b) { /* multiplier a in the low 128-bit lane, b in the high one */
    return _mm256_setr_epi16(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
}

/* The four 2-bit planes of 32 bytes, (v >> 2k) & 3. */
AI void planes(__m256i v, __m256i P[4]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    P[0] = _mm256_and_si256(v, m3);
    P[1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
    P[2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
    P[3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
}

/* Q2_0 / PQ2_0 keep 4 consecutive weights per byte: plane k holds weights 4p + k of each 128-bit
 * lane's 64.  Interleaving the planes byte-wise then 16-bit-wise restores weight order. */
AI void planes_to_order(const __m256i P[4], __m256i c[4]) {
    __m256i lo01 = _mm256_unpacklo_epi8(P[0], P[1]), hi01 = _mm256_unpackhi_epi8(P[0], P[1]);
    __m256i lo23 = _mm256_unpacklo_epi8(P[2], P[3]), hi23 = _mm256_unpackhi_epi8(P[2], P[3]);
    __m256i u0 = _mm256_unpacklo_epi16(lo01, lo23), u1 = _mm256_unpackhi_epi16(lo01, lo23);
    __m256i u2 = _mm256_unpacklo_epi16(hi01, hi23), u3 = _mm256_unpackhi_epi16(hi01, hi23);
    c[0] = _mm256_permute2x128_si256(u0, u1, 0x20);
    c[1] = _mm256_permute2x128_si256(u2, u3, 0x20);
    c[2] = _mm256_permute2x128_si256(u0, u1, 0x31);
    c[3] = _mm256_permute2x128_si256(u2, u3, 0x31);
}

/* Unpack one unit at p (file layout: the unit's first byte; packed: the 32-byte chunk) into
 * c[U / 32].  `half`: a Q2_0 unit whose second block does not exist. */
AI void decode(const int F, const uint8_t *p, int half, __m256i c[8]) {
    switch (F) {
    case F_TQ2: { /* qs[j + m] bits 2n = weight (j/32)*128 + 32n + m */
        planes(_mm256_loadu_si256((const __m256i *)p), c);
        planes(_mm256_loadu_si256((const __m256i *)(p + 32)), c + 4);
        break;
    }
    case F_I2S: { /* byte m: weights m, m+32, m+64, m+96 at shifts 6, 4, 2, 0 */
        __m256i P[4];
        planes(_mm256_loadu_si256((const __m256i *)p), P);
        c[0] = P[3], c[1] = P[2], c[2] = P[1], c[3] = P[0];
        break;
    }
    case F_PK: planes(_mm256_load_si256((const __m256i *)p), c); break;
    case F_PQ2: {
        __m256i P[4];
        planes(_mm256_loadu_si256((const __m256i *)(p + 2)), P);
        planes_to_order(P, c);
        break;
    }
    case F_Q2: {
        __m128i lo = _mm_loadu_si128((const __m128i *)(p + 2));
        __m128i hi = half ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)(p + 20));
        __m256i P[4];
        planes(_mm256_set_m128i(hi, lo), P);
        planes_to_order(P, c);
        break;
    }
    case F_Q1: { /* bit j%8 of qs[j/8]: spread bytes, test bits, code 2 for set */
        const __m256i B = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 2)));
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
        const __m256i two = _mm256_set1_epi8(2);
        for (int t = 0; t < 4; t++) {
            const char b0 = (char)(4 * t), b1 = (char)(4 * t + 1), b2 = (char)(4 * t + 2),
                       b3 = (char)(4 * t + 3);
            __m256i idx = _mm256_setr_epi8(b0, b0, b0, b0, b0, b0, b0, b0, b1, b1, b1, b1, b1, b1,
                                           b1, b1, b2, b2, b2, b2, b2, b2, b2, b2, b3, b3, b3, b3,
                                           b3, b3, b3, b3);
            __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(B, idx), bit);
            c[t] = _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), two);
        }
        break;
    }
    case F_Q8: c[0] = _mm256_loadu_si256((const __m256i *)(p + 2)); break;
    case F_TQ1: {
        /* qs[0..31]: trit n = weight 32n + m; qs[32..47]: 160 + 16n + m (two trits per ymm,
         * one per 128-bit lane); qh[0..3]: 240 + 4n + m (one dword per trit). */
        const __m256i B0 = _mm256_loadu_si256((const __m256i *)p);
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(p + 32));
        uint32_t qh;
        memcpy(&qh, p + 48, 4);
        const __m256i B1 = _mm256_broadcastsi128_si256(q1);
        const __m256i B2 = _mm256_set_m128i(_mm_set1_epi32((int)qh), q1);
        c[0] = trits(B0, _mm256_set1_epi16(1));
        c[1] = trits(B0, _mm256_set1_epi16(3));
        c[2] = trits(B0, _mm256_set1_epi16(9));
        c[3] = trits(B0, _mm256_set1_epi16(27));
        c[4] = trits(B0, _mm256_set1_epi16(81));
        c[5] = trits(B1, m16(1, 3));
        c[6] = trits(B1, m16(9, 27));
        c[7] = trits(B2, _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27));
        break;
    }
    case F_PTQ1: {
        /* qs[0..15]: 16n + m; qs[16..23]: 80 + 8n + m; qh[0..1]: 120 + 2n + h */
        const __m128i q0 = _mm_loadu_si128((const __m128i *)p);
        const __m128i q1 = _mm_loadl_epi64((const __m128i *)(p + 16));
        const __m128i qh = _mm_set1_epi16((short)ld16(p + 24));
        const __m128i q11 = _mm_unpacklo_epi64(q1, q1);
        const __m256i B01 = _mm256_broadcastsi128_si256(q0);
        const __m256i B2 = _mm256_set_m128i(q11, q0);
        const __m256i B3 = _mm256_set_m128i(_mm_unpacklo_epi64(q1, qh), q11);
        c[0] = trits(B01, m16(1, 3));
        c[1] = trits(B01, m16(9, 27));
        c[2] = trits(B2, _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 1, 1, 3, 3, 3, 3));
        c[3] = trits(B3, _mm256_setr_epi16(9, 9, 9, 9, 27, 27, 27, 27, 81, 81, 81, 81, 1, 3, 9, 27));
        break;
    }
    }
}

/* int32 lanes whose total is sum(code * act) over the nv code vectors from c[v0] of a decoded
 * unit (activations aq[32 v]).  nv <= 8 int16 pair sums of codes <= 3 stay below 6144. */
AI __m256i vec_dot(const int F, const __m256i c[8], int v0, int nv, const int8_t *aq) {
    __m256i s16 = _mm256_setzero_si256();
    for (int v = v0; v < v0 + nv; v++) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(aq + 32 * v));
        __m256i m = F == F_Q8 ? _mm256_maddubs_epi16(_mm256_abs_epi8(c[v]), _mm256_sign_epi8(a, c[v]))
                              : _mm256_maddubs_epi16(c[v], a);
        s16 = _mm256_add_epi16(s16, m);
    }
    return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
}

/* the same over group gi of a file-layout unit */
AI __m256i group_dot(const int F, const __m256i c[8], int gi, const int8_t *aq) {
    return vec_dot(F, c, gi * (group_of(F) / 32), group_of(F) / 32, aq);
}

/* fp16 scale of group gi of unit u in a file-layout row (I2_S: none) */
AI uint16_t file_scale(const int F, const uint8_t *unit, int gi) {
    switch (F) {
    case F_TQ1: return ld16(unit + 52);
    case F_TQ2: return ld16(unit + 64);
    case F_PTQ1: return ld16(unit + 26);
    case F_Q2: return ld16(unit + 18 * (gi / 2)); /* two 32-groups per 64-block */
    default: return ld16(unit);
    }
}

/* ---- GEMV, file layout: 4 rows at a time share each activation load and one reduction ---------- */

AI void gemv_file(const int F, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                  const lowbit_act *a, float *y) {
    const int U = unit_of(F), G = group_of(F), NG = U / G, US = ustride_of(F);
    const int off = F == F_Q8 ? 0 : 1;
    const int64_t n = a->n;
    const int64_t nfull = n / U, ntail = (n % U) / G; /* Q2_0: a last lone 64-block */
    for (int64_t r = r0; r < r1; r += 4) {
        const uint8_t *row[4];
        for (int i = 0; i < 4; i++)
            row[i] = (const uint8_t *)w + (r + i < r1 ? r + i : r1 - 1) * row_bytes;
        __m128 acc = _mm_setzero_ps();
        for (int64_t u = 0; u <= nfull; u++) {
            const int ng = u < nfull ? NG : (int)ntail;
            if (ng == 0) break;
            __m256i iv[4][4];
            for (int i = 0; i < 4; i++) {
                __m256i c[8];
                if (LOWBIT_PF_FILE && US >= 32) /* four row streams: help the prefetchers */
                    _mm_prefetch((const char *)(row[i] + u * US + LOWBIT_PF_FILE), _MM_HINT_T0);
                decode(F, row[i] + u * US, ng < NG, c);
                for (int gi = 0; gi < ng && gi < NG; gi++) iv[i][gi] = group_dot(F, c, gi, a->q + u * U);
            }
            for (int gi = 0; gi < ng && gi < NG; gi++) {
                const int64_t g = u * NG + gi;
                __m128 dw = _mm_set1_ps(1.0f);
                if (F != F_I2S)
                    dw = _mm_cvtph_ps(_mm_setr_epi16((short)file_scale(F, row[0] + u * US, gi),
                                                     (short)file_scale(F, row[1] + u * US, gi),
                                                     (short)file_scale(F, row[2] + u * US, gi),
                                                     (short)file_scale(F, row[3] + u * US, gi), 0,
                                                     0, 0, 0));
                __m128i isum = hsum4(iv[0][gi], iv[1][gi], iv[2][gi], iv[3][gi]);
                acc = group_acc(acc, isum, _mm_set1_epi32(off * a->s[g]), dw,
                                _mm_set1_ps(a->d[g]));
            }
        }
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && r + i < r1; i++) y[r + i - r0] = out[i];
    }
}

/* ---- GEMM, file layout: one row x 4 activation columns; each unpacked unit is used 4 times --------
 * Columns outermost: 4 activation rows (4 * cols bytes) stay in L1 while the task's rows stream
 * from L2. */

/* transposed per-group activation scales / sums of a column tile: dT[g][j], sT[g][j] */
typedef struct {
    float *d;
    int32_t *s;
    void *mem;
} act_t;

static int transpose_acts(const lowbit_act *a, int64_t batch, act_t *T) {
    const int64_t ng = a[0].n / a[0].group, bp = (batch + 3) & ~(int64_t)3;
    T->mem = malloc((size_t)(ng * bp) * 8 + 32);
    if (!T->mem) return -1;
    T->d = (float *)T->mem;
    T->s = (int32_t *)(T->d + ng * bp);
    for (int64_t g = 0; g < ng; g++)
        for (int64_t j = 0; j < bp; j++) {
            const lowbit_act *aj = &a[j < batch ? j : batch - 1];
            T->d[g * bp + j] = aj->d[g];
            T->s[g * bp + j] = aj->s[g];
        }
    return 0;
}

AI void gemm_file(const int F, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                  const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    const int U = unit_of(F), G = group_of(F), NG = U / G, US = ustride_of(F);
    const int off = F == F_Q8 ? 0 : 1;
    const int64_t n = a[0].n, bp = (batch + 3) & ~(int64_t)3;
    const int64_t nfull = n / U, ntail = (n % U) / G;
    act_t T;
    if (transpose_acts(a, batch, &T)) { /* out of memory: column by column */
        for (int64_t b = 0; b < batch; b++) gemv_file(F, w, row_bytes, r0, r1, &a[b], y + b * ldy + r0);
        return;
    }
    for (int64_t j = 0; j < batch; j += 4) {
        const int8_t *aq[4];
        for (int jj = 0; jj < 4; jj++) aq[jj] = a[j + jj < batch ? j + jj : batch - 1].q;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = (const uint8_t *)w + r * row_bytes;
            __m128 acc = _mm_setzero_ps();
            for (int64_t u = 0; u <= nfull; u++) {
                const int ng = u < nfull ? NG : (int)ntail;
                if (ng == 0) break;
                __m256i c[8];
                decode(F, row + u * US, ng < NG, c);
                for (int gi = 0; gi < ng && gi < NG; gi++) {
                    const int64_t g = u * NG + gi;
                    __m128i isum = hsum4(group_dot(F, c, gi, aq[0] + u * U),
                                         group_dot(F, c, gi, aq[1] + u * U),
                                         group_dot(F, c, gi, aq[2] + u * U),
                                         group_dot(F, c, gi, aq[3] + u * U));
                    const float dw = F == F_I2S ? 1.0f : _cvtsh_ss(file_scale(F, row + u * US, gi));
                    __m128i s = _mm_loadu_si128((const __m128i *)(T.s + g * bp + j));
                    if (!off) s = _mm_setzero_si128();
                    acc = group_acc(acc, isum, s, _mm_set1_ps(dw), _mm_loadu_ps(T.d + g * bp + j));
                }
            }
            float out[4];
            _mm_storeu_ps(out, acc);
            for (int jj = 0; jj < 4 && j + jj < batch; jj++) y[(j + jj) * ldy + r] = out[jj];
        }
    }
    free(T.mem);
}

#define DEFINE_FILE(name, F)                                                                       \
    void gemv_##name##_avx2(const void *w, int64_t rb, int64_t r0, int64_t r1,              \
                                   const lowbit_act *a, float *y) {                                \
        gemv_file(F, w, rb, r0, r1, a, y);                                                         \
    }                                                                                              \
    void gemm_##name##_avx2(const void *w, int64_t rb, int64_t r0, int64_t r1,              \
                                   const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {    \
        gemm_file(F, w, rb, r0, r1, a, batch, y, ldy);                                             \
    }
DEFINE_FILE(tq1_0, F_TQ1)
DEFINE_FILE(tq2_0, F_TQ2)
DEFINE_FILE(i2_s, F_I2S)
DEFINE_FILE(q1_0, F_Q1)
DEFINE_FILE(q2_0, F_Q2)
DEFINE_FILE(pq2_0, F_PQ2)
DEFINE_FILE(ptq1_0, F_PTQ1)

/* Q8_0, file layout (the LM head of the bench's files: a third of a token's weight bytes): 8 rows
 * at a time, so a block's 8 int32 sums come out of one transpose-reduce (hsum_8x8) and the spec's
 * float steps run once per block for 8 rows (L2: 1.1x the 4-row gemv_file, 1.3x with the
 * pipelining below).  The 8 rows are one contiguous run of memory read as 8 streams side by side;
 * it is prefetched as one run, LOWBIT_PF_Q8 bytes ahead of the average position (8 x 34 bytes
 * per block): DRAM 1.5x, ~90 % of the read bandwidth where the 4-row kernel streamed ~60 %. */
/* fp16 scales of block offset o of 8 rows, gathered in general-purpose registers (the vector
 * shuffle ports are the busy ones) */
AI __m256 q8_scales8(const uint8_t *const row[8], int64_t o) {
    uint64_t lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        lo |= (uint64_t)ld16(row[i] + o) << (16 * i);
        hi |= (uint64_t)ld16(row[i + 4] + o) << (16 * i);
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* acc += (float)isum * (dw * da) for block b of the 8 rows */
AI __m256 q8_acc(__m256 acc, __m256i isum, const uint8_t *const row[8], int64_t b, const lowbit_act *a) {
    const __m256 sc = _mm256_mul_ps(q8_scales8(row, 34 * b), _mm256_set1_ps(a->d[b]));
    __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), sc);
    return _mm256_add_ps(acc, p);
}

void gemv_q8_0_avx2(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    const int64_t nb = a->n / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        const uint8_t *row[8];
        for (int i = 0; i < 8; i++) row[i] = (const uint8_t *)w + (r + i) * rb;
        __m256 acc = _mm256_setzero_ps();
        __m256i pis = _mm256_setzero_si256(); /* block pb's sums, float steps pending */
        int64_t pb = 0;
        /* rows r.. r+7 are [row[0], row[0] + 8 rb); the previous group prefetched up to
         * row[0] + LOWBIT_PF_Q8 */
        const char *pf = (const char *)row[0] + LOWBIT_PF_Q8;
        for (int64_t b = 0; b < nb; b++) {
            const int64_t o = 34 * b;
            if (LOWBIT_PF_Q8)
                for (const char *lim = (const char *)row[0] + 8 * 34 * (b + 1) + LOWBIT_PF_Q8; pf < lim; pf += 64)
                    _mm_prefetch(pf, _MM_HINT_T0);
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));
            __m256i v[8];
            for (int i = 0; i < 8; i++) {
                __m256i c = _mm256_loadu_si256((const __m256i *)(row[i] + o + 2));
                __asm__("" : "+x"(c)); /* one load (often a line split), not one per use */
                v[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(av, c)), ones);
            }
            const __m256i isum = hsum_8x8(v);
            if (b) acc = q8_acc(acc, pis, row, pb, a); /* pipelined as packed_gemv_k */
            pis = isum, pb = b;
        }
        _mm256_storeu_ps(y + r - r0, nb ? q8_acc(acc, pis, row, pb, a) : acc);
    }
    if (r < r1) gemv_file(F_Q8, w, rb, r, r1, a, y + r - r0);
}
void gemm_q8_0_avx2(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                           int64_t batch, float *y, int64_t ldy) {
    gemm_file(F_Q8, w, rb, r0, r1, a, batch, y, ldy);
}

/* ---- packed layout: 4-row groups, 128-weight chunks, codes then scales (see internal.h) -------- */

/* log2 of the scale block (64, 128 or 256): the scale of group g is block (g * G) >> sh */
AI int qk_shift(const lowbit_matrix *m) { return m->qk == 64 ? 6 : m->qk == 128 ? 7 : 8; }

/* fp16 scales of the 4 rows of group rg for activation group g */
AI __m128 packed_dw(const lowbit_matrix *m, int64_t rg, int64_t g, int64_t G, int sh) {
    if (!m->qk) return _mm_set1_ps(1.0f);
    const int64_t b = (g * G) >> sh;
    return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(m->scales + (rg * m->nscales + b) * 4)));
}

AI void pf_tile(const uint8_t *tile) { /* a 4-row chunk tile is two cache lines */
    if (LOWBIT_PF_DIST) {
        _mm_prefetch((const char *)(tile + LOWBIT_PF_DIST), _MM_HINT_T0);
        _mm_prefetch((const char *)(tile + LOWBIT_PF_DIST + 64), _MM_HINT_T0);
    }
}

/* Group G of the activations (32, 128 or 256): CG = min(G, 128) weights of it lie in one chunk,
 * a chunk holds 128 / CG group parts, a group spans CPG = max(G / 128, 1) chunks.  The int32
 * lanes of a group are summed across its chunks and reduced once. */
/* Float steps of what the previous step of packed_gemv_k left pending: one group's 4 row sums
 * (pend 1, group pg). */
AI __m128 pk_flush(const int G, int pend, __m128 acc, const lowbit_matrix *m, int64_t rg, int sh,
                   const lowbit_act *a, __m128i pis, int64_t pg) {
    if (pend)
        return group_acc(acc, pis, _mm_set1_epi32(a->s[pg]), packed_dw(m, rg, pg, G, sh),
                         _mm_set1_ps(a->d[pg]));
    return acc;
}

/* Software-pipelined: the float steps of a chunk are issued after the integer work of the next
 * one, so that the long integer-to-float chain of one chunk overlaps the next chunk's work (the
 * out-of-order window alone held about one chunk).  The float adds keep the spec's order. */
AI void packed_gemv_k(const int G, const lowbit_matrix *m, int64_t r0, int64_t r1,
                      const lowbit_act *a, float *y) {
    const int CG = G < 128 ? G : 128, CPG = G > 128 ? G / 128 : 1;
    const int64_t nch = m->nchunks, n = m->cols;
    const int sh = qk_shift(m);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        int pend = 0; /* pending float steps, see pk_flush */
        __m128i pis = _mm_setzero_si128();
        int64_t pg = 0;
        for (int64_t c = 0; c < nch; c += CPG) {
            const int ng = (int)((n - c * 128 < 128 ? n - c * 128 : 128) / CG);
            __m256i iv[4][4];
            for (int i = 0; i < 4; i++)
                for (int gi = 0; gi < 128 / CG; gi++) iv[i][gi] = _mm256_setzero_si256();
            for (int cc = 0; cc < CPG; cc++) {
                const uint8_t *tile = base + (c + cc) * 128;
                pf_tile(tile);
                for (int i = 0; i < 4; i++) {
                    __m256i cv[8];
                    decode(F_PK, tile + 32 * i, 0, cv);
                    for (int gi = 0; gi < ng && gi < 128 / CG; gi++)
                        iv[i][gi] = _mm256_add_epi32(
                            iv[i][gi], vec_dot(F_PK, cv, gi * CG / 32, CG / 32, a->q + (c + cc) * 128));
                }
            }
            if (G >= 128 && ng == 1) { /* one group per step: pipelined */
                const __m128i isum = hsum4(iv[0][0], iv[1][0], iv[2][0], iv[3][0]);
                acc = pk_flush(G, pend, acc, m, rg, sh, a, pis, pg);
                pis = isum, pg = c * 128 / G, pend = 1;
                continue;
            }
            acc = pk_flush(G, pend, acc, m, rg, sh, a, pis, pg);
            pend = 0;
            for (int gi = 0; gi < ng && gi < 128 / CG; gi++) {
                const int64_t g = (c * 128 + gi * CG) / G;
                __m128i isum = hsum4(iv[0][gi], iv[1][gi], iv[2][gi], iv[3][gi]);
                acc = group_acc(acc, isum, _mm_set1_epi32(a->s[g]), packed_dw(m, rg, g, G, sh),
                                _mm_set1_ps(a->d[g]));
            }
        }
        acc = pk_flush(G, pend, acc, m, rg, sh, a, pis, pg);
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

/* Group 32 (Q2_0): two row groups at once (8 rows), lane = row.  Reducing each
 * (row, group) sum horizontally cost ~45 shuffle-pipe ops per 512 weights and left Q2_0 compute-
 * bound at ~55 % of the DRAM roofline; here the reduction is vertical.  The 8 rows' tiles are
 * transposed in registers (an 8 x 8 dword transpose: 24 shuffles per 1024 weights) so that ymm X
 * of byte quad q holds bytes 4q..4q+3 of rows 0..7, one row per 32-bit lane (the GEMM scratch's
 * quads, made on the fly from the same layout): its 2-bit plane k is weights 4q..4q+3 of group k
 * of each row.  vpmaddubsw against a broadcast load of the 4 activation codes aq[32k + 4q ..]
 * gives each row's pair sums in its two int16 lanes; summed over the 8 quads and widened by one
 * vpmaddwd, the group sums of 8 rows sit in 8 int32 lanes and the float step runs once per group
 * for 8 rows, in the spec's order.  Planes 1 and 3 are masked in place (code x 4, x 4 shifted out
 * of the int32 sum exactly), so a quad needs one shift: int16 lanes stay <= 8 x 2 x 12 x 127 =
 * 24384.  Measured (Zen 3, one thread, side by side with the 4-row kernel): 1.3-1.45x in L2/L3. */
AI void chunk32x8_sums(const uint8_t *t0, const uint8_t *t1, const int8_t *aq, const int ng,
                       __m256i isum[4]) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    __m256i s16[4];
    for (int k = 0; k < ng; k++) s16[k] = _mm256_setzero_si256();
    for (int d = 0; d < 2; d++) { /* dwords 2d, 2d + 1 (low halves) and 2d + 4, 2d + 5 (high) */
        /* S[p]: rows 2p, 2p + 1 of those dwords, interleaved (rows 0..3: tile t0, 4..7: t1).
         * Loaded again for d = 1 (the barrier): fewer live registers, no spills. */
        __asm__("" ::: "memory");
        __m256i S[4];
        for (int p = 0; p < 4; p++) {
            const uint8_t *t = p < 2 ? t0 : t1;
            const __m256i u = _mm256_load_si256((const __m256i *)(t + 64 * (p & 1)));
            const __m256i v = _mm256_load_si256((const __m256i *)(t + 64 * (p & 1) + 32));
            S[p] = d ? _mm256_unpackhi_epi32(u, v) : _mm256_unpacklo_epi32(u, v);
        }
        for (int e = 0; e < 2; e++) {
            const int j = 2 * d + e;
            /* rows 0..3 (A) and 4..7 (B) of dword j (low half) and j + 4 (high half) */
            const __m256i A = e ? _mm256_unpackhi_epi64(S[0], S[1])
                                : _mm256_unpacklo_epi64(S[0], S[1]);
            const __m256i B = e ? _mm256_unpackhi_epi64(S[2], S[3])
                                : _mm256_unpacklo_epi64(S[2], S[3]);
            for (int h = 0; h < 2; h++) {
                /* low halves: an insert, latency ~1 here against vperm2i128's 3 (both one per
                 * cycle, measured); 1.00-1.05x */
                const __m256i X = h ? _mm256_permute2x128_si256(A, B, 0x31)
                                    : _mm256_inserti128_si256(A, _mm256_castsi256_si128(B), 1);
                const int q = j + 4 * h; /* byte quad */
                const __m256i Y = ng > 2 ? _mm256_srli_epi16(X, 4) : X;
                for (int k = 0; k < ng; k++) {
                    int32_t a4;
                    memcpy(&a4, aq + 32 * k + 4 * q, 4);
                    const __m256i c = _mm256_and_si256(k < 2 ? X : Y, k & 1 ? m12 : m3);
                    const __m256i p = _mm256_maddubs_epi16(c, _mm256_set1_epi32(a4));
                    s16[k] = _mm256_add_epi16(s16[k], p);
                }
                /* quad by quad: gcc otherwise hoists the products of the chunk and spills them */
                if (ng > 2)
                    __asm__ volatile("" : "+x"(s16[0]), "+x"(s16[1]), "+x"(s16[2]), "+x"(s16[3]));
                else
                    __asm__ volatile("" : "+x"(s16[0]), "+x"(s16[1]));
            }
        }
    }
    for (int k = 0; k < ng; k++) {
        isum[k] = _mm256_madd_epi16(s16[k], _mm256_set1_epi16(1));
        if (k & 1) isum[k] = _mm256_srai_epi32(isum[k], 2); /* exact: a multiple of 4 */
    }
}

/* fp16 scales of block b of the 8 rows of row groups rg0 (lanes 0..3) and rg1 (4..7) */
AI __m256 scales8(const lowbit_matrix *m, int64_t rg0, int64_t rg1, int64_t b) {
    const uint16_t *s0 = m->scales + (rg0 * m->nscales + b) * 4;
    const uint16_t *s1 = m->scales + (rg1 * m->nscales + b) * 4;
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)s0),
                                              _mm_loadl_epi64((const __m128i *)s1)));
}

/* acc (lane = row) += the ng groups of chunk c of the 8 rows, in the spec's order */
AI __m256 chunk32x8(const int ng, const lowbit_matrix *m, int64_t rg, int64_t rg1, int64_t c,
                    int sh, const uint8_t *t0, const uint8_t *t1, const lowbit_act *a, __m256 acc) {
    __m256i isum[4];
    chunk32x8_sums(t0, t1, a->q + c * 128, ng, isum);
    __m256 W = scales8(m, rg, rg1, (c * 128) >> sh);
    for (int k = 0; k < ng; k++) {
        const int64_t g = c * 4 + k;
        if (k == 2 && m->qk == 64) W = scales8(m, rg, rg1, (g * 32) >> sh);
        acc = group_acc8(acc, isum[k], _mm256_set1_epi32(a->s[g]), W, _mm256_set1_ps(a->d[g]));
    }
    return acc;
}

/* Rows [r0, r1) of a group-32 matrix with qk = 64 or 128 (the dispatcher sends Q2_0, qk 64): row
 * groups in pairs; a last lone one is read twice (as lanes 0..3 and 4..7) and its copy dropped. */
void packed_gemv32_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       float *y) {
    const int64_t nch = m->nchunks, n = m->cols;
    const int sh = qk_shift(m);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg += 2) {
        const int64_t rg1 = (rg + 1) * 4 < r1 ? rg + 1 : rg;
        const uint8_t *base0 = m->codes + rg * nch * 128, *base1 = m->codes + rg1 * nch * 128;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t c = 0; c < nch; c++) {
            const uint8_t *t0 = base0 + c * 128, *t1 = base1 + c * 128;
            pf_tile(t0); /* two streams */
            pf_tile(t1);
            if (n - c * 128 >= 128)
                acc = chunk32x8(4, m, rg, rg1, c, sh, t0, t1, a, acc);
            else
                acc = chunk32x8(2, m, rg, rg1, c, sh, t0, t1, a, acc);
        }
        float out[8];
        _mm256_storeu_ps(out, acc);
        const int nr = rg1 > rg ? 8 : 4;
        for (int i = 0; i < nr && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

/* The activation codes of one 128-weight chunk, plane by plane: av[k] = codes 32k .. 32k + 31. */
AI void chunk_acts(const int8_t *aq, __m256i av[4]) {
    for (int k = 0; k < 4; k++) av[k] = _mm256_loadu_si256((const __m256i *)(aq + 32 * k));
}

/* The codes of a 4-row chunk tile with one shift per 32 bytes instead of three: planes 0 and 2
 * are masked out of v and v >> 4 with 3 (codes 0..3), planes 1 and 3 with 12, in place (4 x the
 * code, 0..12), and s[i] (row i) gets 4 x (planes 0 + 2) + (planes 1 + 3): 4 x the true sums, in
 * int16 lanes, shifted back out exactly after the reduction.  Activation codes are in
 * [-127, 127] (formats.h), so a vpmaddubsw lane (a pair) is at most 2 x 3 x 127 = 762 for planes
 * 0, 2 and 2 x 12 x 127 = 3048 for planes 1, 3: one tile adds at most 4 x 2 x 762 + 2 x 3048 =
 * 12192 to a lane, two tiles 24384 < 32767. */
AI void tile_sums(const uint8_t *tile, const int8_t *aq, __m256i s[4]) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
    __m256i av[4];
    chunk_acts(aq, av);
    for (int i = 0; i < 4; i++) {
        const __m256i v = _mm256_load_si256((const __m256i *)(tile + 32 * i));
        const __m256i h = _mm256_srli_epi16(v, 4); /* bits 4..7 of each byte at 0..3 */
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(v, m3), av[0]);
        const __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(h, m3), av[2]);
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(v, m12), av[1]);
        const __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(h, m12), av[3]);
        const __m256i t = _mm256_add_epi16(_mm256_slli_epi16(_mm256_add_epi16(p0, p2), 2),
                                           _mm256_add_epi16(p1, p3));
        s[i] = _mm256_add_epi16(s[i], t);
        /* row by row: gcc otherwise hoists every product of the tile and spills them */
        __asm__ volatile("" : "+x"(s[i]));
    }
}

/* Group 256 (TQ2_0, TQ1_0) with cols a multiple of 256: a group is two chunks, summed in int16
 * by tile_sums (<= 24384 per lane) and widened by one vpmaddwd per row; one reduction (hsum4) and
 * one float step per group for 4 rows, the float step pipelined as in packed_gemv_k.  Against
 * packed_gemv_k: 1 shift instead of 3 per 32 code bytes, one vpmaddwd per 256 weights of a row
 * instead of one per 128. */
void packed_gemv256_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    const int64_t nch = m->nchunks, ng = m->cols / 256;
    const int sh = qk_shift(m);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        __m128i pis = _mm_setzero_si128();
        for (int64_t g = 0; g < ng; g++) {
            __m256i s[4], iv[4];
            for (int i = 0; i < 4; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < 2; cc++) {
                const uint8_t *tile = base + (2 * g + cc) * 128;
                pf_tile(tile);
                tile_sums(tile, a->q + (2 * g + cc) * 128, s);
            }
            for (int i = 0; i < 4; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m128i isum = _mm_srai_epi32(hsum4(iv[0], iv[1], iv[2], iv[3]), 2);
            acc = pk_flush(256, g > 0, acc, m, rg, sh, a, pis, g - 1);
            pis = isum;
        }
        acc = pk_flush(256, ng > 0, acc, m, rg, sh, a, pis, ng - 1);
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

/* acc (lane = row) += the float step of group g of row groups ga (lanes 0..3) and gb (4..7) */
AI __m256 pair_group_acc(__m256 acc, __m256i isum, const lowbit_matrix *m, int64_t ga, int64_t gb,
                         int64_t g, const lowbit_act *a) {
    return group_acc8(acc, isum, _mm256_set1_epi32(a->s[g]), scales8(m, ga, gb, g),
                      _mm256_set1_ps(a->d[g]));
}

/* packed_gemv_pair (lowbit_pair_rows_ok: groups of one scale block, 256 weights (TQ2_0, TQ1_0:
 * TPG = 2 chunk tiles a group) or 128 (PQ2_0, PTQ1_0: TPG = 1)): row group k of range A and row
 * group k of range B, far apart, side by side as 8 rows (tile_sums on each), lanes 0..3 and
 * 4..7 of one vector after one transpose-reduce (hsum_8x8) per group, one float step per group
 * for the 8 rows in the spec's order.  Measured against one range per task (packed_gemv256,
 * packed_gemv128):
 *  - in cache (gemv_cycles, one thread): TQ2_0 1.10x; PQ2_0 0.92x (packed_gemv128 reduces two
 *    chunks of 4 rows at a time, pipelined two deep);
 *  - a BitNet 2B token's GEMVs on 2 threads, share of the read loop (bench/stream_ceiling.c,
 *    medians of 30-40 rounds), TQ2_0: 0.958 / 0.868, 0.904 / 0.798, 0.844 / 0.805, 0.893 /
 *    0.885; one thread 0.882 / 0.861.  PQ2_0: 0.963 / 0.929 on 2 threads, 0.842 / 0.840 on one;
 *  - the decoder's TQ2_0 tokens, one process, pairing switched on and off round by round: 0.839 /
 *    0.818 and 0.847 / 0.808 of the read loop.
 * (Activations as memory operands, 8 rows per tile pass, instead of two tile_sums: 0.96x.)  The
 * same 8 rows from row groups rg and rg + 1 (two streams 2.5 KB apart) streamed 0.70-0.78 of the
 * read loop against 0.87-0.93: the prefetchers want the two runs far apart.  I2_S: below. */
AI void packed_gemv_pair_k(const int TPG, const lowbit_matrix *m, int64_t a0, int64_t a1,
                           int64_t b0, int64_t b1, const lowbit_act *a, float *y) {
    const int64_t nch = m->nchunks, ng = nch / TPG;
    const int64_t npair = (b1 - b0 + 3) / 4;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t k = 0; k < npair; k++) {
        const int64_t ga = a0 / 4 + k, gb = b0 / 4 + k;
        const uint8_t *base_a = m->codes + ga * nch * 128, *base_b = m->codes + gb * nch * 128;
        __m256 acc = _mm256_setzero_ps();
        __m256i pis = _mm256_setzero_si256(); /* the previous group's sums: float step pipelined */
        for (int64_t g = 0; g < ng; g++) {
            __m256i s[8], iv[8];
            for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < TPG; cc++) {
                const int64_t off = (TPG * g + cc) * 128;
                pf_tile(base_a + off);
                pf_tile(base_b + off);
                tile_sums(base_a + off, a->q + off, s);
                tile_sums(base_b + off, a->q + off, s + 4);
            }
            for (int i = 0; i < 8; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m256i isum = _mm256_srai_epi32(hsum_8x8(iv), 2); /* exact: 4 x the sums */
            if (g > 0) acc = pair_group_acc(acc, pis, m, ga, gb, g - 1, a);
            pis = isum;
        }
        if (ng > 0) acc = pair_group_acc(acc, pis, m, ga, gb, ng - 1, a);
        float out[8];
        _mm256_storeu_ps(out, acc);
        for (int i = 0; i < 4 && ga * 4 + i < m->rows; i++) y[ga * 4 + i] = out[i];
        for (int i = 0; i < 4 && gb * 4 + i < m->rows; i++) y[gb * 4 + i] = out[4 + i];
    }
    if (a0 + 4 * npair < a1) /* A's rows past B's */
        m->plan[LOWBIT_ISA_AVX2].gemv(m, a0 + 4 * npair, a1, a, y);
}

/* Group 128 with qk = 128 (PQ2_0, PTQ1_0: a group is one chunk and one scale block).  Two chunks
 * per step: tile_sums gives the 4 rows' int16 sums of each (<= 12192 per lane: one tile each), one
 * vpmaddwd per (row, chunk) and one transpose-reduce (hsum_8x8) put the 8 (row, chunk) sums in the
 * 8 lanes of one vector -- lanes 0..3 rows 0..3 of chunk c, 4..7 those of chunk c + 1 -- which is
 * exactly the order of the 8 fp16 scales at scales[rg][c][0..3], scales[rg][c + 1][0..3]: one
 * vcvtph2ps, one vpsubd of the code sums, one cvt and the spec's two multiplies for 8 groups,
 * then the float adds in the spec's order (chunk c, then c + 1, lane = row).  Software-pipelined
 * two pairs deep: a pair's float steps are issued after the integer work of the two pairs that
 * follow it (L2-resident, one thread, side by side: one pair deep 1.06x over none, two pairs
 * another 1.01-1.03x; the spec's float order is unchanged).  A last odd chunk runs alone (hsum4).
 * (Tried and slower here: the reduction as an int16 transpose tree without vpmaddwd, 0.97x;
 * reducing each chunk's rows before the next chunk's work, which avoids a spill, 0.97x.) */
AI __m256 bcast2_ps(const float *p) { /* p[0] in lanes 0..3, p[1] in 4..7 */
    return _mm256_blend_ps(_mm256_broadcast_ss(p), _mm256_broadcast_ss(p + 1), 0xf0);
}
AI __m256i bcast2_epi32(const int32_t *p) {
    return _mm256_blend_epi32(_mm256_set1_epi32(p[0]), _mm256_set1_epi32(p[1]), 0xf0);
}
/* acc (lane = row) += the float steps of chunks c, c + 1 of row group rg, isum as above */
AI __m128 pair_acc(__m128 acc, __m256i isum, const lowbit_matrix *m, int64_t rg, int64_t c,
                   const lowbit_act *a) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m->scales + (rg * m->nscales + c) * 4)));
    const __m256 sc = _mm256_mul_ps(dw, bcast2_ps(a->d + c));
    const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, bcast2_epi32(a->s + c))), sc);
    acc = _mm_add_ps(acc, _mm256_castps256_ps128(p));
    return _mm_add_ps(acc, _mm256_extractf128_ps(p, 1));
}

void packed_gemv128_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    const int64_t nch = m->nchunks, npair = nch / 2;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) {
        const uint8_t *base = m->codes + rg * nch * 128;
        __m128 acc = _mm_setzero_ps();
        __m256i pis[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* pairs p-2, p-1 */
        for (int64_t p = 0; p < npair; p++) {
            __m256i s[8], iv[8];
            for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();
            for (int cc = 0; cc < 2; cc++) {
                const uint8_t *tile = base + (2 * p + cc) * 128;
                pf_tile(tile);
                tile_sums(tile, a->q + (2 * p + cc) * 128, s + 4 * cc);
            }
            for (int i = 0; i < 8; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m256i isum = _mm256_srai_epi32(hsum_8x8(iv), 2); /* exact: 4 x the sums */
            if (p > 1) acc = pair_acc(acc, pis[0], m, rg, 2 * p - 4, a);
            pis[0] = pis[1], pis[1] = isum;
        }
        if (npair > 1) acc = pair_acc(acc, pis[0], m, rg, 2 * npair - 4, a);
        if (npair) acc = pair_acc(acc, pis[1], m, rg, 2 * npair - 2, a);
        if (nch & 1) { /* the last chunk alone */
            const int64_t c = nch - 1;
            __m256i s[4], iv[4];
            for (int i = 0; i < 4; i++) s[i] = _mm256_setzero_si256();
            tile_sums(base + c * 128, a->q + c * 128, s);
            for (int i = 0; i < 4; i++) iv[i] = _mm256_madd_epi16(s[i], ones);
            const __m128i isum = _mm_srai_epi32(hsum4(iv[0], iv[1], iv[2], iv[3]), 2);
            acc = group_acc(acc, isum, _mm_set1_epi32(a->s[c]), packed_dw(m, rg, c, 128, 7),
                            _mm_set1_ps(a->d[c]));
        }
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

/* I2_S with P2 activations (internal.h: one power-of-two scale per row, so the per-group float
 * steps of the spec are exact and their sum is (float)(row's int sum) * d): the int sums of a row
 * are added across all its chunks, in int16 for runs of 8 chunks (32 vpmaddubsw of codes <= 3 x
 * |a| <= 127: <= 24384 per lane), and reduced once per row group; no per-chunk horizontal sum or
 * float step (which made I2_S's 128-groups slower than TQ2_0's 256-groups, one step per 2 chunks).
 * Row groups rgs[0 .. NR): NR = 1, or 2 for packed_gemv_pair, a run of 8 chunks of each in turn,
 * two runs of memory side by side (against one range per task: 1.02x in cache; a token's GEMVs
 * in DRAM on one thread, 0.885 / 0.846 of the read loop). */
AI void i2s_rows(const int NR, const lowbit_matrix *m, const int64_t *rgs, const lowbit_act *a,
                 int32_t stot, float *y) {
    const int64_t nch = m->nchunks;
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i acc[2][4];
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = _mm256_setzero_si256();
    for (int64_t c0 = 0; c0 < nch; c0 += 8) {
        const int64_t c1 = c0 + 8 < nch ? c0 + 8 : nch;
        for (int j = 0; j < NR; j++) {
            const uint8_t *base = m->codes + rgs[j] * nch * 128;
            __m256i s16[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                              _mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int64_t c = c0; c < c1; c++) {
                const uint8_t *tile = base + c * 128;
                pf_tile(tile);
                const int8_t *aq = a->q + c * 128;
                __m256i av[4];
                chunk_acts(aq, av);
                for (int i = 0; i < 4; i++) {
                    const __m256i v = _mm256_load_si256((const __m256i *)(tile + 32 * i));
                    __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(v, m3), av[0]);
                    __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2), m3), av[1]);
                    __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m3), av[2]);
                    __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 6), m3), av[3]);
                    s16[i] = _mm256_add_epi16(s16[i], _mm256_add_epi16(_mm256_add_epi16(p0, p1),
                                                                       _mm256_add_epi16(p2, p3)));
                }
            }
            for (int i = 0; i < 4; i++)
                acc[j][i] = _mm256_add_epi32(acc[j][i], _mm256_madd_epi16(s16[i], ones));
        }
    }
    const __m128 d = _mm_set1_ps(a->d[0]);
    for (int j = 0; j < NR; j++) {
        const int64_t rg = rgs[j];
        const __m128i isum = _mm_sub_epi32(hsum4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]),
                                           _mm_set1_epi32(stot));
        float out[4]; /* exact: |isum| < 2^24 and d a power of two (or 0) */
        _mm_storeu_ps(out, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
        for (int i = 0; i < 4 && rg * 4 + i < m->rows; i++) y[rg * 4 + i] = out[i];
    }
}

static void packed_gemv_i2s_row(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                                float *y) {
    const int32_t stot = lowbit_i2s_code_offset(m, a);
    for (int64_t rg = r0 / 4; rg * 4 < r1; rg++) i2s_rows(1, m, &rg, a, stot, y);
}

/* The group kernel packed_gemv_k for each activation group, G a constant in each. */
void packed_gemv_k32_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    packed_gemv_k(32, m, r0, r1, a, y);
}
void packed_gemv_k128_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    packed_gemv_k(128, m, r0, r1, a, y);
}
void packed_gemv_k256_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    packed_gemv_k(256, m, r0, r1, a, y);
}

/* I2_S in whole chunks: the row sums where the activations allow them (decided per call: the
 * activation scales are not known at pack time), else the group kernel. */
void packed_gemv_i2s_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    if (lowbit_i2s_row_sums_ok(m, a))
        packed_gemv_i2s_row(m, r0, r1, a, y);
    else
        packed_gemv_k(128, m, r0, r1, a, y);
}

void packed_gemv_pair_avx2(const lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                                  int64_t b1, const lowbit_act *a, float *y) {
    if (m->type != LOWBIT_TYPE_I2_S) {
        /* TPG a constant in each call: the runtime value cost PQ2_0 7-9 % in cache (gemv_cycles) */
        if (m->group == 256)
            packed_gemv_pair_k(2, m, a0, a1, b0, b1, a, y);
        else
            packed_gemv_pair_k(1, m, a0, a1, b0, b1, a, y);
        return;
    }
    if (!lowbit_i2s_row_sums_ok(m, a)) { /* the per-group path, one range after the other */
        packed_gemv_k(128, m, a0, a1, a, y);
        packed_gemv_k(128, m, b0, b1, a, y);
        return;
    }
    const int32_t stot = lowbit_i2s_code_offset(m, a);
    const int64_t npair = (b1 - b0 + 3) / 4;
    for (int64_t k = 0; k < npair; k++) {
        const int64_t rgs[2] = {a0 / 4 + k, b0 / 4 + k};
        i2s_rows(2, m, rgs, a, stot, y);
    }
    if (a0 + 4 * npair < a1) packed_gemv_i2s_row(m, a0 + 4 * npair, a1, a, y); /* A's rows past B's */
}


/* ---- A8 activation quantizer (bit-exact with lowbit_quantize_act_ref, every rule) ------------- */

/* Codes of v = x * id, unclamped: the fast path only runs when |x * id| <= 127 * (1 + 2^-23)
 * (finite id, amax the true max), so no product reaches 127.5 and the clamp is dead -- except for
 * NaN, which converts to INT_MIN and is fixed to -127 after packing (max_epi8), like the clamp.
 * Half to even (Q8_0, Q8_K): cvtps rounds with MXCSR, as rintf does.  Half away (A8):
 * trunc(v + copysign(0.5 - 2^-25, v)) equals roundf(v) for every float in the default
 * round-to-nearest mode (checked exhaustively for |v| <= 128): exact halves round up through the
 * sum's own tie, just-below-halves do not. */
AI __m256i act_codes(__m256 v, const int even) {
    if (even) return _mm256_cvtps_epi32(v);
    const __m256 h = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(0.49999997f));
    return _mm256_cvttps_epi32(_mm256_add_ps(v, h));
}

/* max x and -min x over lanes of one group (G % 32 == 0).  Not max|x|: the larger of the two also
 * gives Q8_K the sign of its max element without a rescan (unless +m and -m both occur).
 * max_ps(x, acc) keeps acc if x is NaN: NaN never wins, like the reference; acc starts at +0.
 * 4 chains each, so a small group's latency stays short. */
AI void group_max_min(const float *xg, const int64_t G, __m256 *P, __m256 *N) {
    __m256 hi0 = _mm256_setzero_ps(), hi1 = hi0, hi2 = hi0, hi3 = hi0;
    __m256 lo0 = hi0, lo1 = hi0, lo2 = hi0, lo3 = hi0;
    for (int64_t j = 0; j < G; j += 32) {
        __m256 v0 = _mm256_loadu_ps(xg + j), v1 = _mm256_loadu_ps(xg + j + 8);
        __m256 v2 = _mm256_loadu_ps(xg + j + 16), v3 = _mm256_loadu_ps(xg + j + 24);
        hi0 = _mm256_max_ps(v0, hi0), lo0 = _mm256_min_ps(v0, lo0);
        hi1 = _mm256_max_ps(v1, hi1), lo1 = _mm256_min_ps(v1, lo1);
        hi2 = _mm256_max_ps(v2, hi2), lo2 = _mm256_min_ps(v2, lo2);
        hi3 = _mm256_max_ps(v3, hi3), lo3 = _mm256_min_ps(v3, lo3);
    }
    *P = _mm256_max_ps(_mm256_max_ps(hi0, hi1), _mm256_max_ps(hi2, hi3));
    *N = _mm256_xor_ps(_mm256_min_ps(_mm256_min_ps(lo0, lo1), _mm256_min_ps(lo2, lo3)),
                       _mm256_set1_ps(-0.0f));
}

/* lane g of the result = max over the 8 lanes of v[g] */
AI __m256 hmax_8x8(const __m256 *v) {
#define PAIR(a, b) _mm256_max_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b))
#define QUAD(a, b) _mm256_max_ps(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xee))
    __m256 u0 = QUAD(PAIR(v[0], v[1]), PAIR(v[2], v[3])), u1 = QUAD(PAIR(v[4], v[5]), PAIR(v[6], v[7]));
#undef PAIR
#undef QUAD
    return _mm256_max_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Codes of one group with inverse scale id; returns the code sums in 8 int32 lanes. */
AI __m256i group_codes(const float *xg, const int64_t G, const int even, float id, int8_t *q) {
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i m127 = _mm256_set1_epi8(-127), ones8 = _mm256_set1_epi8(1);
    __m256i sum = _mm256_setzero_si256();
    for (int64_t j0 = 0; j0 < G; j0 += 256) {
        __m256i s16 = _mm256_setzero_si256(); /* <= 8 x 2 x 127 per lane: no int16 overflow */
        for (int64_t j = j0; j < j0 + 256 && j < G; j += 32) {
            __m256i i0 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j), vid), even);
            __m256i i1 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 8), vid), even);
            __m256i i2 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 16), vid), even);
            __m256i i3 = act_codes(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 24), vid), even);
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            p = _mm256_max_epi8(_mm256_permutevar8x32_epi32(p, order), m127);
            _mm256_storeu_si256((__m256i *)(q + j), p);
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(ones8, p));
        }
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
    }
    return sum;
}

/* ng <= 8 groups of G floats (G % 32 == 0, a constant for the common sizes).  The 8 scales come
 * out of one transpose-reduce and one divps, with the reference's formulas lane by lane (IEEE
 * quotients are the same in any lane), so the groups' reduce-divide latency chains overlap. */
AI void quantize_8groups(const float *x, const int64_t G, const int rule, const int ng, int8_t *q,
                         float *d, int32_t *s) {
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    __m256 P[8], N[8];
    for (int g = 0; g < 8; g++) {
        P[g] = N[g] = zero;
        if (g < ng) group_max_min(x + g * G, G, &P[g], &N[g]);
        if (rule != LOWBIT_RULE_Q8_K) P[g] = _mm256_max_ps(N[g], P[g]); /* N > P ? N : P */
    }
    const __m256 Pv = hmax_8x8(P);
    __m256 amax, id, dg;
    if (rule == LOWBIT_RULE_Q8_K) {
        const __m256 Nv = hmax_8x8(N);
        amax = _mm256_max_ps(Nv, Pv); /* +0 when both are zero (N may be -0) */
        const __m256 nz = _mm256_cmp_ps(amax, zero, _CMP_NEQ_OQ);
        __m256 smax = _mm256_blendv_ps(_mm256_xor_ps(Nv, sign), Pv, _mm256_cmp_ps(Pv, Nv, _CMP_GT_OQ));
        int tie = _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(Pv, Nv, _CMP_EQ_OQ), nz));
        if (tie) { /* +m and -m both occur: the first one decides */
            float sm[8], am[8];
            _mm256_storeu_ps(sm, smax), _mm256_storeu_ps(am, amax);
            for (int g = 0; g < ng; g++)
                if (tie >> g & 1)
                    for (const float *xg = x + g * G;; xg++)
                        if (fabsf(*xg) == am[g]) {
                            sm[g] = *xg;
                            break;
                        }
            smax = _mm256_loadu_ps(sm);
        }
        id = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(-127.0f), smax), nz);
        dg = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), id), nz);
    } else {
        amax = Pv;
        dg = _mm256_div_ps(amax, _mm256_set1_ps(127.0f));
        const __m256 nz = _mm256_cmp_ps(rule == LOWBIT_RULE_Q8_0 ? amax : dg, zero, _CMP_NEQ_OQ);
        id = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(127.0f), amax), nz);
        if (rule == LOWBIT_RULE_Q8_0) /* fp16 round trip, RNE, as the reference */
            dg = _mm256_cvtph_ps(_mm256_cvtps_ph(dg, _MM_FROUND_TO_NEAREST_INT));
    }
    /* 127 / amax overflowed (amax < ~4e-37): the clamps matter there, the reference does it */
    const int slow = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, id),
                                                      _mm256_set1_ps(3.4028235e38f), _CMP_GT_OQ));
    float ids[8];
    _mm256_storeu_ps(ids, id);
    __m256i S[8];
    for (int g = 0; g < 8; g++)
        S[g] = g < ng && !(slow >> g & 1) ? group_codes(x + g * G, G, rule != LOWBIT_RULE_A8, ids[g], q + g * G)
                                          : _mm256_setzero_si256();
    const __m256i sv = hsum_8x8(S);
    if (ng == 8) {
        _mm256_storeu_ps(d, dg);
        _mm256_storeu_si256((__m256i *)s, sv);
    } else {
        float dt[8];
        int32_t st[8];
        _mm256_storeu_ps(dt, dg);
        _mm256_storeu_si256((__m256i *)st, sv);
        memcpy(d, dt, (size_t)ng * sizeof(float));
        memcpy(s, st, (size_t)ng * sizeof(int32_t));
    }
    for (int g = 0; g < ng; g++)
        if (slow >> g & 1) lowbit_quantize_act_ref(x + g * G, G, G, rule, q + g * G, d + g, s + g);
}

/* P2 / S8 (I2_S, group 128): one scale for the whole vector (internal.h). */
static void quantize_vector_avx2(const float *x, int64_t n, int rule, int8_t *q, float *d, int32_t *s) {
    __m256 P, N;
    group_max_min(x, n, &P, &N);
    P = _mm256_max_ps(N, P);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(P), _mm256_extractf128_ps(P, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    if (!(amax <= 3.4028235e38f)) { /* inf: the reference's clamp decides the codes */
        lowbit_quantize_act_ref(x, n, 128, rule, q, d, s);
        return;
    }
    float dg, id;
    lowbit_act_vector_scale(rule, amax, &dg, &id);
    const int64_t ng = n / 128;
    for (int64_t g0 = 0; g0 < ng; g0 += 8) {
        const int k = ng - g0 < 8 ? (int)(ng - g0) : 8;
        __m256i S[8];
        for (int g = 0; g < 8; g++)
            S[g] = g < k ? group_codes(x + (g0 + g) * 128, 128, 0, id, q + (g0 + g) * 128)
                         : _mm256_setzero_si256();
        int32_t st[8];
        _mm256_storeu_si256((__m256i *)st, hsum_8x8(S));
        for (int g = 0; g < k; g++) d[g0 + g] = dg, s[g0 + g] = st[g];
    }
}

void quantize_act_avx2(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                              float *d, int32_t *s) {
    const int whole = rule == LOWBIT_RULE_P2 || rule == LOWBIT_RULE_S8;
    if (whole && group == 128) {
        quantize_vector_avx2(x, n, rule, q, d, s);
        return;
    }
    if (group % 32 || whole) {
        lowbit_quantize_act_ref(x, n, group, rule, q, d, s);
        return;
    }
    const int64_t ng = n / group;
#define QGROUPS(G, RULE)                                                                           \
    for (int64_t g = 0; g < ng; g += 8)                                                            \
        quantize_8groups(x + g * G, G, RULE, ng - g < 8 ? (int)(ng - g) : 8, q + g * G, d + g, s + g)
    /* the weight formats' (size, rule) pairs as constants; anything else generic */
    if (group == 32 && rule == LOWBIT_RULE_Q8_0)
        QGROUPS(32, LOWBIT_RULE_Q8_0);
    else if (group == 128 && rule == LOWBIT_RULE_Q8_K)
        QGROUPS(128, LOWBIT_RULE_Q8_K);
    else if (group == 256 && rule == LOWBIT_RULE_Q8_K)
        QGROUPS(256, LOWBIT_RULE_Q8_K);
    else if (rule == LOWBIT_RULE_Q8_K)
        QGROUPS(group, LOWBIT_RULE_Q8_K);
    else if (rule == LOWBIT_RULE_Q8_0)
        QGROUPS(group, LOWBIT_RULE_Q8_0);
    else
        QGROUPS(group, LOWBIT_RULE_A8);
#undef QGROUPS
}

/* ---- registration --------------------------------------------------------------------------- */

/* The bandwidth probe's loop (internal.h): 32-byte loads into four sums.  Where the packed GEMV
 * kernels prefetch (PF, chosen by CPU vendor at registration) the probe prefetches the same way, so
 * the roofline is the memory's and not the loop's (docs/PERFORMANCE.md has the measurements). */
AI uint64_t read_loop(const int PF, const uint8_t *p, int64_t n) {
    __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        if (PF) { /* a hint past the end of the buffer never faults */
            _mm_prefetch((const char *)(p + i + PF), _MM_HINT_T1);
            _mm_prefetch((const char *)(p + i + PF + 64), _MM_HINT_T1);
        }
        for (int j = 0; j < 4; j++)
            s[j] = _mm256_add_epi64(s[j], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    }
    for (; i < n; i += 64) /* the last 64 bytes */
        for (int j = 0; j < 2; j++)
            s[j] = _mm256_add_epi64(s[j], _mm256_loadu_si256((const __m256i *)(p + i + 32 * j)));
    const __m256i t = _mm256_add_epi64(_mm256_add_epi64(s[0], s[1]), _mm256_add_epi64(s[2], s[3]));
    return (uint64_t)_mm256_extract_epi64(t, 0) + (uint64_t)_mm256_extract_epi64(t, 1) +
           (uint64_t)_mm256_extract_epi64(t, 2) + (uint64_t)_mm256_extract_epi64(t, 3);
}

#ifndef LOWBIT_PF_READ_INTEL
#define LOWBIT_PF_READ_INTEL 16384
#endif
uint64_t read_bytes_avx2(const uint8_t *p, int64_t n) { return read_loop(0, p, n); }
uint64_t read_bytes_avx2_l2pf(const uint8_t *p, int64_t n) {
    return read_loop(LOWBIT_PF_READ_INTEL, p, n);
}

