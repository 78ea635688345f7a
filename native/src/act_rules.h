/* The A8 activation rounding rules and their scale arithmetic, shared by every quantizer. */
#ifndef LOWBIT_ACT_RULES_H
#define LOWBIT_ACT_RULES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lowbit/lowbit.h"

/* ---- A8 activation rules (formats.h) ----------------------------------------------------------
 *
 * Each weight type has an activation group size (lowbit_act_group) and a rounding rule
 * (lowbit_act_rule_of_type, types.c); the library quantizes with that pair for that type.  The
 * rules give every weight type llama.cpp reads the integer codes of llama.cpp's own activation
 * type for it (its vec_dot_type) on x86, except PQ2_0 / PTQ1_0 (below):
 *   Q8_K (TQ1_0, TQ2_0 at group 256; PQ2_0, PTQ1_0 at group 128 = their weight block, pylowbit's
 *        choice: one float step per 128 weights instead of per 32, as PrismML's runtime moves
 *        PQ2_0 to Q8_K activations): max = the element of largest |x| (first one), iscale =
 *        -127 / max, q = round-half-even(iscale * x), d = 1 / iscale (fp32); an all-zero group
 *        gives d = 0.
 *   Q8_0 (Q1_0, Q2_0, Q8_0 at group 32) as ggml's x86 quantize_row_q8_0 does it:
 *        q = round-half-even(x * (127 / amax)), d = amax / 127 rounded to fp16 (ggml's reference
 *        and Arm versions use 1/d and round-half-away instead: they can differ on ties).
 *   P2 (I2_S at group 128), one scale for the whole vector (the n values of the call; bitnet.cpp
 *        uses one per row too): d = 2^k, the smallest power of two >= 2^-126 with 127 * d >= amax
 *        (0 if amax is 0), in every group; q = round-half-away(x * 2^-k).  A power of two makes
 *        every per-group float step of the dot spec exact (integer * 2^k, < 2^24 in magnitude for
 *        rows of <= 65536 weights), so a kernel may add the int32 sums of the whole row and do a
 *        single float step, bit-exact with the per-group reference (lowbit_act_p2_row_ok).
 *   S8 (I2_S by default: bitnet.cpp's quantize_row_i8_s), one scale for the whole vector:
 *        id = (float)(127.0 / max(amax, 1e-5)) with the quotient taken in double, as bitnet.cpp
 *        does, q = round-half-away(x * id), d = 1 / id (fp32) in every group.  d is no power of
 *        two, so the I2_S jobs of api.c (i2s_exponents) hand the kernels d's power of two and
 *        multiply its mantissa into the row's one float step, with the tensor scale: every kernel
 *        still takes its exact P2 path, and y = (float)sum_row(isum) * (d * tensor_scale).
 *   A8 (pylowbit's own, any other group): q = round-half-away(x * (127 / amax)), d = amax / 127.
 * Products are clamped to [-127, 127] before rounding (NaN -> -127), in every variant.
 * The public lowbit_quantize_act(group) keeps its documented group -> rule mapping
 * (lowbit_act_rule_of_group: 256 Q8_K, 32 Q8_0, 128 P2, else A8); lowbit_quantize_act_for(type)
 * uses the type's pair (I2_S: S8, or P2 after lowbit_set_i2s_act_rule). */
/* (the rules: lowbit_act_rule, formats.h) */
static inline int lowbit_act_rule_of_group(int64_t group) {
    return group == 256 ? LOWBIT_RULE_Q8_K : group == 32 ? LOWBIT_RULE_Q8_0
         : group == 128 ? LOWBIT_RULE_P2 : LOWBIT_RULE_A8;
}
int lowbit_act_rule_of_type(int type); /* types.c; the rule of lowbit_act_group(type)'s groups */
/* P2's scale for a vector of largest |x| amax (finite): from the bits, the same in every variant.
 * amax = 1.f * 2^(E-127) <= 127 * 2^(kb-127) holds for kb = E - 6 iff f <= 63/64. */
static inline float lowbit_act_p2_scale(float amax) {
    uint32_t b;
    memcpy(&b, &amax, 4);
    if (!b) return 0.0f;
    int32_t kb = (int32_t)(b >> 23) - 6 + ((b & 0x7fffff) > 0x7e0000u);
    if (kb < 1) kb = 1;
    b = (uint32_t)kb << 23;
    float d;
    memcpy(&d, &b, 4);
    return d;
}
/* S8's inverse scale id for a vector of largest |x| amax (finite), bitnet.cpp's arithmetic. */
static inline float lowbit_act_s8_inv(float amax) {
    const double m = amax > 0.00001 ? (double)amax : 0.00001;
    return (float)(127.0 / m);
}
/* The one (d, id) of a vector-wide rule (P2, S8) for a vector of largest |x| amax (finite). */
static inline void lowbit_act_vector_scale(int rule, float amax, float *d, float *id) {
    if (rule == LOWBIT_RULE_S8) {
        *id = lowbit_act_s8_inv(amax);
        *d = *id ? 1.0f / *id : 0.0f; /* id = 0: amax = inf */
    } else {
        *d = lowbit_act_p2_scale(amax);
        *id = *d ? 1.0f / *d : 0.0f; /* d = 2^k, id = 2^-k (exact: k in [-126, 123]) */
    }
}
/* 1 if the groups' sums of an activation vector may be added as integers with one float step at
 * the end (times `dw`, itself exact as a power of two or 1): all ng scales equal and 0 or a power
 * of two in [2^-126, 2^100] (no overflow of 2^24 * d), and at most 65536 values (|sum| < 2^24). */
static inline int lowbit_act_p2_row_ok(const float *d, int64_t ng, int64_t n) {
    if (n > 65536 || ng <= 0) return 0;
    uint32_t b;
    memcpy(&b, d, 4);
    if (b && ((b & 0x807fffffu) || (b >> 23) > 227)) return 0;
    for (int64_t g = 1; g < ng; g++)
        if (d[g] != d[0]) return 0;
    return 1;
}
static inline float lowbit_act_clamp(float v) {
    v = v >= -127.0f ? v : -127.0f; /* NaN fails the test: -127, as documented above */
    return v < 127.0f ? v : 127.0f;
}

#endif /* LOWBIT_ACT_RULES_H */
