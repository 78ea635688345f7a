/* Block layouts of every weight and activation format liblowbit speaks.
 *
 * One struct per format, C order exactly as stored in GGUF files (docs/FORMATS.md in the
 * repository).  Scales `d` are IEEE fp16 stored as uint16_t unless the comment says fp32.  Every struct
 * size is asserted at compile time: a layout change that alters the byte size cannot slip in.
 */
#ifndef LOWBIT_FORMATS_H
#define LOWBIT_FORMATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GGUF tensor type ids.  6/12/14/30/34/35/41 are upstream ggml; 36 is bitnet.cpp's I2_S; 42 is
 * upstream Q2_0 (group 64); 142/143 are PrismML's PQ2_0 / PTQ1_0. */
typedef enum lowbit_type {
    LOWBIT_TYPE_F32 = 0,
    LOWBIT_TYPE_F16 = 1,
    LOWBIT_TYPE_Q5_0 = 6,
    LOWBIT_TYPE_Q8_0 = 8,
    LOWBIT_TYPE_Q4_K = 12,
    LOWBIT_TYPE_Q6_K = 14,
    LOWBIT_TYPE_Q8_K = 15,
    LOWBIT_TYPE_BF16 = 30,
    LOWBIT_TYPE_TQ1_0 = 34,
    LOWBIT_TYPE_TQ2_0 = 35,
    LOWBIT_TYPE_I2_S = 36,
    LOWBIT_TYPE_Q1_0 = 41,
    LOWBIT_TYPE_Q2_0 = 42,
    LOWBIT_TYPE_PQ2_0 = 142,
    LOWBIT_TYPE_PTQ1_0 = 143,
} lowbit_type;

/* The rounding rules of A8 activations (below; native/src/act_rules.h has the arithmetic). */
typedef enum lowbit_act_rule {
    LOWBIT_RULE_A8 = 0,
    LOWBIT_RULE_Q8_0 = 1,
    LOWBIT_RULE_Q8_K = 2,
    LOWBIT_RULE_P2 = 3,
    LOWBIT_RULE_S8 = 4,
} lowbit_act_rule;

/* The weight formats with file-layout A8 kernels, in kernel-slot order, as F(X, ID, name) for
 * LOWBIT_TYPE_##ID: the one list a new format joins.  The library's kernel slots (LOWBIT_K_##ID),
 * the definitions of its scalar and x86 file-layout kernels and every variant's kernel-list
 * entries for them are generated from it (native/src/kernel_table.h); X is handed through to F.  LOWBIT_GGML_KERNEL_FORMATS: ggml's
 * formats, read by their own kernels (native/src/ref/kquant.c), after them. */
#define LOWBIT_A8_KERNEL_FORMATS(F, X)                                                             \
    F(X, TQ1_0, tq1_0)                                                                             \
    F(X, TQ2_0, tq2_0)                                                                             \
    F(X, I2_S, i2_s)                                                                               \
    F(X, Q1_0, q1_0)                                                                               \
    F(X, Q2_0, q2_0)                                                                               \
    F(X, PQ2_0, pq2_0)                                                                             \
    F(X, PTQ1_0, ptq1_0)                                                                           \
    F(X, Q8_0, q8_0)
#define LOWBIT_GGML_KERNEL_FORMATS(F, X)                                                           \
    F(X, Q5_0, q5_0)                                                                               \
    F(X, Q4_K, q4_k)                                                                               \
    F(X, Q6_K, q6_k)

#define LOWBIT_QK_TQ1_0 256
#define LOWBIT_QK_TQ2_0 256
#define LOWBIT_QK_I2_S 128
#define LOWBIT_QK_Q1_0 128
#define LOWBIT_QK_Q2_0 64
#define LOWBIT_QK_PQ2_0 128
#define LOWBIT_QK_PTQ1_0 128
#define LOWBIT_QK_Q8_0 32
#define LOWBIT_QK_Q5_0 32
#define LOWBIT_QK_Q4_K 256
#define LOWBIT_QK_Q6_K 256
#define LOWBIT_QK_Q8_K 256

/* TQ1_0: base-3, 5 trits per qs byte, 4 per qh byte; value (t - 1) * d. */
typedef struct {
    uint8_t qs[48];
    uint8_t qh[4];
    uint16_t d;
} lowbit_block_tq1_0;

/* TQ2_0: code q in {0,1,2} -> (q - 1) * d; element (j/32)*128 + n*32 + m in qs[j + m] bits 2n. */
typedef struct {
    uint8_t qs[64];
    uint16_t d;
} lowbit_block_tq2_0;

/* I2_S (bitnet.cpp x86 layout): 128 weights in 32 bytes; byte p holds weights p, p+32, p+64, p+96
 * at shifts 6, 4, 2, 0.  No per-block scale: one fp32 scale follows the codes of the whole tensor,
 * and the tensor occupies n/4 + 32 bytes on disk. */
typedef struct {
    uint8_t qs[32];
} lowbit_block_i2_s;

/* Q1_0: bit set -> +d, clear -> -d. */
typedef struct {
    uint16_t d;
    uint8_t qs[16];
} lowbit_block_q1_0;

/* Q2_0 (group 64): weight j is (qs[j/4] >> 2*(j%4)) & 3, value (q - 1) * d. */
typedef struct {
    uint16_t d;
    uint8_t qs[16];
} lowbit_block_q2_0;

/* PQ2_0: PrismML's group-128 sibling of Q2_0, same code mapping. */
typedef struct {
    uint16_t d;
    uint8_t qs[32];
} lowbit_block_pq2_0;

/* PTQ1_0: the TQ1_0 base-3 codec on 128-weight blocks, scale last. */
typedef struct {
    uint8_t qs[24];
    uint8_t qh[2];
    uint16_t d;
} lowbit_block_ptq1_0;

/* Q8_0: value qs[i] * d. */
typedef struct {
    uint16_t d;
    int8_t qs[32];
} lowbit_block_q8_0;

/* Q5_0 (ggml): value (c - 16) * d with the 5-bit code c of weight j < 16 = low nibble of qs[j]
 * | bit j of qh << 4, of weight j + 16 = high nibble of qs[j] | bit j + 16 of qh << 4 (qh is a
 * little-endian uint32). */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
} lowbit_block_q5_0;

/* Q4_K (ggml): 8 sub-blocks of 32, value d * sc[j] * q - dmin * m[j] for the 4-bit q of sub-block
 * j.  sc / m are 6 bits: for j < 4, sc = scales[j] & 63, m = scales[j + 4] & 63; for j >= 4,
 * sc = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4, m = (scales[j + 4] >> 4) |
 * (scales[j] >> 6) << 4.  Weights 64c + l (l < 32) are the low nibbles of qs[32c + l], weights
 * 64c + 32 + l the high ones (sub-blocks 2c and 2c + 1). */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[128];
} lowbit_block_q4_k;

/* Q6_K (ggml): 16 sub-blocks of 16, value d * scales[e / 16] * (q - 32) for weight e.  In half
 * h (weights 128h ..), with L = ql + 64h, H = qh + 32h and l < 32, the 6-bit q of weight
 * 128h + 32k + l is: k = 0: L[l] & 15, k = 1: L[l + 32] & 15, k = 2: L[l] >> 4,
 * k = 3: L[l + 32] >> 4, each | ((H[l] >> 2k) & 3) << 4. */
typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} lowbit_block_q6_k;

/* Q8_K: fp32 scale; bsums[k] = sum of qs[16k .. 16k+15]. */
typedef struct {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
} lowbit_block_q8_k;

#if defined(__cplusplus)
#define LOWBIT_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define LOWBIT_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_tq1_0) == 54, "TQ1_0 block is 54 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_tq2_0) == 66, "TQ2_0 block is 66 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_i2_s) == 32, "I2_S group is 32 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q1_0) == 18, "Q1_0 block is 18 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q2_0) == 18, "Q2_0 block is 18 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_pq2_0) == 34, "PQ2_0 block is 34 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_ptq1_0) == 28, "PTQ1_0 block is 28 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q8_0) == 34, "Q8_0 block is 34 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q5_0) == 22, "Q5_0 block is 22 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q4_k) == 144, "Q4_K block is 144 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q6_k) == 210, "Q6_K block is 210 bytes");
LOWBIT_STATIC_ASSERT(sizeof(lowbit_block_q8_k) == 292, "Q8_K block is 292 bytes");

/* Activations (pylowbit's own layout, "A8"): a float vector of n elements is cut into groups of G
 * (G = lowbit_act_group(weight type)).  Group g has one fp32 scale d[g], codes q[i] in [-127, 127]
 * with x[i] ~ q[i] * d[g], and the code sum s[g] = sum of q over the group, which kernels use to
 * undo the +1 offset of ternary/2-bit codes (sum (c - 1) * a = sum c * a - s) once per group
 * instead of once per weight.  Codes, scales and sums are three separate arrays so SIMD loads stay
 * aligned and dense.  G and the rounding are llama.cpp's activation type for the weight type, so
 * both runtimes compute the same integer sums (PQ2_0 / PTQ1_0: Q8_K's rule at their own block
 * size, pylowbit's choice, see below):
 *   Q8_K, G = 256 (TQ1_0, TQ2_0, Q4_K, Q6_K) and G = 128 (PQ2_0, PTQ1_0): iscale = -127 /
 *           (element of largest |x|, the first one), q = rint(iscale * x), d = 1 / iscale; an
 *           all-zero group has d = 0.
 *   Q8_0, G = 32 (Q1_0, Q2_0, Q5_0, Q8_0), ggml's x86 rounding:
 *           q = rint(x * 127 / amax), d = amax / 127 rounded to fp16 (stored here as the fp32
 *           value of that fp16).
 *   S8, G = 128 (I2_S, the default): bitnet.cpp's quantize_row_i8_s, one scale for the whole
 *           vector: id = (float)(127.0 / max(max|x|, 1e-5)) (quotient in double), q =
 *           roundf(x * id), d = 1 / id in every group.  An I2_S row's result is then
 *           (float)(sum of its int sums) * fl(d * tensor scale), one float step (internal.h).
 *   P2, G = 128 (I2_S on request, lowbit_set_i2s_act_scale): one scale for the whole vector, the
 *           smallest power of two d >= 2^-126 with 127 * d >= max|x| of the vector (0 if that
 *           is 0), in every group; q = roundf(x / d).  Exact per-group float steps: kernels may
 *           add a row's int sums first (internal.h, lowbit_act_p2_row_ok).
 *   A8 (pylowbit's own): q = roundf(x * 127 / amax), d = amax / 127.
 * lowbit_quantize_act_for(type) applies the type's rule; lowbit_quantize_act(group) picks it from
 * G alone: 256 Q8_K, 32 Q8_0, 128 P2, any other A8.
 * rint rounds half to even, roundf half away from zero; amax = max|x| over the group. */
typedef struct {
    const int8_t *q;  /* n codes */
    const float *d;   /* n / group scales */
    const int32_t *s; /* n / group code sums */
    int64_t n;
    int64_t group;
} lowbit_act;

#ifdef __cplusplus
}
#endif
#endif /* LOWBIT_FORMATS_H */
