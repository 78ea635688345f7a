/* Shared body of the AArch64 kernels (with file_arm-inl.h and packed_arm-inl.h), included by
 * kernels_neon.c, kernels_dotprod.c and kernels_i8mm.c.
 *
 * The includer defines LOWBIT_ARM_DOTPROD (1: vdotq_s32, 0: baseline Advanced SIMD), and
 * LOWBIT_ARM_I8MM 1 for the i8mm variant (only its GEMMs: SMMLA, see mmla16 below), and gets
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
 * The packed (row-interleaved, 2-bit canonical) layout of pack.c has its own GEMV/GEMM at the
 * end: there lane i of a float vector is row i of a 4-row group. */
#ifndef LOWBIT_ARM_INL_H
#define LOWBIT_ARM_INL_H

#include <arm_neon.h>
#include <stddef.h>

#include "../internal.h"

#ifndef LOWBIT_ARM_DOTPROD
#error "define LOWBIT_ARM_DOTPROD to 0 or 1 before including arm-inl.h"
#endif
#ifndef LOWBIT_ARM_I8MM
#define LOWBIT_ARM_I8MM 0
#endif

#define AI static inline __attribute__((always_inline))

/* Kernel names state the contract and the variant (gemv_tq2_0_dotprod), so profiles tell the
 * two translation units apart. */
#if LOWBIT_ARM_I8MM
#define VARIANT(name) name##_i8mm
#elif LOWBIT_ARM_DOTPROD
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

#if LOWBIT_ARM_I8MM
/* ---- 2 rows x 2 activations: SMMLA ------------------------------------------------------------
 * vmmlaq_s32(acc, A, B) takes A and B as two 8-byte rows each and adds the four 8-term dot
 * products  acc[2i + j] += A_i . B_j.  Pairing the 8-byte halves of two weight rows' registers
 * (pair_lo / pair_hi) and of two activations' gives, per 16 codes, two SMMLA that add 64 products
 * into the lanes (row 0, act 0), (row 0, act 1), (row 1, act 0), (row 1, act 1): exact int32 sums
 * of each (row, activation) like the other variants', with no horizontal reduction after. */
AI int8x16_t pair_lo(int8x16_t x, int8x16_t y) { /* x[0..7], y[0..7] */
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
AI int8x16_t pair_hi(int8x16_t x, int8x16_t y) { /* x[8..15], y[8..15] */
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
/* wl / wh: pair_lo / pair_hi of two rows' 16 codes; q0, q1: the two activations' 16 codes */
AI int32x4_t mmla16(int32x4_t acc, int8x16_t wl, int8x16_t wh, int8x16_t q0, int8x16_t q1) {
    acc = vmmlaq_s32(acc, wl, pair_lo(q0, q1));
    return vmmlaq_s32(acc, wh, pair_hi(q0, q1));
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
    memcpy(&h, b + offsetof(lowbit_block_tq1_0, qh), 4);
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
    memcpy(&h, b + offsetof(lowbit_block_ptq1_0, qh), 2);
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

#endif /* LOWBIT_ARM_INL_H */
