/* Scalar reference: A8 activation quantizer and the dot product of every weight format with A8
 * activations.  The specification the SIMD variants are tested against:
 *
 *   dot(row, a) = sum over groups g of  (d_w(block of g) * d_a[g]) * isum_g      (float, in order)
 *   isum_g      = sum_j c_j * q_j - off * s[g]                                     (exact int32)
 *
 * where c_j is the stored code and `off` undoes its offset: off = 1 for the ternary/2-bit codes
 * (value c - 1), Q1_0 uses c = 2*bit (value 2*bit - 1, so isum = 2*sum(bit*q) - s), Q8_0 has none.
 * A group never straddles two weight blocks (lowbit_act_group: 256 = the TQ block, 128 = the
 * PQ2_0 / PTQ1_0 block and I2_S's, 32 divides every other block).  I2_S returns the sum without
 * its per-tensor scale (d_w = 1); the caller multiplies once per row.
 *
 * Q1_0, whose 128-weight block holds 4 groups, takes llama.cpp's order instead, one weight-scale
 * step a block: s_b = (float)isum_0 * d_a[0], then s_b = fma((float)isum_g, d_a[g], s_b) for
 * g = 1..3, and acc = fma(d_w, s_b, acc), blocks in order (fma: one rounding, as SIMD FMA). */
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "../platform.h" /* lowbit_fmaf */

void lowbit_base3_codes(int qk, const uint8_t *qs, const uint8_t *qh, uint8_t *codes);
void lowbit_tq2_0_codes(const uint8_t *qs, uint8_t *codes);
void lowbit_i2_s_codes(const uint8_t *qs, uint8_t *codes);

/* The A8 spec (formats.h), rule LOWBIT_ACT_* (internal.h). */
void lowbit_quantize_act_ref(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                             float *d, int32_t *s) {
    const int whole = rule == LOWBIT_RULE_P2 || rule == LOWBIT_RULE_S8; /* one scale per vector */
    float vmax = 0.0f; /* max|x| of the whole vector */
    if (whole)
        for (int64_t j = 0; j < n; j++)
            if (fabsf(x[j]) > vmax) vmax = fabsf(x[j]);
    for (int64_t g = 0; g < n / group; g++) {
        const float *xg = x + g * group;
        float amax = 0.0f, smax = 0.0f; /* max|x| and the first element reaching it */
        for (int64_t j = 0; j < group; j++)
            if (fabsf(xg[j]) > amax) amax = fabsf(xg[j]), smax = xg[j]; /* NaN never wins */
        float id, dg;
        if (whole) {
            lowbit_act_vector_scale(rule, vmax, &dg, &id);
        } else if (rule == LOWBIT_RULE_Q8_K) { /* q = rint(-127/max * x), d = 1/iscale (fp32) */
            id = amax ? -127.0f / smax : 0.0f;
            dg = amax ? 1.0f / id : 0.0f;
        } else { /* Q8_0 and A8: q = round(127/amax * x), d = amax/127 (Q8_0: fp16-rounded) */
            dg = amax / 127.0f;
            id = (rule == LOWBIT_RULE_Q8_0 ? amax != 0.0f : dg != 0.0f) ? 127.0f / amax : 0.0f;
            if (rule == LOWBIT_RULE_Q8_0) dg = lowbit_fp16_to_fp32(lowbit_fp32_to_fp16(dg));
        }
        int32_t sum = 0;
        for (int64_t j = 0; j < group; j++) {
            float v = lowbit_act_clamp(xg[j] * id);
            int c = (int)(rule == LOWBIT_RULE_A8 || whole ? roundf(v) : rintf(v));
            q[g * group + j] = (int8_t)c;
            sum += c;
        }
        d[g] = dg;
        s[g] = sum;
    }
}

/* Codes of weight block `b` of a row, widened to int (value = code - offset handled by caller),
 * and its scale. */
static float block_codes(int k, const uint8_t *row, int64_t b, int *codes) {
    uint8_t c8[256];
    uint16_t dh = 0;
    switch (k) {
    case LOWBIT_K_TQ1_0: {
        const lowbit_block_tq1_0 *blk = (const lowbit_block_tq1_0 *)row + b;
        lowbit_base3_codes(256, blk->qs, blk->qh, c8);
        for (int j = 0; j < 256; j++) codes[j] = c8[j];
        return lowbit_fp16_to_fp32(blk->d);
    }
    case LOWBIT_K_PTQ1_0: {
        const lowbit_block_ptq1_0 *blk = (const lowbit_block_ptq1_0 *)row + b;
        lowbit_base3_codes(128, blk->qs, blk->qh, c8);
        for (int j = 0; j < 128; j++) codes[j] = c8[j];
        return lowbit_fp16_to_fp32(blk->d);
    }
    case LOWBIT_K_TQ2_0: {
        const lowbit_block_tq2_0 *blk = (const lowbit_block_tq2_0 *)row + b;
        lowbit_tq2_0_codes(blk->qs, c8);
        for (int j = 0; j < 256; j++) codes[j] = c8[j];
        return lowbit_fp16_to_fp32(blk->d);
    }
    case LOWBIT_K_I2_S: {
        lowbit_i2_s_codes(row + 32 * b, c8);
        for (int j = 0; j < 128; j++) codes[j] = c8[j];
        return 1.0f;
    }
    case LOWBIT_K_Q2_0: {
        const lowbit_block_q2_0 *blk = (const lowbit_block_q2_0 *)row + b;
        for (int j = 0; j < 64; j++) codes[j] = (blk->qs[j / 4] >> (2 * (j % 4))) & 3;
        dh = blk->d;
        break;
    }
    case LOWBIT_K_PQ2_0: {
        const lowbit_block_pq2_0 *blk = (const lowbit_block_pq2_0 *)row + b;
        for (int j = 0; j < 128; j++) codes[j] = (blk->qs[j / 4] >> (2 * (j % 4))) & 3;
        dh = blk->d;
        break;
    }
    case LOWBIT_K_Q1_0: {
        const lowbit_block_q1_0 *blk = (const lowbit_block_q1_0 *)row + b;
        for (int j = 0; j < 128; j++) codes[j] = 2 * ((blk->qs[j / 8] >> (j % 8)) & 1);
        dh = blk->d;
        break;
    }
    case LOWBIT_K_Q8_0: {
        const lowbit_block_q8_0 *blk = (const lowbit_block_q8_0 *)row + b;
        for (int j = 0; j < 32; j++) codes[j] = blk->qs[j];
        dh = blk->d;
        break;
    }
    }
    return lowbit_fp16_to_fp32(dh);
}

/* f: the format's facts (types.c), its block size and code offset */
static float dot_ref(int k, const lowbit_type_facts *f, const uint8_t *row, const lowbit_act *a) {
    const int64_t bs = f->block_size;
    const int64_t G = a->group;
    int codes[256];
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / bs; b++) {
        float dw = block_codes(k, row, b, codes), sb = 0.0f;
        for (int64_t g0 = 0; g0 < bs; g0 += G) {
            int64_t g = (b * bs + g0) / G;
            int32_t isum = 0;
            for (int64_t j = 0; j < G; j++) isum += codes[g0 + j] * a->q[b * bs + g0 + j];
            isum -= f->code_offset * a->s[g];
            if (k != LOWBIT_K_Q1_0)
                acc += (float)isum * (dw * a->d[g]);
            else
                sb = g0 ? lowbit_fmaf((float)isum, a->d[g], sb) : (float)isum * a->d[g];
        }
        if (k == LOWBIT_K_Q1_0) acc = lowbit_fmaf(dw, sb, acc);
    }
    return acc;
}

#define DEFINE_GEMV_REF(K, T, name)                                                                  \
    void gemv_##name##_ref(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,        \
                                  const lowbit_act *a, float *y) {                                 \
        lowbit_type_facts f;                                                                       \
        lowbit_type_facts_get(T, &f);                                                              \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r - r0] = dot_ref(K, &f, (const uint8_t *)w + r * row_bytes, a);                     \
    }
LOWBIT_FOR_EACH_QUANT_TYPE(DEFINE_GEMV_REF)

/* GEMM as repeated GEMV: the fallback for variants without a tiled kernel. */
void lowbit_gemm_generic(lowbit_gemv_fn gemv, const void *w, int64_t row_bytes, int64_t r0,
                         int64_t r1, const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    for (int64_t b = 0; b < batch; b++) gemv(w, row_bytes, r0, r1, &a[b], y + b * ldy + r0);
}

#define DEFINE_GEMM_REF(K, T, name)                                                                   \
    void gemm_##name##_ref(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,        \
                                  const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {     \
        lowbit_gemm_generic(gemv_##name##_ref, w, row_bytes, r0, r1, a, batch, y, ldy);            \
    }
LOWBIT_FOR_EACH_QUANT_TYPE(DEFINE_GEMM_REF)

/* Float weights (F32, F16, BF16: the tied-embedding LM head) take float activations.  The spec every
 * variant keeps, bit for bit: 16 lane sums, lane l taking w[j] * x[j] for the j = l mod 16 of the
 * first cols - cols % 16 values in order, fused (fmaf: one rounding, as SIMD FMA), folded as
 * lane l + lane l + 8, then l + 4, l + 2, l + 1 (the order of a SIMD reduction of 16 lanes held in
 * 4, 8 or 16 wide registers), then the last cols % 16 products fused in in order. */
#define DEFINE_FLOAT_DOT(name, T, TOF)                                                             \
    static float name(const T *row, const float *x, int64_t cols) {                                \
        const int64_t c16 = cols & ~(int64_t)15;                                                   \
        float a[16] = {0};                                                                         \
        for (int64_t j = 0; j < c16; j += 16)                                                      \
            for (int l = 0; l < 16; l++) a[l] = lowbit_fmaf(TOF(row[j + l]), x[j + l], a[l]);             \
        for (int h = 8; h >= 1; h /= 2)                                                            \
            for (int l = 0; l < h; l++) a[l] += a[l + h];                                          \
        float s = a[0];                                                                            \
        for (int64_t j = c16; j < cols; j++) s = lowbit_fmaf(TOF(row[j]), x[j], s);                       \
        return s;                                                                                  \
    }
#define F32_VALUE(v) (v)
DEFINE_FLOAT_DOT(dot_f32, float, F32_VALUE)
DEFINE_FLOAT_DOT(dot_f16, uint16_t, lowbit_fp16_to_fp32)
DEFINE_FLOAT_DOT(dot_bf16, uint16_t, lowbit_bf16_to_fp32)

void gemv_f32_ref(const float *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                         float *y) {
    for (int64_t r = r0; r < r1; r++) y[r - r0] = dot_f32(w + r * cols, x, cols);
}

void gemv_f16_ref(const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                         float *y) {
    for (int64_t r = r0; r < r1; r++) y[r - r0] = dot_f16(w + r * cols, x, cols);
}

void gemv_bf16_ref(const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                          float *y) {
    for (int64_t r = r0; r < r1; r++) y[r - r0] = dot_bf16(w + r * cols, x, cols);
}

/* The bandwidth probe's loop: one cache line per step, 8 independent sums (vectorized by -O3),
 * no software prefetch (the hardware prefetcher alone read fastest here).  Returns the sum of the
 * 64-bit words mod 2^64, as every variant does. */
uint64_t read_bytes_ref(const uint8_t *p, int64_t n) {
    uint64_t a[8] = {0};
    for (int64_t i = 0; i < n; i += 64)
        for (int j = 0; j < 8; j++) {
            uint64_t v;
            memcpy(&v, p + i + 8 * j, 8);
            a[j] += v;
        }
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

