/* Q1_0 GEMV by table lookup (the design of x86/q1_lut-inl.h), 16 rows a tile: the activation's
 * per-quad tables (q1_lut_cache.h: T_m + 508 split into two 5-bit byte tables a quad) are looked
 * up with vqtbl1q_u8, a byte lane a row, so one lookup serves 16 rows.  A group's 8 quads add up
 * below 256 in each half; isum + 8 * 508 = lo + 32 hi is exact in uint16, then int32, then the
 * reference's float steps (the block's sum of (float)isum * da, then acc = fma(dw, sum, acc)),
 * so results are bit-identical.
 * The 16 rows' code bytes of a block are transposed in registers (4 rounds of byte zips).
 * Included by file_arm-inl.h (neon and dotprod variants: the lookups need no dot product). */
#ifndef LOWBIT_Q1_LUT_ARM_INL_H
#define LOWBIT_Q1_LUT_ARM_INL_H
#include "../q1_lut_cache.h"

/* The tables of every quad: v[x] = 508 + sum_t (bit t of x ? q_t : -q_t), x = 0..7 and 8..15 */
static void q1_lut_build_neon(const lowbit_act *a, uint8_t *tab) {
    int16_t sg[4][16];
    for (int t = 0; t < 4; t++)
        for (int x = 0; x < 16; x++) sg[t][x] = (int16_t)((x >> t) & 1 ? 1 : -1);
    int16x8_t S0[4], S1[4];
    for (int t = 0; t < 4; t++) S0[t] = vld1q_s16(sg[t]), S1[t] = vld1q_s16(sg[t] + 8);
    const uint16x8_t m5 = vdupq_n_u16(31);
    for (int64_t m = 0; m < a->n / 4; m++) {
        const int8_t *q = a->q + 4 * m;
        int16x8_t v0 = vdupq_n_s16(Q1_LUT_BIAS), v1 = v0;
        for (int t = 0; t < 4; t++) {
            v0 = vmlaq_n_s16(v0, S0[t], q[t]);
            v1 = vmlaq_n_s16(v1, S1[t], q[t]);
        }
        const uint16x8_t u0 = vreinterpretq_u16_s16(v0), u1 = vreinterpretq_u16_s16(v1);
        const uint8x8_t l0 = vmovn_u16(vandq_u16(u0, m5)), l1 = vmovn_u16(vandq_u16(u1, m5));
        vst1q_u8(tab + 32 * m, vcombine_u8(l0, l1));
        vst1q_u8(tab + 32 * m + 16, vcombine_u8(vshrn_n_u16(u0, 5), vshrn_n_u16(u1, 5)));
    }
}

/* acc[j] lane e accumulates row 4 j + e of the 16 rows at p (row i at p + i rb) */
AI void q1_lut_tile(const uint8_t *p, int64_t rb, int64_t nb, const uint8_t *tab,
                    const lowbit_act *a, float32x4_t acc[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const uint16x8_t bias = vdupq_n_u16(8 * Q1_LUT_BIAS);
    for (int j = 0; j < 4; j++) acc[j] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pr = p + (int64_t)sizeof(lowbit_block_q1_0) * b;
        uint8x16_t R[16];
        uint64_t dh[4] = {0}; /* fp16 scales of rows 4 j.. 4 j + 3 (GPRs: lane inserts spill) */
        /* one running row pointer (16 row offsets as invariants would be spilled) */
        for (int i = 0; i < 16; i++) {
            uint16_t h;
            R[i] = vld1q_u8(pr + AT(q1_0, qs));
            memcpy(&h, pr + AT(q1_0, d), 2);
            dh[i / 4] |= (uint64_t)h << (16 * (i % 4));
            pr += rb;
            __asm__("" : "+r"(pr));
        }
        /* each round moves (register r, byte j) to (2 (r % 8) + j / 8, 2 (j % 8) + r / 8): a
         * rotation of the 8-bit index (r, j); after 4, register k is byte k of rows 0..15 */
        for (int round = 0; round < 4; round++) {
            uint8x16_t T[16];
            for (int i = 0; i < 8; i++) {
                T[2 * i] = vzip1q_u8(R[i], R[i + 8]);
                T[2 * i + 1] = vzip2q_u8(R[i], R[i + 8]);
            }
            for (int i = 0; i < 16; i++) R[i] = T[i];
        }
        float32x4_t dw[4]; /* rows 4 j.. 4 j + 3 */
        for (int j = 0; j < 4; j++)
            dw[j] = vcvt_f32_f16(vreinterpret_f16_u16(vcreate_u16(dh[j])));
        const uint8_t *tb = tab + 32 * 32 * b;
        float32x4_t S[4]; /* the block's sum of (float)isum * da, rows 4 j.. 4 j + 3 */
        for (int j = 0; j < 4; j++) S[j] = vdupq_n_f32(0.0f);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) { /* unrolled: R stays in registers */
            uint8x16_t A = vdupq_n_u8(0), B = A;
            for (int k = 0; k < 4; k++) { /* code byte 4 g + k: quads 2 (4 g + k), + 1 */
                const uint8_t *t = tb + 64 * (4 * g + k);
                const uint8x16_t xl = vandq_u8(R[4 * g + k], m4), xh = vshrq_n_u8(R[4 * g + k], 4);
                A = vaddq_u8(A, vqtbl1q_u8(vld1q_u8(t), xl));
                B = vaddq_u8(B, vqtbl1q_u8(vld1q_u8(t + 16), xl));
                A = vaddq_u8(A, vqtbl1q_u8(vld1q_u8(t + 32), xh));
                B = vaddq_u8(B, vqtbl1q_u8(vld1q_u8(t + 48), xh));
            }
            /* lo + 32 hi <= 8184 in uint16; minus the bias it wraps to the int32 isum */
            const uint16x8_t W0 = vaddw_u8(vshll_n_u8(vget_low_u8(B), 5), vget_low_u8(A));
            const uint16x8_t W1 = vaddw_high_u8(vshll_high_n_u8(B, 5), A);
            const int32x4_t V[4] = {
                vreinterpretq_s32_u32(vsubl_u16(vget_low_u16(W0), vget_low_u16(bias))),
                vreinterpretq_s32_u32(vsubl_high_u16(W0, bias)),
                vreinterpretq_s32_u32(vsubl_u16(vget_low_u16(W1), vget_low_u16(bias))),
                vreinterpretq_s32_u32(vsubl_high_u16(W1, bias))};
            const float32x4_t da = vdupq_n_f32(a->d[4 * b + g]);
            for (int j = 0; j < 4; j++)
                S[j] = g ? vfmaq_f32(S[j], vcvtq_f32_s32(V[j]), da) : vmulq_f32(vcvtq_f32_s32(V[j]), da);
        }
        for (int j = 0; j < 4; j++) acc[j] = vfmaq_f32(acc[j], dw[j], S[j]); /* the reference's steps */
    }
}

/* Tiles of 16 rows; a last one of 4 or more is the 16 ending at r1 (rows before r0 exist in w),
 * fewer go to rows_kernel, as does all of a call under 16 rows or without table memory. */
static void q1_gemv_lut(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y) {
    q1_lut_cache *c = r1 >= 16 && r1 - r0 >= 4 ? q1_lut_take(a, q1_lut_build_neon) : NULL;
    if (!c) {
        rows_kernel(F_Q1_0, w, rb, r0, r1, a, 1, y, 0, r0);
        return;
    }
    for (int64_t r = r0; r < r1; r += 16) {
        if (r1 - r < 4) {
            rows_kernel(F_Q1_0, w, rb, r, r1, a, 1, y, 0, r0);
            break;
        }
        const int64_t t = r + 16 <= r1 ? r : r1 - 16;
        float32x4_t acc[4];
        q1_lut_tile((const uint8_t *)w + t * rb, rb, a->n / 128, q1_lut_tables(c), a, acc);
        float out[16];
        for (int j = 0; j < 4; j++) vst1q_f32(out + 4 * j, acc[j]);
        memcpy(y + r - r0, out + (r - t), sizeof(float) * (size_t)(16 - (r - t)));
    }
    q1_lut_put(c);
}
#endif /* LOWBIT_Q1_LUT_ARM_INL_H */
