/* The pieces the AVX2 (+FMA, F16C) kernels share: horizontal sums, the spec's float step, and
 * every weight format's unpacking to one byte per weight (included by the kernel bodies
 * file-inl.h, packed-inl.h, packed32-inl.h and by quantize_avx2.c; the avxvnni variant compiles
 * the same bodies with its own multiply-accumulate step, dot_step-inl.h).  The kernels: GEMV / GEMM of every
 * weight format with A8 activations on the file layout (file_avx2.c) and on the packed layout
 * (packed_avx2.c; the packed GEMM is gemm_avx2.c), the A8 activation quantizer (quantize_avx2.c),
 * the read probe (read_avx2.c).
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
#ifndef LOWBIT_AVX2_INL_H
#define LOWBIT_AVX2_INL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))

#include "dot_step-inl.h" /* the multiply-accumulate step: vpmaddubsw, or vpdpbusd (avxvnni) */

/* Software prefetch distances (bytes) of the GEMV weight streams: LOWBIT_PF_DIST for the packed
 * layout (both lines of each 128-byte 4-row tile), LOWBIT_PF_Q8 for the Q8_0 file layout (8 row
 * streams side by side, prefetched as the one run of memory they form), LOWBIT_PF_FILE for the
 * other file-layout kernels, per row stream.  How they were chosen:
 * docs/PERFORMANCE.md#prefetch-distances. */
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

/* Horizontal sums as transposes: unpack lo/hi + add halves the vectors at each step (rather than
 * vphaddd: docs/PERFORMANCE.md#hsum-transposes).  Integer sums: exact in any order. */
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

/* Q1_0's block sum (ref/dot.c): sb = (float)(isum - off) * da for a block's first group, a fused
 * step for the others; the block ends with acc = fma(dw, sb, acc) */
AI __m128 block_sum(__m128 sb, int first, __m128i isum, __m128i off, __m128 da) {
    const __m128 f = _mm_cvtepi32_ps(_mm_sub_epi32(isum, off));
    return first ? _mm_mul_ps(f, da) : _mm_fmadd_ps(f, da, sb);
}

AI uint16_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ---- formats: unit size, group size, code unpacking ------------------------------------------- */

/* A "unit" is what one unpack produces: a file block (Q2_0: two 64-blocks; packed: one 128-weight
 * chunk), as NV = U / 32 vectors of byte codes in activation order. */
/* A file-layout format is its kernel slot (kernel_table.h), so file-inl.h defines the kernels from
 * the slot list; F_PK: the packed layout's chunks. */
enum { F_TQ1 = LOWBIT_K_TQ1_0, F_TQ2 = LOWBIT_K_TQ2_0, F_I2S = LOWBIT_K_I2_S, F_Q1 = LOWBIT_K_Q1_0,
       F_Q2 = LOWBIT_K_Q2_0, F_PQ2 = LOWBIT_K_PQ2_0, F_PTQ1 = LOWBIT_K_PTQ1_0, F_Q8 = LOWBIT_K_Q8_0,
       F_PK = LOWBIT_K_COUNT };

AI int unit_of(int F) { return F == F_TQ1 || F == F_TQ2 ? 256 : F == F_Q8 ? 32 : 128; }
/* activation group of the file-layout kernels: lowbit_act_group of the format */
AI int group_of(int F) {
    return F == F_TQ1 || F == F_TQ2 ? 256 : F == F_I2S || F == F_PQ2 || F == F_PTQ1 ? 128 : 32;
}
/* bytes per unit in the file layout (packed: a row's 32 code bytes of a chunk) */
AI int ustride_of(int F) {
    switch (F) {
    case F_TQ1: return sizeof(lowbit_block_tq1_0);
    case F_TQ2: return sizeof(lowbit_block_tq2_0);
    case F_I2S: return sizeof(lowbit_block_i2_s);
    case F_Q1: return sizeof(lowbit_block_q1_0);
    case F_Q2: return 2 * sizeof(lowbit_block_q2_0);
    case F_PQ2: return sizeof(lowbit_block_pq2_0);
    case F_PTQ1: return sizeof(lowbit_block_ptq1_0);
    case F_Q8: return sizeof(lowbit_block_q8_0);
    default: return 32;
    }
}
/* where field f of block struct B starts, in bytes */
#define AT(B, f) offsetof(lowbit_block_##B, f)

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
        planes(_mm256_loadu_si256((const __m256i *)(p + AT(tq2_0, qs))), c);
        planes(_mm256_loadu_si256((const __m256i *)(p + AT(tq2_0, qs) + 32)), c + 4);
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
        planes(_mm256_loadu_si256((const __m256i *)(p + AT(pq2_0, qs))), P);
        planes_to_order(P, c);
        break;
    }
    case F_Q2: { /* two blocks */
        const size_t b2 = sizeof(lowbit_block_q2_0) + AT(q2_0, qs);
        __m128i lo = _mm_loadu_si128((const __m128i *)(p + AT(q2_0, qs)));
        __m128i hi = half ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)(p + b2));
        __m256i P[4];
        planes(_mm256_set_m128i(hi, lo), P);
        planes_to_order(P, c);
        break;
    }
    case F_Q1: { /* bit j%8 of qs[j/8]: spread bytes, test bits, code 2 for set */
        const __m256i B = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + AT(q1_0, qs))));
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
    case F_Q8: c[0] = _mm256_loadu_si256((const __m256i *)(p + AT(q8_0, qs))); break;
    case F_TQ1: {
        /* qs[0..31]: trit n = weight 32n + m; qs[32..47]: 160 + 16n + m (two trits per ymm,
         * one per 128-bit lane); qh[0..3]: 240 + 4n + m (one dword per trit). */
        const __m256i B0 = _mm256_loadu_si256((const __m256i *)(p + AT(tq1_0, qs)));
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(p + AT(tq1_0, qs) + 32));
        uint32_t qh;
        memcpy(&qh, p + AT(tq1_0, qh), 4);
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
        const __m128i q0 = _mm_loadu_si128((const __m128i *)(p + AT(ptq1_0, qs)));
        const __m128i q1 = _mm_loadl_epi64((const __m128i *)(p + AT(ptq1_0, qs) + 16));
        const __m128i qh = _mm_set1_epi16((short)ld16(p + AT(ptq1_0, qh)));
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
    dot_t s = _mm256_setzero_si256();
    for (int v = v0; v < v0 + nv; v++) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(aq + 32 * v));
        s = F == F_Q8 ? dot_acc(s, _mm256_abs_epi8(c[v]), _mm256_sign_epi8(a, c[v]))
                      : dot_acc(s, c[v], a);
    }
    return dot_wide(s);
}

/* the same over group gi of a file-layout unit */
AI __m256i group_dot(const int F, const __m256i c[8], int gi, const int8_t *aq) {
    return vec_dot(F, c, gi * (group_of(F) / 32), group_of(F) / 32, aq);
}

/* fp16 scale of group gi of unit u in a file-layout row (I2_S: none) */
AI uint16_t file_scale(const int F, const uint8_t *unit, int gi) {
    switch (F) {
    case F_TQ1: return ld16(unit + AT(tq1_0, d));
    case F_TQ2: return ld16(unit + AT(tq2_0, d));
    case F_PTQ1: return ld16(unit + AT(ptq1_0, d));
    case F_Q2: /* two 32-groups per 64-block */
        return ld16(unit + sizeof(lowbit_block_q2_0) * (gi / 2) + AT(q2_0, d));
    case F_Q1: return ld16(unit + AT(q1_0, d));
    case F_PQ2: return ld16(unit + AT(pq2_0, d));
    default: return ld16(unit + AT(q8_0, d));
    }
}
#endif /* LOWBIT_AVX2_INL_H */
