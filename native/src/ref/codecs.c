/* Scalar reference codecs: float32 <-> blocks for every weight format.  This file is the
 * specification the rest of the library (and tests) agree with; it favours plain loops. */
#include <stdlib.h>

#include "../internal.h"

/* ---- shared helpers ------------------------------------------------------------------------- */

static float absmax(const float *x, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m) m = a;
    }
    return m;
}

/* Ternary/2-bit code of the owners' quantizers: round-half-away(x * (1/d)) + 1, clamped.
 * (Multiplying by the reciprocal, as ggml and gguf-py do, keeps ties bit-identical to them.) */
static inline int ternary_code(float x, float id, int maxcode) {
    int q = (int)roundf(x * id) + 1;
    return q < 0 ? 0 : (q > maxcode ? maxcode : q);
}

/* Base-3 trit n of a packed byte: the byte holds the fraction q/243 scaled to 256 (rounded up),
 * so multiplying by 3^n shifts trit n to the top and *3 >> 8 reads it out. */
static inline int trit(uint8_t b, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    return ((uint16_t)(uint8_t)(b * pow3[n]) * 3) >> 8;
}

/* Pack trits (most significant first) into the fixed-point byte: ceil(q * 256 / 243). */
static inline uint8_t pack_trits(const int *t, int count) {
    int q = 0;
    for (int i = 0; i < count; i++) q = q * 3 + t[i];
    for (int i = count; i < 5; i++) q *= 3; /* 4-trit qh bytes are scaled as if 5 */
    return (uint8_t)((q * 256 + 242) / 243);
}

static int has_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 1;
    return 0;
}

/* ---- TQ1_0 / PTQ1_0: the same base-3 codec on 256- and 128-weight blocks --------------------
 * A block of QK weights is split in three runs: `w0` weights in `n0 = w0/5` bytes of qs (trit n of
 * byte m is weight n*n0 + m), `w1` in `n1 = w1/5` further qs bytes (weight w0 + n*n1 + m), and the
 * last `QK - w0 - w1` in qh bytes with 4 trits each (weight w0 + w1 + n*nh + m). */
typedef struct {
    int qk, n0, n1, nh;
} base3_layout;

static const base3_layout TQ1_LAYOUT = {256, 32, 16, 4};  /* 160 + 80 + 16 */
static const base3_layout PTQ1_LAYOUT = {128, 16, 8, 2};  /* 80 + 40 + 8 */

/* The qs and qh bytes of one base-3 block of codes (0..2, weight order): the inverse of
 * lowbit_base3_codes, also for lowbit_matrix_unpack. */
void lowbit_base3_encode(int qk, const uint8_t *codes, uint8_t *qs, uint8_t *qh) {
    const base3_layout *L = qk == 256 ? &TQ1_LAYOUT : &PTQ1_LAYOUT;
    int t[5];
    for (int m = 0; m < L->n0; m++) {
        for (int n = 0; n < 5; n++) t[n] = codes[n * L->n0 + m];
        qs[m] = pack_trits(t, 5);
    }
    int base = 5 * L->n0;
    for (int m = 0; m < L->n1; m++) {
        for (int n = 0; n < 5; n++) t[n] = codes[base + n * L->n1 + m];
        qs[L->n0 + m] = pack_trits(t, 5);
    }
    base += 5 * L->n1;
    for (int m = 0; m < L->nh; m++) {
        for (int n = 0; n < 4; n++) t[n] = codes[base + n * L->nh + m];
        qh[m] = pack_trits(t, 4);
    }
}

static void base3_quantize_block(const base3_layout *L, const float *x, uint8_t *qs, uint8_t *qh,
                                 uint16_t *dout) {
    float d = absmax(x, L->qk);
    float id = d ? 1.0f / d : 0.0f;
    uint8_t codes[256];
    for (int j = 0; j < L->qk; j++) codes[j] = (uint8_t)ternary_code(x[j], id, 2);
    lowbit_base3_encode(L->qk, codes, qs, qh);
    *dout = lowbit_fp32_to_fp16(d);
}

static void base3_dequantize_block(const base3_layout *L, const uint8_t *qs, const uint8_t *qh,
                                   uint16_t dh, float *y) {
    float d = lowbit_fp16_to_fp32(dh);
    for (int m = 0; m < L->n0; m++)
        for (int n = 0; n < 5; n++) y[n * L->n0 + m] = (float)(trit(qs[m], n) - 1) * d;
    int base = 5 * L->n0;
    for (int m = 0; m < L->n1; m++)
        for (int n = 0; n < 5; n++) y[base + n * L->n1 + m] = (float)(trit(qs[L->n0 + m], n) - 1) * d;
    base += 5 * L->n1;
    for (int m = 0; m < L->nh; m++)
        for (int n = 0; n < 4; n++) y[base + n * L->nh + m] = (float)(trit(qh[m], n) - 1) * d;
}

/* Unpacked codes (0..2) of one base-3 block, in weight order: what the dot kernels consume. */
void lowbit_base3_codes(int qk, const uint8_t *qs, const uint8_t *qh, uint8_t *codes) {
    const base3_layout *L = qk == 256 ? &TQ1_LAYOUT : &PTQ1_LAYOUT;
    for (int m = 0; m < L->n0; m++)
        for (int n = 0; n < 5; n++) codes[n * L->n0 + m] = (uint8_t)trit(qs[m], n);
    int base = 5 * L->n0;
    for (int m = 0; m < L->n1; m++)
        for (int n = 0; n < 5; n++) codes[base + n * L->n1 + m] = (uint8_t)trit(qs[L->n0 + m], n);
    base += 5 * L->n1;
    for (int m = 0; m < L->nh; m++)
        for (int n = 0; n < 4; n++) codes[base + n * L->nh + m] = (uint8_t)trit(qh[m], n);
}

/* ---- TQ2_0: element (j/32)*128 + n*32 + m lives in qs[j + m] at bits 2n ------------------------ */

void lowbit_tq2_0_codes(const uint8_t *qs, uint8_t *codes) {
    for (int j = 0; j < 64; j += 32)
        for (int n = 0; n < 4; n++)
            for (int m = 0; m < 32; m++) codes[(j / 32) * 128 + n * 32 + m] = (qs[j + m] >> (2 * n)) & 3;
}

/* The inverse: the 64 qs bytes of 256 codes (0..3) */
void lowbit_tq2_0_encode(const uint8_t *codes, uint8_t *qs) {
    memset(qs, 0, 64);
    for (int j = 0; j < 64; j += 32)
        for (int n = 0; n < 4; n++)
            for (int m = 0; m < 32; m++) qs[j + m] |= (uint8_t)((codes[(j / 32) * 128 + n * 32 + m] & 3) << (2 * n));
}

static void tq2_0_quantize_block(const float *x, lowbit_block_tq2_0 *b) {
    float d = absmax(x, 256);
    float id = d ? 1.0f / d : 0.0f;
    uint8_t codes[256];
    for (int j = 0; j < 256; j++) codes[j] = (uint8_t)ternary_code(x[j], id, 2);
    lowbit_tq2_0_encode(codes, b->qs);
    b->d = lowbit_fp32_to_fp16(d);
}

/* ---- Q2_0 / PQ2_0: weight j is (qs[j/4] >> 2*(j%4)) & 3 --------------------------------------- */

static void q2_quantize_block(int qk, const float *x, uint16_t *dout, uint8_t *qs) {
    float d = absmax(x, qk);
    float id = d ? 1.0f / d : 0.0f;
    memset(qs, 0, (size_t)qk / 4);
    /* The owners' quantizer never emits code 3 (+2): max|w|/d = 1 rounds to code 2. */
    for (int j = 0; j < qk; j++) qs[j / 4] |= (uint8_t)(ternary_code(x[j], id, 3) << (2 * (j % 4)));
    *dout = lowbit_fp32_to_fp16(d);
}

/* ---- I2_S: groups of 128 weights in 32 bytes; byte p holds p, p+32, p+64, p+96 at shifts 6,4,2,0.
 * Code 3 never comes out of the quantizer; where a file has it, it reads as +2 everywhere in this
 * library (dequantizer and dot kernels alike), like Q2_0. */
void lowbit_i2_s_codes(const uint8_t *qs, uint8_t *codes) {
    for (int p = 0; p < 32; p++)
        for (int k = 0; k < 4; k++) codes[p + 32 * k] = (qs[p] >> (6 - 2 * k)) & 3;
}

/* The inverse: the 32 bytes of 128 codes (0..3) */
void lowbit_i2_s_encode(const uint8_t *codes, uint8_t *qs) {
    for (int p = 0; p < 32; p++)
        qs[p] = (uint8_t)((codes[p] & 3) << 6 | (codes[p + 32] & 3) << 4 | (codes[p + 64] & 3) << 2 |
                          (codes[p + 96] & 3));
}

/* ---- public entry points --------------------------------------------------------------------- */

int lowbit_quantize(int type, const float *x, int64_t n, void *out) {
    if (!x || !out || n < 0) return LOWBIT_EINVAL;
    if (!lowbit_type_known(type)) return LOWBIT_ETYPE;
    if (type != LOWBIT_TYPE_Q8_K && n % lowbit_type_block_size(type)) return LOWBIT_ESIZE;
    if (type == LOWBIT_TYPE_Q8_K) return LOWBIT_ETYPE; /* activation-only type */
    /* ggml's formats are read from llama.cpp's files, not written (no quantizer here) */
    if (type == LOWBIT_TYPE_Q5_0 || type == LOWBIT_TYPE_Q4_K || type == LOWBIT_TYPE_Q6_K)
        return LOWBIT_ETYPE;
    /* Float formats store NaN/inf as they are; quantized ones cannot represent them. */
    if (type != LOWBIT_TYPE_F32 && type != LOWBIT_TYPE_F16 && type != LOWBIT_TYPE_BF16 && has_nonfinite(x, n))
        return LOWBIT_EINVAL;
    uint8_t *o = (uint8_t *)out;
    int64_t nb = n / lowbit_type_block_size(type);
    switch (type) {
    case LOWBIT_TYPE_F32:
        memcpy(out, x, (size_t)n * 4);
        return LOWBIT_OK;
    case LOWBIT_TYPE_F16:
    case LOWBIT_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = type == LOWBIT_TYPE_F16 ? lowbit_fp32_to_fp16(x[i]) : lowbit_fp32_to_bf16(x[i]);
            memcpy(o + 2 * i, &h, 2);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_Q8_0:
        for (int64_t i = 0; i < nb; i++) {
            lowbit_block_q8_0 *b = (lowbit_block_q8_0 *)o + i;
            const float *xb = x + 32 * i;
            float d = absmax(xb, 32) / 127.0f;
            float id = d ? 1.0f / d : 0.0f;
            for (int j = 0; j < 32; j++) b->qs[j] = (int8_t)roundf(xb[j] * id);
            b->d = lowbit_fp32_to_fp16(d);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_TQ1_0:
        for (int64_t i = 0; i < nb; i++) {
            lowbit_block_tq1_0 *b = (lowbit_block_tq1_0 *)o + i;
            base3_quantize_block(&TQ1_LAYOUT, x + 256 * i, b->qs, b->qh, &b->d);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_PTQ1_0:
        for (int64_t i = 0; i < nb; i++) {
            lowbit_block_ptq1_0 *b = (lowbit_block_ptq1_0 *)o + i;
            base3_quantize_block(&PTQ1_LAYOUT, x + 128 * i, b->qs, b->qh, &b->d);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_TQ2_0:
        for (int64_t i = 0; i < nb; i++) tq2_0_quantize_block(x + 256 * i, (lowbit_block_tq2_0 *)o + i);
        return LOWBIT_OK;
    case LOWBIT_TYPE_Q2_0:
        for (int64_t i = 0; i < nb; i++) {
            lowbit_block_q2_0 *b = (lowbit_block_q2_0 *)o + i;
            q2_quantize_block(64, x + 64 * i, &b->d, b->qs);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_PQ2_0:
        for (int64_t i = 0; i < nb; i++) {
            lowbit_block_pq2_0 *b = (lowbit_block_pq2_0 *)o + i;
            q2_quantize_block(128, x + 128 * i, &b->d, b->qs);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_Q1_0:
        /* Upstream rule: d = mean |w| over the block, bit = (w >= 0). */
        for (int64_t i = 0; i < nb; i++) {
            lowbit_block_q1_0 *b = (lowbit_block_q1_0 *)o + i;
            const float *xb = x + 128 * i;
            float sum = 0.0f;
            for (int j = 0; j < 128; j++) sum += fabsf(xb[j]);
            memset(b->qs, 0, sizeof b->qs);
            for (int j = 0; j < 128; j++)
                if (xb[j] >= 0.0f) b->qs[j / 8] |= (uint8_t)(1u << (j % 8));
            b->d = lowbit_fp32_to_fp16(sum / 128.0f);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_I2_S: {
        /* One fp32 scale for the whole tensor (bitnet.cpp's writer), stored after the codes and
         * padded to 32 bytes. */
        float d = absmax(x, n);
        float id = d ? 1.0f / d : 0.0f;
        memset(o, 0, (size_t)(n / 4 + 32));
        uint8_t codes[128];
        for (int64_t g = 0; g < nb; g++) {
            for (int j = 0; j < 128; j++) codes[j] = (uint8_t)ternary_code(x[128 * g + j], id, 2);
            lowbit_i2_s_encode(codes, o + 32 * g);
        }
        memcpy(o + n / 4, &d, 4);
        return LOWBIT_OK;
    }
    }
    return LOWBIT_ETYPE;
}

int lowbit_dequantize(int type, const void *w, int64_t n, float *y) {
    if (!w || !y || n < 0) return LOWBIT_EINVAL;
    if (!lowbit_type_known(type) || type == LOWBIT_TYPE_Q8_K) return LOWBIT_ETYPE;
    if (n % lowbit_type_block_size(type)) return LOWBIT_ESIZE;
    const uint8_t *in = (const uint8_t *)w;
    int64_t nb = n / lowbit_type_block_size(type);
    uint8_t codes[256];
    switch (type) {
    case LOWBIT_TYPE_F32:
        memcpy(y, w, (size_t)n * 4);
        return LOWBIT_OK;
    case LOWBIT_TYPE_F16:
    case LOWBIT_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, in + 2 * i, 2);
            y[i] = type == LOWBIT_TYPE_F16 ? lowbit_fp16_to_fp32(h) : lowbit_bf16_to_fp32(h);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_Q8_0:
        for (int64_t i = 0; i < nb; i++) {
            const lowbit_block_q8_0 *b = (const lowbit_block_q8_0 *)in + i;
            float d = lowbit_fp16_to_fp32(b->d);
            for (int j = 0; j < 32; j++) y[32 * i + j] = (float)b->qs[j] * d;
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_TQ1_0:
        for (int64_t i = 0; i < nb; i++) {
            const lowbit_block_tq1_0 *b = (const lowbit_block_tq1_0 *)in + i;
            base3_dequantize_block(&TQ1_LAYOUT, b->qs, b->qh, b->d, y + 256 * i);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_PTQ1_0:
        for (int64_t i = 0; i < nb; i++) {
            const lowbit_block_ptq1_0 *b = (const lowbit_block_ptq1_0 *)in + i;
            base3_dequantize_block(&PTQ1_LAYOUT, b->qs, b->qh, b->d, y + 128 * i);
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_TQ2_0:
        for (int64_t i = 0; i < nb; i++) {
            const lowbit_block_tq2_0 *b = (const lowbit_block_tq2_0 *)in + i;
            float d = lowbit_fp16_to_fp32(b->d);
            lowbit_tq2_0_codes(b->qs, codes);
            for (int j = 0; j < 256; j++) y[256 * i + j] = (float)((int)codes[j] - 1) * d;
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_Q2_0:
    case LOWBIT_TYPE_PQ2_0: {
        int qk = type == LOWBIT_TYPE_Q2_0 ? 64 : 128;
        int64_t bytes = 2 + qk / 4;
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *b = in + bytes * i;
            uint16_t dh;
            memcpy(&dh, b, 2);
            float d = lowbit_fp16_to_fp32(dh);
            for (int j = 0; j < qk; j++) y[qk * i + j] = (float)((int)((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
        }
        return LOWBIT_OK;
    }
    case LOWBIT_TYPE_Q1_0:
        for (int64_t i = 0; i < nb; i++) {
            const lowbit_block_q1_0 *b = (const lowbit_block_q1_0 *)in + i;
            float d = lowbit_fp16_to_fp32(b->d);
            for (int j = 0; j < 128; j++) y[128 * i + j] = (b->qs[j / 8] >> (j % 8)) & 1 ? d : -d;
        }
        return LOWBIT_OK;
    case LOWBIT_TYPE_Q5_0:
    case LOWBIT_TYPE_Q4_K:
    case LOWBIT_TYPE_Q6_K: return lowbit_dequantize_kquant(type, in, nb, y);
    case LOWBIT_TYPE_I2_S: {
        float d;
        memcpy(&d, in + n / 4, 4);
        for (int64_t g = 0; g < nb; g++) {
            lowbit_i2_s_codes(in + 32 * g, codes);
            for (int j = 0; j < 128; j++) y[128 * g + j] = (float)((int)codes[j] - 1) * d;
        }
        return LOWBIT_OK;
    }
    }
    return LOWBIT_ETYPE;
}
