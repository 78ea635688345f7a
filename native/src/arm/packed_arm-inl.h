/* The AArch64 packed-layout GEMV / GEMM entries (after arm-inl.h, in kernels_neon.c,
 * kernels_dotprod.c and kernels_i8mm.c: its GEMM only). */
#ifndef LOWBIT_PACKED_ARM_INL_H
#define LOWBIT_PACKED_ARM_INL_H

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

#if LOWBIT_ARM_I8MM
#include "packed_gemm_mmla-inl.h"
#define PACKED_GEMM_G packed_gemm_mmla
#else
#define PACKED_GEMM_G packed_gemm_g
#endif

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
 * constant in each; i8mm has none (dotprod's run, see file_arm-inl.h). */
#if !LOWBIT_ARM_I8MM
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
#endif

void VARIANT(packed_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    switch (m->group) { /* the group a constant in each instance */
    case 32: PACKED_GEMM_G(m, r0, r1, a, batch, y, ldy, 32); break;
    case 128: PACKED_GEMM_G(m, r0, r1, a, batch, y, ldy, 128); break;
    case 256: PACKED_GEMM_G(m, r0, r1, a, batch, y, ldy, 256); break;
    default: lowbit_packed_gemm_ref(m, r0, r1, a, batch, y, ldy);
    }
}

#undef PACKED_GEMM_G

#endif /* LOWBIT_PACKED_ARM_INL_H */
