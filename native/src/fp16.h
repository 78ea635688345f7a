/* fp16 / bf16 <-> fp32 conversions in portable C, the same in every variant. */
#ifndef LOWBIT_FP16_H
#define LOWBIT_FP16_H

#include <stdint.h>
#include <string.h>

/* ---- fp16 <-> fp32 (IEEE binary16, round to nearest even), no hardware assumption ------------ */

static inline float lowbit_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* BF16 is float32's upper half: widening is exact. */
static inline float lowbit_bf16_to_fp32(uint16_t h) {
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* float32 to BF16, round to nearest even (NaN stays a quiet NaN), as ggml rounds it. */
static inline uint16_t lowbit_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000u) return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

static inline uint16_t lowbit_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00); /* NaN */
    if (absx >= 0x47800000u) {                               /* >= 65536: overflow to inf */
        /* values in [65520, 65536) round to inf too, handled by the general path below */
        return (uint16_t)(sign | 0x7c00);
    }
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign; /* < 2^-25 rounds to zero */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 - (e - 127) + 13 - 1 ... aligns to 2^-24 units */
        uint32_t half = m >> (shift);
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((absx >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exponent: fine */
    return (uint16_t)(sign | half);
}

#endif /* LOWBIT_FP16_H */
