/* The GEMMs of ggml's Q5_0, Q4_K and Q6_K with SMMLA (FEAT_I8MM; compiled with
 * -march=armv8.2-a+dotprod+i8mm for this file only): two rows and two activations per pair of
 * SMMLA (arm-inl.h, mmla16), the codes unpacked as in kquant_neon.c (kquant_arm-inl.h).  Each of
 * the four (row, activation) lanes gets the exact int32 sums of the reference (ref/kquant.c) and
 * its float steps in the reference's order, block by block, so the results equal scalar bit for
 * bit.  The GEMVs stay neon's (i8mm falls back to it, through dotprod). */
#define LOWBIT_ARM_DOTPROD 1
#define LOWBIT_ARM_I8MM 1
#include "arm-inl.h"
#include "kquant_arm-inl.h"

enum { K_Q5_0, K_Q4_K, K_Q6_K };

/* One row's weight block: codes in weight order (16 registers; Q5_0 2), the fp16 scales as
 * floats, the integer sub-block scales (Q4_K: 8 scales and mins of 32 weights; Q6_K: 16 scales of
 * 16 weights). */
typedef struct {
    int8x16_t c[16];
    float d, dmin;
    int32_t sc[16], m[8];
} kblock;

AI int kq_block(int f) { return f == K_Q5_0 ? 32 : 256; }
AI int kq_bytes(int f) {
    return f == K_Q5_0   ? (int)sizeof(lowbit_block_q5_0)
           : f == K_Q4_K ? (int)sizeof(lowbit_block_q4_k)
                         : (int)sizeof(lowbit_block_q6_k);
}

AI void kq_unpack(int f, const uint8_t *p, kblock *k) {
    if (f == K_Q5_0) {
        const lowbit_block_q5_0 *b = (const lowbit_block_q5_0 *)p;
        q5_0_codes(b, k->c);
        k->d = lowbit_fp16_to_fp32(b->d);
    } else if (f == K_Q4_K) {
        const lowbit_block_q4_k *b = (const lowbit_block_q4_k *)p;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            lowbit_q4_k_scale_min(b->scales, s, &sc, &m);
            k->sc[s] = sc, k->m[s] = m;
            q4_k_codes(b, s, k->c + 2 * s);
        }
        k->d = lowbit_fp16_to_fp32(b->d), k->dmin = lowbit_fp16_to_fp32(b->dmin);
    } else {
        const lowbit_block_q6_k *b = (const lowbit_block_q6_k *)p;
        for (int h = 0; h < 2; h++)
            for (int half = 0; half < 2; half++) {
                int8x16_t c[4];
                q6_k_codes(b, h, half, c);
                for (int j = 0; j < 4; j++) k->c[8 * h + 2 * j + half] = c[j]; /* weights 16 * index */
            }
        for (int s = 0; s < 16; s++) k->sc[s] = b->scales[s];
        k->d = lowbit_fp16_to_fp32(b->d);
    }
}

/* (x0, x0, x1, x1): a per-row value in mmla16's lane order */
AI int32x4_t rows_s32(int32_t x0, int32_t x1) { return vcombine_s32(vdup_n_s32(x0), vdup_n_s32(x1)); }
/* (y0, y1, y0, y1): a per-activation value */
AI int32x4_t acts_s32(int32_t y0, int32_t y1) {
    const int32x2_t v = vset_lane_s32(y1, vdup_n_s32(y0), 1);
    return vcombine_s32(v, v);
}
AI float32x4_t acts_f32(float y0, float y1) {
    const float32x2_t v = vset_lane_f32(y1, vdup_n_f32(y0), 1);
    return vcombine_f32(v, v);
}

/* the sum of 32 activation codes */
AI int32_t sum32(const int8_t *q) { return vaddlvq_s8(vld1q_s8(q)) + vaddlvq_s8(vld1q_s8(q + 16)); }

/* Rows r, r+1 against activations t, t+1 (rows_kernel_mmla's shape, file_arm-inl.h); a lone last
 * row or activation is paired with itself and its copy's lanes are not stored. */
AI void kq_gemm_mmla(const int f, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                     const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    const int BS = kq_block(f), BB = kq_bytes(f), NREG = BS / 16;
    if (batch <= 0 || r0 >= r1) return; /* a[0] may not exist */
    const int64_t nb = a[0].n / BS;
    for (int64_t r = r0; r < r1; r += 2) {
        const int two = r + 1 < r1;
        const uint8_t *row0 = (const uint8_t *)w + r * row_bytes;
        const uint8_t *row1 = two ? row0 + row_bytes : row0;
        for (int64_t b0 = 0; b0 < batch; b0 += GEMM_TILE) {
            const int nt = (int)(batch - b0 < GEMM_TILE ? batch - b0 : GEMM_TILE);
            float32x4_t acc[GEMM_TILE / 2]; /* pair p: (r, 2p), (r, 2p+1), (r+1, 2p), (r+1, 2p+1) */
            for (int p = 0; p < (nt + 1) / 2; p++) acc[p] = vdupq_n_f32(0.0f);
            for (int64_t blk = 0; blk < nb; blk++) {
                kblock k0, k1;
                kq_unpack(f, row0 + blk * BB, &k0);
                kq_unpack(f, row1 + blk * BB, &k1);
                int8x16_t wl[16], wh[16];
                for (int i = 0; i < NREG; i++) {
                    wl[i] = pair_lo(k0.c[i], k1.c[i]);
                    wh[i] = pair_hi(k0.c[i], k1.c[i]);
                }
                const float32x4_t d = vcombine_f32(vdup_n_f32(k0.d), vdup_n_f32(k1.d));
                const float32x4_t dmin = vcombine_f32(vdup_n_f32(k0.dmin), vdup_n_f32(k1.dmin));
                for (int t = 0; t < nt; t += 2) {
                    const lowbit_act *A0 = &a[b0 + t], *A1 = t + 1 < nt ? A0 + 1 : A0;
                    const int8_t *q0 = A0->q + blk * BS, *q1 = A1->q + blk * BS;
                    const float32x4_t da = acts_f32(A0->d[blk], A1->d[blk]);
                    int32x4_t isum = vdupq_n_s32(0), msum = isum;
                    if (f == K_Q5_0) {
                        for (int i = 0; i < 2; i++)
                            isum = mmla16(isum, wl[i], wh[i], vld1q_s8(q0 + 16 * i), vld1q_s8(q1 + 16 * i));
                        isum = vsubq_s32(isum, vmulq_n_s32(acts_s32(A0->s[blk], A1->s[blk]), 16));
                    } else if (f == K_Q4_K) {
                        for (int s = 0; s < 8; s++) { /* sub-block s: registers 2s, 2s+1 */
                            int32x4_t dot = vdupq_n_s32(0);
                            for (int i = 2 * s; i < 2 * s + 2; i++)
                                dot = mmla16(dot, wl[i], wh[i], vld1q_s8(q0 + 16 * i), vld1q_s8(q1 + 16 * i));
                            isum = vmlaq_s32(isum, dot, rows_s32(k0.sc[s], k1.sc[s]));
                            msum = vmlaq_s32(msum, acts_s32(sum32(q0 + 32 * s), sum32(q1 + 32 * s)),
                                             rows_s32(k0.m[s], k1.m[s]));
                        }
                    } else {
                        for (int s = 0; s < 16; s++) { /* sub-block s: register s */
                            const int32x4_t dot = mmla16(vdupq_n_s32(0), wl[s], wh[s], vld1q_s8(q0 + 16 * s),
                                                         vld1q_s8(q1 + 16 * s));
                            isum = vmlaq_s32(isum, dot, rows_s32(k0.sc[s], k1.sc[s]));
                        }
                    }
                    /* acc += (float)isum * (d * da); Q4_K: acc -= (float)msum * (dmin * da) */
                    float32x4_t v = vaddq_f32(acc[t / 2], vmulq_f32(vcvtq_f32_s32(isum), vmulq_f32(d, da)));
                    if (f == K_Q4_K) v = vsubq_f32(v, vmulq_f32(vcvtq_f32_s32(msum), vmulq_f32(dmin, da)));
                    acc[t / 2] = v;
                }
            }
            for (int t = 0; t < nt; t++) {
                float l[4];
                vst1q_f32(l, acc[t / 2]);
                y[(b0 + t) * ldy + r] = l[t % 2];
                if (two) y[(b0 + t) * ldy + r + 1] = l[2 + t % 2];
            }
        }
    }
}

#define DEFINE_KQ(name, F)                                                                         \
    void gemm_##name##_i8mm(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,              \
                            const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {           \
        kq_gemm_mmla(F, w, row_bytes, r0, r1, a, batch, y, ldy);                                   \
    }
DEFINE_KQ(q5_0, K_Q5_0)
DEFINE_KQ(q4_k, K_Q4_K)
DEFINE_KQ(q6_k, K_Q6_K)
