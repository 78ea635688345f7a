/* The codes of ggml's Q5_0, Q4_K and Q6_K as int8 registers in weight order, shared by
 * kquant_neon.c and kquant_i8mm.c.  Codes fit int8: Q5_0 0..31 (its offset 16 undone with the
 * activation sums), Q4_K 0..15, Q6_K q - 32. */
#ifndef LOWBIT_KQUANT_ARM_INL_H
#define LOWBIT_KQUANT_ARM_INL_H

#include <arm_neon.h>

#include "../internal.h"

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

/* bits 8h .. 8h + 15 of qh -> 0x10 in bytes 0..15 */
AI uint8x16_t q5_high(uint32_t qh, int h) {
    static const uint8_t BIT[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)(qh >> (16 * h))), vdup_n_u8((uint8_t)(qh >> (16 * h + 8))));
    return vandq_u8(vtstq_u8(v, vld1q_u8(BIT)), vdupq_n_u8(0x10));
}

/* Q5_0: the block's 32 codes (0..31) */
AI void q5_0_codes(const lowbit_block_q5_0 *blk, int8x16_t c[2]) {
    const uint8x16_t m4 = vdupq_n_u8(15);
    uint32_t qh;
    memcpy(&qh, blk->qh, 4);
    const uint8x16_t qs = vld1q_u8(blk->qs);
    c[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(qs, m4), q5_high(qh, 0)));
    c[1] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(qs, 4), q5_high(qh, 1)));
}

/* Q4_K: sub-block k's 32 codes, the nibbles (k odd: high) of qs[32 (k / 2) ..] */
AI void q4_k_codes(const lowbit_block_q4_k *blk, int k, int8x16_t c[2]) {
    const uint8x16_t m4 = vdupq_n_u8(15);
    const uint8_t *qs = blk->qs + 32 * (k / 2);
    uint8x16_t w0 = vld1q_u8(qs), w1 = vld1q_u8(qs + 16);
    c[0] = vreinterpretq_s8_u8(k & 1 ? vshrq_n_u8(w0, 4) : vandq_u8(w0, m4));
    c[1] = vreinterpretq_s8_u8(k & 1 ? vshrq_n_u8(w1, 4) : vandq_u8(w1, m4));
}

/* Q6_K: c[k] (k = 0..3) = the codes - 32 of weights 128h + 32k + 16 half .. + 16 */
AI void q6_k_codes(const lowbit_block_q6_k *blk, int h, int half, int8x16_t c[4]) {
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    const uint8_t *L = blk->ql + 64 * h + 16 * half, *H = blk->qh + 32 * h + 16 * half;
    const uint8x16_t l0 = vld1q_u8(L), l1 = vld1q_u8(L + 32), hb = vld1q_u8(H);
    const uint8x16_t u[4] = {
        vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
        vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
        vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
        vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
    };
    for (int k = 0; k < 4; k++) c[k] = vsubq_s8(vreinterpretq_s8_u8(u[k]), k32);
}

#endif /* LOWBIT_KQUANT_ARM_INL_H */
