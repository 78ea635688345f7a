/* Shared body of the AArch64 kernels, included by fill_neon.c and fill_dotprod.c.
 *
 * The includer defines LOWBIT_ARM_DOTPROD (1: vdotq_s32, 0: baseline Advanced SIMD) and gets
 * static kernels for every quantized weight type (GEMV and GEMM on the file layout), the A8
 * activation quantizer and the F32/F16 GEMV.  Only <arm_neon.h>: no OS headers, so the same code
 * builds with Linux gcc and Apple clang.
 *
 * How every quantized dot works (the contract of native/src/ref/dot.c):
 *   1. a weight block is unpacked into int8x16_t registers holding its codes in weight order,
 *      so activations are plain contiguous loads;
 *   2. each activation group (32..256 codes) gets its exact int32 sum  sum c*q  from DOT16;
 *   3. the code offset is undone once per group with the activation code sum s[g];
 *   4. the float part  acc += (float)isum * (d_w * d_a[g])  runs per row in the reference's
 *      order (block by block, group by group), so results match scalar, not just approximately.
 * GEMM unpacks a weight block once and reuses it for a tile of up to GEMM_TILE activations.
 * The packed (row-interleaved, 2-bit canonical) layout of repack.c has its own GEMV/GEMM at the
 * end: there lane i of a float vector is row i of a 4-row group. */
#ifndef LOWBIT_KERNELS_ARM_H
#define LOWBIT_KERNELS_ARM_H

#include <arm_neon.h>

#include "../internal.h"

#ifndef LOWBIT_ARM_DOTPROD
#error "define LOWBIT_ARM_DOTPROD to 0 or 1 before including kernels_arm.h"
#endif

#define AI static inline __attribute__((always_inline))

/* Kernel names state the contract and the variant (gemv_tq2_0_dotprod), so profiles tell the
 * two translation units apart. */
#if LOWBIT_ARM_DOTPROD
#define VARIANT(name) name##_dotprod
#else
#define VARIANT(name) name##_neon
#endif

/* Activations per GEMM tile: their float accumulators live on the stack, the unpacked weight
 * block in registers. */
#define GEMM_TILE 16

/* ---- 16 int8 products summed into int32 lanes ---------------------------------------------- */

#if LOWBIT_ARM_DOTPROD
AI int32x4_t dot16(int32x4_t acc, int8x16_t c, int8x16_t q) { return vdotq_s32(acc, c, q); }
AI int32x4_t dot16_wide(int32x4_t acc, int8x16_t c, int8x16_t q) { return vdotq_s32(acc, c, q); }
#else
/* Codes are at most 3 in magnitude: two products (<= 2 * 3 * 128) share an int16 lane safely. */
AI int32x4_t dot16(int32x4_t acc, int8x16_t c, int8x16_t q) {
    int16x8_t p = vmull_s8(vget_low_s8(c), vget_low_s8(q));
    p = vmlal_high_s8(p, c, q);
    return vpadalq_s16(acc, p);
}
/* Q8_0: full int8 codes; -128 * -128 twice would overflow int16, so widen each product half. */
AI int32x4_t dot16_wide(int32x4_t acc, int8x16_t c, int8x16_t q) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(c), vget_low_s8(q)));
    return vpadalq_s16(acc, vmull_high_s8(c, q));
}
#endif

/* ---- unpacking: one weight block -> codes in weight order ---------------------------------- */

/* Block scale: FCVT widens fp16 exactly (same value as lowbit_fp16_to_fp32, without branches). */
AI float load_fp16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

AI int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* Base-3 trit of a byte x already multiplied by 3^n:  (x * 3) >> 8  is 0, 1 or 2, and
 * 3x >= 256 exactly when x > 85, 3x >= 512 exactly when x > 170.  Two compares give -1 each, so
 * this returns the NEGATED trit; the dot undoes the sign once per group (NEG below). */
AI int8x16_t trit_neg(uint8x16_t x) {
    return vaddq_s8(s8(vcgtq_u8(x, vdupq_n_u8(85))), s8(vcgtq_u8(x, vdupq_n_u8(170))));
}

/* TQ1_0 (54 bytes): qs[0..31] trit n of byte m -> weight 32n+m; qs[32..47] -> 160+16n+m;
 * qh[0..3] trit n of byte m -> 240+4n+m.  16 registers of negated codes. */
AI void unpack_tq1_0(const uint8_t *b, int8x16_t *c) {
    const uint8x16_t q0 = vld1q_u8(b), q1 = vld1q_u8(b + 16), q2 = vld1q_u8(b + 32);
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int n = 0; n < 5; n++) {
        const uint8x16_t p = vdupq_n_u8(pow3[n]);
        c[2 * n] = trit_neg(vmulq_u8(q0, p));
        c[2 * n + 1] = trit_neg(vmulq_u8(q1, p));
        c[10 + n] = trit_neg(vmulq_u8(q2, p));
    }
    /* qh: the 4 bytes repeated, lane 4n+m multiplied by 3^n, is weights 240..255 in order. */
    uint32_t h;
    memcpy(&h, b + 48, 4);
    static const uint8_t mh[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    c[15] = trit_neg(vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(h)), vld1q_u8(mh)));
}

/* PTQ1_0 (28 bytes): qs[0..15] -> 16n+m; qs[16..23] -> 80+8n+m; qh[0..1] -> 120+2n+h. */
AI void unpack_ptq1_0(const uint8_t *b, int8x16_t *c) {
    const uint8x16_t q0 = vld1q_u8(b);
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int n = 0; n < 5; n++) c[n] = trit_neg(vmulq_u8(q0, vdupq_n_u8(pow3[n])));
    const uint8x8_t lo = vld1_u8(b + 16);
    uint16_t h;
    memcpy(&h, b + 24, 2);
    const uint8x8_t hv = vreinterpret_u8_u16(vdup_n_u16(h)); /* qh0 qh1 qh0 qh1 ... */
    static const uint8_t m5[16] = {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t m6[16] = {9, 9, 9, 9, 9, 9, 9, 9, 27, 27, 27, 27, 27, 27, 27, 27};
    static const uint8_t m7[16] = {81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27};
    c[5] = trit_neg(vmulq_u8(vcombine_u8(lo, lo), vld1q_u8(m5))); /* weights 80..95 */
    c[6] = trit_neg(vmulq_u8(vcombine_u8(lo, lo), vld1q_u8(m6))); /* 96..111 */
    c[7] = trit_neg(vmulq_u8(vcombine_u8(lo, hv), vld1q_u8(m7))); /* 112..119, then qh 120..127 */
}

/* One row's 128-weight chunk, 32 bytes: byte p holds weights p + 32k at bits 2k.  Each shift and
 * mask of a 16-byte half is 16 consecutive weights.  A half chunk (64 weights) only uses c[0..3]. */
AI void unpack_chunk(const uint8_t *p, int8x16_t *c) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    const uint8x16_t q0 = vld1q_u8(p), q1 = vld1q_u8(p + 16);
    c[0] = s8(vandq_u8(q0, m3));
    c[1] = s8(vandq_u8(q1, m3));
    c[2] = s8(vandq_u8(vshrq_n_u8(q0, 2), m3));
    c[3] = s8(vandq_u8(vshrq_n_u8(q1, 2), m3));
    c[4] = s8(vandq_u8(vshrq_n_u8(q0, 4), m3));
    c[5] = s8(vandq_u8(vshrq_n_u8(q1, 4), m3));
    c[6] = s8(vshrq_n_u8(q0, 6));
    c[7] = s8(vshrq_n_u8(q1, 6));
}

/* TQ2_0 (66 bytes): element 128h + 32n + m is in qs[32h + m] at bits 2n: each 32-byte half is
 * one chunk in the packed layout's byte order. */
AI void unpack_tq2_0(const uint8_t *b, int8x16_t *c) {
    unpack_chunk(b, c);
    unpack_chunk(b + 32, c + 8);
}

/* I2_S (32 bytes, x86 layout): byte p holds weights p, p+32, p+64, p+96 at shifts 6, 4, 2, 0. */
AI void unpack_i2_s(const uint8_t *b, int8x16_t *c) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    const uint8x16_t q0 = vld1q_u8(b), q1 = vld1q_u8(b + 16);
    c[0] = s8(vshrq_n_u8(q0, 6));
    c[1] = s8(vshrq_n_u8(q1, 6));
    c[2] = s8(vandq_u8(vshrq_n_u8(q0, 4), m3));
    c[3] = s8(vandq_u8(vshrq_n_u8(q1, 4), m3));
    c[4] = s8(vandq_u8(vshrq_n_u8(q0, 2), m3));
    c[5] = s8(vandq_u8(vshrq_n_u8(q1, 2), m3));
    c[6] = s8(vandq_u8(q0, m3));
    c[7] = s8(vandq_u8(q1, m3));
}

/* Q2_0 / PQ2_0 (16 code bytes per 64 weights): weight 4i+k is in byte i at bits 2k.  Plane k
 * (lane i = weight 4i+k) is one shift+mask; two rounds of zips interleave the planes back into
 * weight order: zip(zip(P0,P2), zip(P1,P3)) = P0[i] P1[i] P2[i] P3[i] ... */
AI void unpack_q2_64(const uint8_t *qs, int8x16_t *c) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    const uint8x16_t q = vld1q_u8(qs);
    const uint8x16_t p0 = vandq_u8(q, m3), p1 = vandq_u8(vshrq_n_u8(q, 2), m3),
                     p2 = vandq_u8(vshrq_n_u8(q, 4), m3), p3 = vshrq_n_u8(q, 6);
    const uint8x16_t a0 = vzip1q_u8(p0, p2), b0 = vzip1q_u8(p1, p3);
    const uint8x16_t a1 = vzip2q_u8(p0, p2), b1 = vzip2q_u8(p1, p3);
    c[0] = s8(vzip1q_u8(a0, b0));
    c[1] = s8(vzip2q_u8(a0, b0));
    c[2] = s8(vzip1q_u8(a1, b1));
    c[3] = s8(vzip2q_u8(a1, b1));
}

/* Q1_0 (16 code bytes): weight j is bit j%8 of byte j/8.  Register t needs bytes 2t and 2t+1
 * each spread over 8 lanes (a table lookup), then a per-lane bit test.  The code is 2*bit
 * (value 2*bit - 1 = code - 1), so the offset is undone like the ternary formats'. */
AI void unpack_q1_0(const uint8_t *qs, int8x16_t *c) {
    static const uint8_t idx0[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t q = vld1q_u8(qs), bit = vld1q_u8(bits), two = vdupq_n_u8(2);
    uint8x16_t idx = vld1q_u8(idx0);
    for (int t = 0; t < 8; t++) {
        c[t] = s8(vandq_u8(vtstq_u8(vqtbl1q_u8(q, idx), bit), two));
        idx = vaddq_u8(idx, two);
    }
}

/* ---- format traits (compile-time constants after inlining) ---------------------------------- */

enum { F_TQ1_0, F_TQ2_0, F_I2_S, F_Q1_0, F_Q2_0, F_PQ2_0, F_PTQ1_0, F_Q8_0 };

AI int fmt_block(int f) { /* weights per block */
    return f == F_TQ1_0 || f == F_TQ2_0 ? 256 : f == F_Q2_0 ? 64 : f == F_Q8_0 ? 32 : 128;
}
AI int fmt_bytes(int f) {
    switch (f) {
    case F_TQ1_0: return (int)sizeof(lowbit_block_tq1_0);
    case F_TQ2_0: return (int)sizeof(lowbit_block_tq2_0);
    case F_I2_S: return (int)sizeof(lowbit_block_i2_s);
    case F_Q1_0: return (int)sizeof(lowbit_block_q1_0);
    case F_Q2_0: return (int)sizeof(lowbit_block_q2_0);
    case F_PQ2_0: return (int)sizeof(lowbit_block_pq2_0);
    case F_PTQ1_0: return (int)sizeof(lowbit_block_ptq1_0);
    default: return (int)sizeof(lowbit_block_q8_0);
    }
}
/* activation group: lowbit_act_group of the format (256 for TQ, 128 for I2_S / PQ2_0 / PTQ1_0) */
AI int fmt_group(int f) {
    return f == F_TQ1_0 || f == F_TQ2_0 ? 256 : f == F_I2_S || f == F_PQ2_0 || f == F_PTQ1_0 ? 128 : 32;
}
AI int fmt_offset(int f) { return f == F_Q8_0 ? 0 : 1; }
AI int fmt_negated(int f) { return f == F_TQ1_0 || f == F_PTQ1_0; } /* unpack gives -code */

/* Unpack block b (pointing at its first byte) and return its scale (I2_S: 1, the per-tensor
 * scale is applied by the caller). */
AI float unpack(int f, const uint8_t *b, int8x16_t *c) {
    switch (f) {
    case F_TQ1_0:
        unpack_tq1_0(b, c);
        return load_fp16(b + 52);
    case F_TQ2_0:
        unpack_tq2_0(b, c);
        return load_fp16(b + 64);
    case F_I2_S:
        unpack_i2_s(b, c);
        return 1.0f;
    case F_Q1_0:
        unpack_q1_0(b + 2, c);
        return load_fp16(b);
    case F_Q2_0:
        unpack_q2_64(b + 2, c);
        return load_fp16(b);
    case F_PQ2_0:
        unpack_q2_64(b + 2, c);
        unpack_q2_64(b + 18, c + 4);
        return load_fp16(b);
    case F_PTQ1_0:
        unpack_ptq1_0(b, c);
        return load_fp16(b + 26);
    default: /* Q8_0 */
        c[0] = vld1q_s8((const int8_t *)b + 2);
        c[1] = vld1q_s8((const int8_t *)b + 18);
        return load_fp16(b);
    }
}

/* ---- the row kernel: rows r0..r1 against `batch` activations ------------------------------- */

/* y[bi * ldy + r - ybase] = dot(row r, a[bi]).  GEMV passes ybase = r0 (y is relative to the
 * chunk), GEMM ybase = 0. */
AI void rows_kernel(const int f, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                    const lowbit_act *a, int64_t batch, float *y, int64_t ldy, int64_t ybase) {
    const int BS = fmt_block(f), BB = fmt_bytes(f), G = fmt_group(f);
    const int GPB = BS / G, RPG = G / 16; /* groups per block, registers per group */
    if (batch <= 0 || r0 >= r1) return;   /* a[0] may not exist */
    const int64_t nb = a[0].n / BS;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + r * row_bytes;
        for (int64_t b0 = 0; b0 < batch; b0 += GEMM_TILE) {
            const int nt = (int)(batch - b0 < GEMM_TILE ? batch - b0 : GEMM_TILE);
            float acc[GEMM_TILE] = {0};
            for (int64_t blk = 0; blk < nb; blk++) {
                int8x16_t c[16];
                const float dw = unpack(f, row + blk * BB, c);
                for (int t = 0; t < nt; t++) {
                    const lowbit_act *A = &a[b0 + t];
                    const int8_t *q = A->q + blk * BS;
                    for (int gi = 0; gi < GPB; gi++) {
                        int32x4_t vs = vdupq_n_s32(0);
                        for (int k = 0; k < RPG; k++) {
                            const int8x16_t qa = vld1q_s8(q + 16 * (gi * RPG + k));
                            vs = f == F_Q8_0 ? dot16_wide(vs, c[gi * RPG + k], qa)
                                             : dot16(vs, c[gi * RPG + k], qa);
                        }
                        const int64_t g = blk * GPB + gi;
                        int32_t isum = vaddvq_s32(vs);
                        if (fmt_negated(f)) isum = -isum;
                        isum -= fmt_offset(f) * A->s[g];
                        acc[t] += (float)isum * (dw * A->d[g]);
                    }
                }
            }
            for (int t = 0; t < nt; t++) y[(b0 + t) * ldy + r - ybase] = acc[t];
        }
    }
}

#define DEFINE_KERNELS(name, F)                                                                    \
    void VARIANT(gemv_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1, \
                                          const lowbit_act *a, float *y) {                         \
        rows_kernel(F, w, row_bytes, r0, r1, a, 1, y, 0, r0);                                      \
    }                                                                                              \
    void VARIANT(gemm_##name)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1, \
                                          const lowbit_act *a, int64_t batch, float *y,            \
                                          int64_t ldy) {                                           \
        rows_kernel(F, w, row_bytes, r0, r1, a, batch, y, ldy, 0);                                 \
    }
DEFINE_KERNELS(tq1_0, F_TQ1_0)
DEFINE_KERNELS(tq2_0, F_TQ2_0)
DEFINE_KERNELS(i2_s, F_I2_S)
DEFINE_KERNELS(q1_0, F_Q1_0)
DEFINE_KERNELS(q2_0, F_Q2_0)
DEFINE_KERNELS(pq2_0, F_PQ2_0)
DEFINE_KERNELS(ptq1_0, F_PTQ1_0)
DEFINE_KERNELS(q8_0, F_Q8_0)

/* ---- packed (row-interleaved) matrices: layout described in internal.h ---------------------- */


/* the fp16 scales of one block of a 4-row group, lane = row */
AI float32x4_t scales4(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* Lane i = row i of the 4-row group: acc += (float)(isum - s[g]) * (d_w * d_a[g]), the
 * reference's per-row expression with its two roundings (a multiply, then an add: the library is
 * built with -ffp-contract=off, so the scalar `acc += x * y` is not fused on AArch64 either). */
AI float32x4_t packed_accumulate(float32x4_t acc, int32x4_t isum, const lowbit_matrix *m,
                                 const uint16_t *sp, const lowbit_act *A, int64_t g, const int G) {
    float32x4_t dw = vdupq_n_f32(1.0f); /* I2_S: per-tensor scale applied by the caller */
    if (m->qk) dw = scales4(sp + g * G / m->qk * 4);
    isum = vsubq_s32(isum, vdupq_n_s32(A->s[g])); /* every packed code carries the +1 offset */
    return vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(dw, A->d[g])));
}

/* Horizontal sums of four int32x4 in one vector: lane i = sum of v[i]. */
AI int32x4_t hsum4(const int32x4_t *v) {
    return vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
}

AI void store_group(float *y, float32x4_t acc, int64_t rg0, int64_t r0, int64_t rend) {
    float t[4];
    vst1q_f32(t, acc);
    for (int i = 0; i < 4; i++)
        if (rg0 + i >= r0 && rg0 + i < rend) y[rg0 + i] = t[i];
}

/* Group G of the activations (32, 128 or 256): CG = min(G, 128) weights of it lie in one chunk
 * (128 / CG group parts per chunk), a group spans CPG = max(G / 128, 1) chunks; the int32 lanes of
 * a group are summed across its chunks and reduced once. */

/* GEMV, the decode path: one sequential walk over the interleaved codes; each chunk's activations
 * are loaded once and serve the 4 rows of the group. */
AI void packed_gemv_g(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                      float *y, const int G) {
    const int CG = G < 128 ? G : 128, CPG = G > 128 ? G / 128 : 1, RP = CG / 16;
    const int64_t nch = m->nchunks, cols = m->cols;
    const int64_t rend = r1 < m->rows ? r1 : m->rows;
    for (int64_t rg0 = r0 - r0 % 4; rg0 < rend; rg0 += 4) {
        const uint8_t *cp = m->codes + rg0 / 4 * nch * 128;
        const uint16_t *sp = m->scales + rg0 / 4 * m->nscales * 4;
        float32x4_t acc = vdupq_n_f32(0.0f);
        for (int64_t ch = 0; ch < nch; ch += CPG) {
            const int ng = (int)((cols - ch * 128 < 128 ? cols - ch * 128 : 128) / CG);
            int32x4_t v[4][4]; /* [group part][row] */
            for (int h = 0; h < 4; h++)
                for (int i = 0; i < 4; i++) v[h][i] = vdupq_n_s32(0);
            for (int cc = 0; cc < CPG; cc++) {
                const int8_t *q = a->q + (ch + cc) * 128;
                int8x16_t qa[8];
                for (int k = 0; k < ng * RP; k++) qa[k] = vld1q_s8(q + 16 * k);
                for (int i = 0; i < 4; i++) {
                    int8x16_t c[8];
                    unpack_chunk(cp + (ch + cc) * 128 + 32 * i, c);
                    for (int h = 0; h < ng; h++)
                        for (int k = 0; k < RP; k++) v[h][i] = dot16(v[h][i], c[h * RP + k], qa[h * RP + k]);
                }
            }
            for (int h = 0; h < ng; h++)
                acc = packed_accumulate(acc, hsum4(v[h]), m, sp, a, (ch * 128 + h * CG) / G, G);
        }
        store_group(y, acc, rg0, r0, rend);
    }
}

/* GEMM, the prompt path: each row's chunk is unpacked once per tile of GEMM_TILE activations. */
AI void packed_gemm_g(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                      int64_t batch, float *y, int64_t ldy, const int G) {
    const int CG = G < 128 ? G : 128, CPG = G > 128 ? G / 128 : 1, RP = CG / 16;
    const int64_t nch = m->nchunks, cols = m->cols;
    const int64_t rend = r1 < m->rows ? r1 : m->rows;
    for (int64_t rg0 = r0 - r0 % 4; rg0 < rend; rg0 += 4) {
        const uint8_t *cp0 = m->codes + rg0 / 4 * nch * 128;
        const uint16_t *sp = m->scales + rg0 / 4 * m->nscales * 4;
        for (int64_t b0 = 0; b0 < batch; b0 += GEMM_TILE) {
            const int nt = (int)(batch - b0 < GEMM_TILE ? batch - b0 : GEMM_TILE);
            float32x4_t acc[GEMM_TILE];
            for (int t = 0; t < nt; t++) acc[t] = vdupq_n_f32(0.0f);
            for (int64_t ch = 0; ch < nch; ch += CPG) {
                const int ng = (int)((cols - ch * 128 < 128 ? cols - ch * 128 : 128) / CG);
                int32_t is[4][GEMM_TILE][4] = {{{0}}}; /* [group part][column][row] */
                for (int cc = 0; cc < CPG; cc++)
                    for (int i = 0; i < 4; i++) {
                        int8x16_t c[8];
                        unpack_chunk(cp0 + (ch + cc) * 128 + 32 * i, c);
                        for (int t = 0; t < nt; t++) {
                            const int8_t *q = a[b0 + t].q + (ch + cc) * 128;
                            for (int h = 0; h < ng; h++) {
                                int32x4_t v = vdupq_n_s32(0);
                                for (int k = 0; k < RP; k++)
                                    v = dot16(v, c[h * RP + k], vld1q_s8(q + h * CG + 16 * k));
                                is[h][t][i] += vaddvq_s32(v);
                            }
                        }
                    }
                for (int t = 0; t < nt; t++)
                    for (int h = 0; h < ng; h++)
                        acc[t] = packed_accumulate(acc[t], vld1q_s32(is[h][t]), m, sp, &a[b0 + t],
                                                   (ch * 128 + h * CG) / G, G);
            }
            for (int t = 0; t < nt; t++) store_group(y + (b0 + t) * ldy, acc[t], rg0, r0, rend);
        }
    }
}

/* ---- packed GEMV fast paths of the decode step (counterparts of x86/kernels_avx2.c's) -------- */

/* I2_S with P2 activations (internal.h: one power-of-two scale for the whole vector, so the
 * spec's per-group float steps are exact and add up to (float)(row's int sum - offset) * d): the
 * int sums of a row are added across all its chunks and reduced once per row group, with one
 * float step -- instead of an hsum4 and a float step per chunk.  ROW_RUN chunks are summed in
 * the accumulators of the variant before they are added into int32 totals.  rowacc_chunk adds
 * one row's 32-byte chunk p (activation registers qa):
 * dotprod: planes 1 and 3 masked in place (code x 4, as chunk32x8_sums does) so that a 16-byte
 *   half needs one shift and four ANDs; the x1 planes go to acc[0], the x4 ones to acc[1], which
 *   is divided back exactly once per row (a multiple of 4).  int32 all along: |sum| <= 4 * 3 *
 *   128 * 65536 < 2^31 (lowbit_act_p2_row_ok caps a row at 65536 weights), one run per row.
 * baseline: SMLAL / SMLAL2 of the codes into two int16x8 per row (low / high 8 bytes of each
 *   register), so an int16 lane takes 8 products per chunk, each |code * q| <= 3 * 128: a run of
 *   8 chunks is <= 64 * 384 = 24576 < 32767.  One SADALP pair per run widens them. */
#if LOWBIT_ARM_DOTPROD
#define ROW_RUN INT64_MAX
typedef int32x4_t rowacc_t;
AI rowacc_t rowacc_zero(void) { return vdupq_n_s32(0); }
AI void rowacc_chunk(rowacc_t *acc, const uint8_t *p, const int8x16_t *qa) {
    const uint8x16_t m3 = vdupq_n_u8(3), m12 = vdupq_n_u8(12);
    for (int h = 0; h < 2; h++) { /* register 2k + h: plane k of bytes 16h.. */
        const uint8x16_t x = vld1q_u8(p + 16 * h), x4 = vshrq_n_u8(x, 4);
        acc[0] = vdotq_s32(acc[0], s8(vandq_u8(x, m3)), qa[h]);
        acc[1] = vdotq_s32(acc[1], s8(vandq_u8(x, m12)), qa[2 + h]);
        acc[0] = vdotq_s32(acc[0], s8(vandq_u8(x4, m3)), qa[4 + h]);
        acc[1] = vdotq_s32(acc[1], s8(vandq_u8(x4, m12)), qa[6 + h]);
    }
}
AI int32x4_t rowacc_widen(int32x4_t s, const rowacc_t *acc) {
    return vaddq_s32(s, vaddq_s32(acc[0], vshrq_n_s32(acc[1], 2)));
}
#else
#define ROW_RUN 8
typedef int16x8_t rowacc_t;
AI rowacc_t rowacc_zero(void) { return vdupq_n_s16(0); }
AI void rowacc_chunk(rowacc_t *acc, const uint8_t *p, const int8x16_t *qa) {
    int8x16_t c[8];
    unpack_chunk(p, c);
    for (int k = 0; k < 8; k++) {
        acc[0] = vmlal_s8(acc[0], vget_low_s8(c[k]), vget_low_s8(qa[k]));
        acc[1] = vmlal_high_s8(acc[1], c[k], qa[k]);
    }
}
AI int32x4_t rowacc_widen(int32x4_t s, const rowacc_t *acc) {
    return vpadalq_s16(vpadalq_s16(s, acc[0]), acc[1]);
}
#endif

/* Rows [r0, r1) of an I2_S matrix (cols a multiple of 128: chunk = activation group) when
 * lowbit_act_p2_row_ok holds for a; unscaled like the other I2_S kernels. */
AI void packed_gemv_i2s_row(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    const int64_t nch = m->nchunks;
    const int64_t rend = r1 < m->rows ? r1 : m->rows;
    const int32_t stot = lowbit_i2s_code_offset(m, a);
    for (int64_t rg0 = r0 - r0 % 4; rg0 < rend; rg0 += 4) {
        const uint8_t *cp = m->codes + rg0 / 4 * nch * 128;
        int32x4_t s32[4];
        for (int i = 0; i < 4; i++) s32[i] = vdupq_n_s32(0);
        for (int64_t c0 = 0, c1; c0 < nch; c0 = c1) {
            c1 = nch - c0 > ROW_RUN ? c0 + ROW_RUN : nch;
            rowacc_t acc[4][2];
            for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = rowacc_zero();
            for (int64_t c = c0; c < c1; c++) {
                int8x16_t qa[8];
                for (int k = 0; k < 8; k++) qa[k] = vld1q_s8(a->q + c * 128 + 16 * k);
                for (int i = 0; i < 4; i++) rowacc_chunk(acc[i], cp + c * 128 + 32 * i, qa);
            }
            for (int i = 0; i < 4; i++) s32[i] = rowacc_widen(s32[i], acc[i]);
        }
        /* exact: |isum| < 2^24 (lowbit_act_p2_row_ok) and d a power of two or 0 */
        const int32x4_t isum = vsubq_s32(hsum4(s32), vdupq_n_s32(stot));
        store_group(y, vmulq_n_f32(vcvtq_f32_s32(isum), a->d[0]), rg0, r0, rend);
    }
}
#undef ROW_RUN

/* Group-32 activations with scale blocks of QK = 64 (Q2_0; the code takes 128 too), the counterpart
 * of packed_gemv32: group k of a row's 32-byte chunk is its 2-bit plane k, and each plane is masked
 * in place, one instruction from the code bytes (plane 1 is code x 4, plane 2 code x 16, plane 3
 * a shift; the group sums are divided back exactly, multiples of 4 / 16).  tile32_sums gives the
 * group-k sums of a row group's 4 rows in the 4 lanes of one vector, and the spec's float step
 * runs once per (group, 4 rows) in its order:
 *   dotprod: the codes are transposed once per chunk so that a lane is a row (as on AVX2) and SDOT
 *     by element multiplies them with one broadcast activation quad: one accumulator per
 *     (group, 4 rows) and no horizontal sum.  Two row groups (8 rows) per step share the
 *     activation loads and s/d broadcasts.
 *   baseline: no byte dot with a broadcast, so a row keeps its 16 weights per register and the
 *     4 rows' int16 products are added pairwise (see tile32_sums).  One row group per step: with
 *     two, its registers spill (53.4 executed instructions per 128 weights against 48.4, Q2_0). */

/* plane k of code bytes x, masked in place (k = 1: code x 4, k = 2: code x 16) */
AI int8x16_t plane(uint8x16_t x, const int k) {
    return s8(k == 3 ? vshrq_n_u8(x, 6) : vandq_u8(x, vdupq_n_u8((uint8_t)(3 << 2 * k))));
}

#if LOWBIT_ARM_DOTPROD
/* x[q] (q = 0..7), lane i = bytes 4q..4q+3 of row i's 32-byte chunk: a 4x4 word transpose of
 * each 16-byte half of the tile (TRN1/TRN2 on words, then on doublewords). */
AI void tile32_load(const uint8_t *t, uint8x16_t *x) {
    for (int h = 0; h < 2; h++) {
        const uint32x4_t r0 = vld1q_u32((const uint32_t *)(t + 16 * h)),
                         r1 = vld1q_u32((const uint32_t *)(t + 32 + 16 * h)),
                         r2 = vld1q_u32((const uint32_t *)(t + 64 + 16 * h)),
                         r3 = vld1q_u32((const uint32_t *)(t + 96 + 16 * h));
        const uint64x2_t e0 = vreinterpretq_u64_u32(vtrn1q_u32(r0, r1)),
                         o0 = vreinterpretq_u64_u32(vtrn2q_u32(r0, r1)),
                         e1 = vreinterpretq_u64_u32(vtrn1q_u32(r2, r3)),
                         o1 = vreinterpretq_u64_u32(vtrn2q_u32(r2, r3));
        x[4 * h + 0] = vreinterpretq_u8_u64(vtrn1q_u64(e0, e1));
        x[4 * h + 1] = vreinterpretq_u8_u64(vtrn1q_u64(o0, o1));
        x[4 * h + 2] = vreinterpretq_u8_u64(vtrn2q_u64(e0, e1));
        x[4 * h + 3] = vreinterpretq_u8_u64(vtrn2q_u64(o0, o1));
    }
}
/* lane i = plane-k sum of row i: SDOT by element, activation quad q of the group broadcast */
AI int32x4_t tile32_sums(const uint8x16_t *x, const int k, int8x16_t q0, int8x16_t q1) {
    int32x4_t v = vdupq_n_s32(0);
    v = vdotq_laneq_s32(v, plane(x[0], k), q0, 0);
    v = vdotq_laneq_s32(v, plane(x[1], k), q0, 1);
    v = vdotq_laneq_s32(v, plane(x[2], k), q0, 2);
    v = vdotq_laneq_s32(v, plane(x[3], k), q0, 3);
    v = vdotq_laneq_s32(v, plane(x[4], k), q1, 0);
    v = vdotq_laneq_s32(v, plane(x[5], k), q1, 1);
    v = vdotq_laneq_s32(v, plane(x[6], k), q1, 2);
    return vdotq_laneq_s32(v, plane(x[7], k), q1, 3);
}
#else
/* x[2i + h] = half h of row i's 32-byte chunk */
AI void tile32_load(const uint8_t *t, uint8x16_t *x) {
    for (int j = 0; j < 8; j++) x[j] = vld1q_u8(t + 16 * j);
}
/* SMULL + 3 SMLAL(2) give 4 products per int16 lane and row; two rounds of ADDP add the 4 rows'
 * lanes into 16 products per lane, still int16 as long as |plane * q| <= 12 * 128 (16 * 1536 =
 * 24576 < 32767): plane 2 is unmasked here (code x 1).  SADDLP finishes the 4 rows' sums. */
AI int32x4_t tile32_sums(const uint8x16_t *x, const int k, int8x16_t q0, int8x16_t q1) {
    int16x8_t p[4];
    for (int i = 0; i < 4; i++) {
        const int8x16_t c0 = k == 2 ? s8(vandq_u8(vshrq_n_u8(x[2 * i], 4), vdupq_n_u8(3)))
                                    : plane(x[2 * i], k);
        const int8x16_t c1 = k == 2 ? s8(vandq_u8(vshrq_n_u8(x[2 * i + 1], 4), vdupq_n_u8(3)))
                                    : plane(x[2 * i + 1], k);
        p[i] = vmull_s8(vget_low_s8(c0), vget_low_s8(q0));
        p[i] = vmlal_high_s8(p[i], c0, q0);
        p[i] = vmlal_s8(p[i], vget_low_s8(c1), vget_low_s8(q1));
        p[i] = vmlal_high_s8(p[i], c1, q1);
    }
    return vpaddlq_s16(vpaddq_s16(vpaddq_s16(p[0], p[1]), vpaddq_s16(p[2], p[3])));
}
#endif

/* Group k (0..3) of chunk ch for the NT tiles x: acc[t] += the spec's float step of its 4 rows. */
AI void gemv32_group(uint8x16_t (*x)[8], const int NT, const int k, int64_t ch,
                     const lowbit_act *a, const float32x4_t *dw, float32x4_t *acc) {
    const int64_t g = ch * 4 + k;
    const int8x16_t q0 = vld1q_s8(a->q + 32 * g), q1 = vld1q_s8(a->q + 32 * g + 16);
    const int32x4_t s = vdupq_n_s32(a->s[g]);
    const float da = a->d[g];
    for (int t = 0; t < NT; t++) {
        int32x4_t isum = tile32_sums(x[t], k, q0, q1);
        if (k == 1) isum = vshrq_n_s32(isum, 2);
        if (k == 2 && LOWBIT_ARM_DOTPROD) isum = vshrq_n_s32(isum, 4); /* baseline: plane 2 x 1 */
        /* acc += (float)(isum - s[g]) * (d_w * d_a[g]) */
        isum = vsubq_s32(isum, s);
        acc[t] = vaddq_f32(acc[t], vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(dw[t], da)));
    }
}

/* NT row groups (tiles) from rg0 at once: activation loads shared */
AI void gemv32_tiles(const lowbit_matrix *m, int64_t rg0, const int NT, const lowbit_act *a,
                     float32x4_t *acc, const int QK) {
    const int64_t nch = m->nchunks, cols = m->cols;
    const uint8_t *cp = m->codes + rg0 / 4 * nch * 128;
    const uint16_t *sp = m->scales + rg0 / 4 * m->nscales * 4;
    for (int t = 0; t < NT; t++) acc[t] = vdupq_n_f32(0.0f);
    for (int64_t ch = 0; ch < nch; ch++) {
        uint8x16_t x[2][8];
        float32x4_t dw[2];
        for (int t = 0; t < NT; t++) {
            tile32_load(cp + (t * nch + ch) * 128, x[t]);
            dw[t] = scales4(sp + (t * m->nscales + ch * 128 / QK) * 4);
        }
        gemv32_group(x, NT, 0, ch, a, dw, acc);
        gemv32_group(x, NT, 1, ch, a, dw, acc);
        if (cols - ch * 128 < 128) break; /* a last half chunk (Q2_0): 2 groups */
        if (QK == 64) /* the second block of the chunk */
            for (int t = 0; t < NT; t++)
                dw[t] = scales4(sp + (t * m->nscales + 2 * ch + 1) * 4);
        gemv32_group(x, NT, 2, ch, a, dw, acc);
        gemv32_group(x, NT, 3, ch, a, dw, acc);
    }
}

#define G32_TILES (LOWBIT_ARM_DOTPROD ? 2 : 1) /* row groups per step, see above */
AI void packed_gemv32(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a, float *y,
                      const int QK) {
    const int64_t rend = r1 < m->rows ? r1 : m->rows;
    int64_t rg0 = r0 - r0 % 4;
    for (; G32_TILES == 2 && rg0 + 4 < rend; rg0 += 8) {
        float32x4_t acc[2];
        gemv32_tiles(m, rg0, 2, a, acc, QK);
        store_group(y, acc[0], rg0, r0, rend);
        store_group(y, acc[1], rg0 + 4, r0, rend);
    }
    for (; rg0 < rend; rg0 += 4) { /* one row group at a time (a last lone one) */
        float32x4_t acc[1];
        gemv32_tiles(m, rg0, 1, a, acc, QK);
        store_group(y, acc[0], rg0, r0, rend);
    }
}

#undef G32_TILES

/* The packed GEMV entries (kernel_list.c picks among them by the matrix), the group size a
 * constant in each. */
void VARIANT(packed_gemv32)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    packed_gemv32(m, r0, r1, a, y, 64);
}
void VARIANT(packed_gemv_g32)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                              float *y) {
    packed_gemv_g(m, r0, r1, a, y, 32);
}
void VARIANT(packed_gemv_g128)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               float *y) {
    packed_gemv_g(m, r0, r1, a, y, 128);
}
void VARIANT(packed_gemv_g256)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               float *y) {
    packed_gemv_g(m, r0, r1, a, y, 256);
}
/* I2_S in whole chunks: the row sums where the activations allow them (decided per call), else
 * the group kernel. */
void VARIANT(packed_gemv_i2s)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                              float *y) {
    if (lowbit_i2s_row_sums_ok(m, a))
        packed_gemv_i2s_row(m, r0, r1, a, y);
    else
        packed_gemv_g(m, r0, r1, a, y, 128);
}

void VARIANT(packed_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    switch (m->group) { /* the group a constant in each instance */
    case 32: packed_gemm_g(m, r0, r1, a, batch, y, ldy, 32); break;
    case 128: packed_gemm_g(m, r0, r1, a, batch, y, ldy, 128); break;
    case 256: packed_gemm_g(m, r0, r1, a, batch, y, ldy, 256); break;
    default: lowbit_packed_gemm_ref(m, r0, r1, a, batch, y, ldy);
    }
}

#undef AI
#undef VARIANT
#endif /* LOWBIT_KERNELS_ARM_H */
