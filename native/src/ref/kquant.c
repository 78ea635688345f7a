/* Scalar reference for ggml's Q5_0, Q4_K and Q6_K (layouts in formats.h): code unpacking,
 * dequantization and the dot product with A8 activations.  The spec the SIMD variants equal bit
 * for bit.  These formats read files written by llama.cpp; pylowbit does not quantize to them.
 *
 * Activations are llama.cpp's for each type (lowbit_act_group): Q8_0 (group 32) for Q5_0, Q8_K
 * (group 256, one group per weight block) for Q4_K and Q6_K.  Per weight block b, with exact
 * int32 sums over the block and a_j the activation codes:
 *
 *   Q5_0: isum = sum c_j a_j - 16 s[b]                    acc += (float)isum * (d * da)
 *   Q4_K: isum = sum_k sc_k (sum_{j in k} q_j a_j)        acc += (float)isum * (d * da)
 *         msum = sum_k m_k (sum_{j in k} a_j)             acc -= (float)msum * (dmin * da)
 *   Q6_K: isum = sum_k sc_k (sum_{j in k} (q_j - 32) a_j) acc += (float)isum * (d * da)
 *
 * (k: sub-blocks, 32 weights for Q4_K, 16 for Q6_K), blocks in order, each product rounded
 * before its add.  The sums of a_j over a sub-block are taken from the codes, not from the group
 * sum s[], which covers the whole block.  Bounds: |isum| < 2^31 in every case (Q6_K: 256 * 32 *
 * 127 * 128 < 2^28). */
#include "../internal.h"

void lowbit_q5_0_codes(const lowbit_block_q5_0 *b, uint8_t codes[32]) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; j++) {
        codes[j] = (uint8_t)((b->qs[j] & 15) | ((qh >> j) & 1) << 4);
        codes[j + 16] = (uint8_t)((b->qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    }
}

void lowbit_q4_k_scale_min(const uint8_t scales[12], int k, int *sc, int *m) {
    if (k < 4) {
        *sc = scales[k] & 63;
        *m = scales[k + 4] & 63;
    } else {
        *sc = (scales[k + 4] & 15) | (scales[k - 4] >> 6) << 4;
        *m = (scales[k + 4] >> 4) | (scales[k] >> 6) << 4;
    }
}

void lowbit_q4_k_codes(const lowbit_block_q4_k *b, uint8_t codes[256]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            codes[64 * c + l] = b->qs[32 * c + l] & 15;
            codes[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
        }
}

void lowbit_q6_k_codes(const lowbit_block_q6_k *b, uint8_t codes[256]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *L = b->ql + 64 * h, *H = b->qh + 32 * h;
        uint8_t *o = codes + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (uint8_t)((L[l] & 15) | ((H[l] >> 0) & 3) << 4);
            o[l + 32] = (uint8_t)((L[l + 32] & 15) | ((H[l] >> 2) & 3) << 4);
            o[l + 64] = (uint8_t)((L[l] >> 4) | ((H[l] >> 4) & 3) << 4);
            o[l + 96] = (uint8_t)((L[l + 32] >> 4) | ((H[l] >> 6) & 3) << 4);
        }
    }
}

/* nb blocks of `type` -> floats (the values gguf-py's dequantize gives: products in float32). */
int lowbit_dequantize_kquant(int type, const uint8_t *in, int64_t nb, float *y) {
    uint8_t c[256];
    for (int64_t i = 0; i < nb; i++) {
        switch (type) {
        case LOWBIT_TYPE_Q5_0: {
            const lowbit_block_q5_0 *b = (const lowbit_block_q5_0 *)in + i;
            float d = lowbit_fp16_to_fp32(b->d);
            lowbit_q5_0_codes(b, c);
            for (int j = 0; j < 32; j++) y[32 * i + j] = (float)((int)c[j] - 16) * d;
            break;
        }
        case LOWBIT_TYPE_Q4_K: {
            const lowbit_block_q4_k *b = (const lowbit_block_q4_k *)in + i;
            float d = lowbit_fp16_to_fp32(b->d), dmin = lowbit_fp16_to_fp32(b->dmin);
            lowbit_q4_k_codes(b, c);
            for (int k = 0; k < 8; k++) {
                int sc, m;
                lowbit_q4_k_scale_min(b->scales, k, &sc, &m);
                float ds = d * (float)sc, dm = dmin * (float)m;
                for (int j = 32 * k; j < 32 * k + 32; j++) y[256 * i + j] = ds * (float)c[j] - dm;
            }
            break;
        }
        case LOWBIT_TYPE_Q6_K: {
            const lowbit_block_q6_k *b = (const lowbit_block_q6_k *)in + i;
            float d = lowbit_fp16_to_fp32(b->d);
            lowbit_q6_k_codes(b, c);
            for (int j = 0; j < 256; j++)
                y[256 * i + j] = d * (float)b->scales[j / 16] * (float)((int)c[j] - 32);
            break;
        }
        default: return LOWBIT_ETYPE;
        }
    }
    return LOWBIT_OK;
}

/* ---- dot products ------------------------------------------------------------------------------ */

static float dot_q5_0(const uint8_t *row, const lowbit_act *a) {
    uint8_t c[32];
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 32; b++) {
        const lowbit_block_q5_0 *blk = (const lowbit_block_q5_0 *)row + b;
        lowbit_q5_0_codes(blk, c);
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += c[j] * a->q[32 * b + j];
        isum -= 16 * a->s[b];
        acc += (float)isum * (lowbit_fp16_to_fp32(blk->d) * a->d[b]);
    }
    return acc;
}

static float dot_q4_k(const uint8_t *row, const lowbit_act *a) {
    uint8_t c[256];
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q4_k *blk = (const lowbit_block_q4_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        lowbit_q4_k_codes(blk, c);
        int32_t isum = 0, msum = 0;
        for (int k = 0; k < 8; k++) {
            int sc, m;
            lowbit_q4_k_scale_min(blk->scales, k, &sc, &m);
            int32_t dot = 0, sum = 0;
            for (int j = 32 * k; j < 32 * k + 32; j++) dot += c[j] * q[j], sum += q[j];
            isum += sc * dot;
            msum += m * sum;
        }
        acc += (float)isum * (lowbit_fp16_to_fp32(blk->d) * a->d[b]);
        acc -= (float)msum * (lowbit_fp16_to_fp32(blk->dmin) * a->d[b]);
    }
    return acc;
}

static float dot_q6_k(const uint8_t *row, const lowbit_act *a) {
    uint8_t c[256];
    float acc = 0.0f;
    for (int64_t b = 0; b < a->n / 256; b++) {
        const lowbit_block_q6_k *blk = (const lowbit_block_q6_k *)row + b;
        const int8_t *q = a->q + 256 * b;
        lowbit_q6_k_codes(blk, c);
        int32_t isum = 0;
        for (int k = 0; k < 16; k++) {
            int32_t dot = 0;
            for (int j = 16 * k; j < 16 * k + 16; j++) dot += ((int)c[j] - 32) * q[j];
            isum += blk->scales[k] * dot;
        }
        acc += (float)isum * (lowbit_fp16_to_fp32(blk->d) * a->d[b]);
    }
    return acc;
}

/* GEMM walks rows outside, activations inside: a row's blocks stay in L1 across the batch. */
#define DEFINE_REF(name)                                                                           \
    void gemv_##name##_ref(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,        \
                                  const lowbit_act *a, float *y) {                                 \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r - r0] = dot_##name((const uint8_t *)w + r * row_bytes, a);                        \
    }                                                                                              \
    void gemm_##name##_ref(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,        \
                                  const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {     \
        for (int64_t r = r0; r < r1; r++)                                                          \
            for (int64_t b = 0; b < batch; b++)                                                    \
                y[b * ldy + r] = dot_##name((const uint8_t *)w + r * row_bytes, &a[b]);           \
    }
DEFINE_REF(q5_0)
DEFINE_REF(q4_k)
DEFINE_REF(q6_k)

