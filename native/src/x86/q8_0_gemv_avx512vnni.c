/* AVX-512 VNNI Q8_0 GEMV in the file layout (34-byte blocks: fp16 d, then 32 int8 codes), the
 * LM head of the bench's models.
 *
 * vpdpbusd multiplies unsigned by signed bytes: the weights go in as w ^ 0x80 = w + 128 (0..255),
 * so a block's dpbusd sum is sum(w * a) + 128 * sum(a), and sum(a) is the activation code sum
 * s[b] (formats.h): seeding the accumulator with -128 * s[b] leaves the exact int32 sum
 * (|partial sums| <= 32 * 255 * 128 + 128 * 4096, far inside int32, for any int8 codes).
 *
 * 8 rows at a time, two blocks per step: one zmm per row holds its blocks b and b + 1, one dpbusd
 * each, then one transpose-add tree turns the 8 zmm into the 16 (row, block) sums, so the spec's
 * float steps run on 16 lanes at once (block b's step before b + 1's, per row).  The float step of
 * a pair is done one pair behind, while the next pair's loads are in flight.  A last group of
 * fewer than 8 rows reruns the 8 rows ending at r1 and keeps its own. */
#include <immintrin.h>
#include <stddef.h>

#include "../internal.h"
#include "avx512_reduce.h"

#define AI static inline __attribute__((always_inline))

/* the block's size and where its scale and codes start (formats.h) */
#define Q8B ((int64_t)sizeof(lowbit_block_q8_0))
#define Q8D ((int64_t)offsetof(lowbit_block_q8_0, d))
#define Q8QS ((int64_t)offsetof(lowbit_block_q8_0, qs))

/* Software prefetch of the 8-row run (the 8 row streams read side by side, which the hardware
 * prefetchers follow poorly), LOWBIT_PF_Q8_512 bytes ahead of the average read position, into L2
 * (docs/PERFORMANCE.md#q8-vnni). */
#ifndef LOWBIT_PF_Q8_512
#define LOWBIT_PF_Q8_512 32768
#endif

AI uint64_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Row i of 8 at p (rows 0-3) and p4 = p + 4 rb (rows 4-7): base + index * 1 or 2, so that the
 * 8 rows take 4 registers (rb3 = 3 rb). */
AI const uint8_t *rowp(const uint8_t *p, const uint8_t *p4, int64_t rb, int64_t rb3, int i) {
    const uint8_t *base = i < 4 ? p : p4;
    switch (i & 3) {
    case 0: return base;
    case 1: return base + rb;
    case 2: return base + 2 * rb;
    default: return base + rb3;
    }
}

/* The transpose-add tree: tr32, tr64 and tr128 (avx512_reduce.h). */

/* The int sums of blocks b and b + 1 (two = 0: b alone, zeros for b + 1) of the 8 rows (p, p4 at
 * block b of rows 0 and 4), lanes [b: rows 0-7 | b + 1: rows 0-7]. */
AI __m512i q8_sums(const uint8_t *p, const uint8_t *p4, int64_t rb, int64_t rb3, int64_t b,
                   const lowbit_act *a, int two) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i av, seed;
    if (two) {
        av = _mm512_loadu_si512(a->q + 32 * b);
        /* -128 s[b] into lane 0, -128 s[b+1] into lane 8: one lane of each block's 8 */
        const __m128i s = _mm_loadl_epi64((const __m128i *)(a->s + b));
        const __m128i neg = _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(s, 7));
        const __m512i to8 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        seed = _mm512_maskz_permutexvar_epi32(0x0101, to8, _mm512_castsi128_si512(neg));
    } else {
        av = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(a->q + 32 * b)));
        seed = _mm512_zextsi128_si512(_mm_cvtsi32_si128(-128 * a->s[b]));
    }
    __m512i v[8];
    for (int i = 0; i < 8; i++) {
        const uint8_t *c = rowp(p, p4, rb, rb3, i) + Q8QS; /* block b's codes */
        /* block b + 1's codes (c + Q8B) by an insert from memory */
        const __m256i lo = _mm256_loadu_si256((const __m256i *)c);
        const __m512i x = two ? _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                                   _mm256_loadu_si256((const __m256i *)(c + Q8B)), 1)
                              : _mm512_zextsi256_si512(lo); /* zero codes meet zero activations */
        v[i] = _mm512_dpbusd_epi32(seed, _mm512_xor_si512(x, flip), av);
    }
    /* 128-bit lane k of u0 (u1): rows 0-3 (4-7), each the sum of that row's lane k */
    const __m512i u0 = tr64(tr32(v[0], v[1]), tr32(v[2], v[3]));
    const __m512i u1 = tr64(tr32(v[4], v[5]), tr32(v[6], v[7]));
    /* 128-bit lanes 0, 1 hold block b, lanes 2, 3 block b + 1 */
    return tr128(u0, u1);
}

/* acc += (float)isum * (dw * da) for block b, then block b + 1 (if two), rows 0-7 in lanes 0-7:
 * the spec's roundings (two products, then the add), in block order.  The fp16 scales are gathered
 * in general-purpose registers: the vector shuffle pipes are the busy ones. */
AI __m256 q8_step(__m256 acc, __m512i isum, const uint8_t *p, const uint8_t *p4, int64_t rb,
                  int64_t rb3, int64_t b, const lowbit_act *a, int two) {
    uint64_t h[4] = {0, 0, 0, 0}; /* isum's lane order */
    for (int i = 0; i < 4; i++) {
        h[0] |= ld16(rowp(p, p4, rb, rb3, i) + Q8D) << (16 * i);
        h[1] |= ld16(rowp(p, p4, rb, rb3, i + 4) + Q8D) << (16 * i);
        if (two) {
            h[2] |= ld16(rowp(p, p4, rb, rb3, i) + Q8B + Q8D) << (16 * i);
            h[3] |= ld16(rowp(p, p4, rb, rb3, i + 4) + Q8B + Q8D) << (16 * i);
        }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_set_epi64x((long long)h[3], (long long)h[2],
                                                        (long long)h[1], (long long)h[0]));
    __m512 da = _mm512_set1_ps(a->d[b]);
    if (two) da = _mm512_mask_broadcastss_ps(da, 0xff00, _mm_load_ss(a->d + b + 1));
    const __m512 prod = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, da));
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(prod)); /* block b */
    if (two) acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(prod, 1)); /* then b + 1 */
    return acc;
}

/* Rows r .. r + 7 (p at row r), all of the row's blocks. */
AI __m256 q8_rows8(const uint8_t *p, int64_t rb, int64_t nb, const lowbit_act *a) {
    /* the 8 rows are one run [p, p + 8 rb); the previous group prefetched up to p + distance */
    const char *run = (const char *)p, *pf = run + LOWBIT_PF_Q8_512;
    const int64_t rb3 = 3 * rb;
    __m256 acc = _mm256_setzero_ps();
    __m512i pend = _mm512_setzero_si512();
    const uint8_t *p4 = p + 4 * rb;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, p += 2 * Q8B, p4 += 2 * Q8B) {
        if (LOWBIT_PF_Q8_512)
            for (const char *lim = run + 8 * Q8B * (b + 2) + LOWBIT_PF_Q8_512; pf < lim; pf += 64)
                _mm_prefetch(pf, _MM_HINT_T1);
        const __m512i s = q8_sums(p, p4, rb, rb3, b, a, 1);
        if (b) acc = q8_step(acc, pend, p - 2 * Q8B, p4 - 2 * Q8B, rb, rb3, b - 2, a, 1);
        pend = s;
    }
    if (b) acc = q8_step(acc, pend, p - 2 * Q8B, p4 - 2 * Q8B, rb, rb3, b - 2, a, 1);
    if (b < nb) /* an odd last block */
        acc = q8_step(acc, q8_sums(p, p4, rb, rb3, b, a, 0), p, p4, rb, rb3, b, a, 0);
    return acc;
}

/* One row, block by block (matrices of fewer than 8 rows). */
static float q8_row(const uint8_t *row, int64_t nb, const lowbit_act *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const __m256i c = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(row + Q8B * b + Q8QS)),
                                           _mm256_set1_epi8((char)0x80));
        const __m256i v = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c,
                                              _mm256_loadu_si256((const __m256i *)(a->q + 32 * b)));
        const int32_t isum = _mm512_reduce_add_epi32(_mm512_zextsi256_si512(v)) - 128 * a->s[b];
        acc += (float)isum * (lowbit_fp16_to_fp32((uint16_t)ld16(row + Q8B * b + Q8D)) * a->d[b]);
    }
    return acc;
}

void gemv_q8_0_avx512vnni(const void *w, int64_t rb, int64_t r0, int64_t r1,
                                 const lowbit_act *a, float *y) {
    const int64_t nb = a->n / 32;
    const uint8_t *w8 = (const uint8_t *)w;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) _mm256_storeu_ps(y + r - r0, q8_rows8(w8 + r * rb, rb, nb, a));
    if (r == r1) return;
    if (r1 >= 8) { /* rows r1 - 8 .. r1 - 1 (rows 0 .. r1 - 1 all exist), keeping the new ones */
        float t[8];
        _mm256_storeu_ps(t, q8_rows8(w8 + (r1 - 8) * rb, rb, nb, a));
        memcpy(y + r - r0, t + 8 - (r1 - r), sizeof(float) * (size_t)(r1 - r));
    } else {
        for (; r < r1; r++) y[r - r0] = q8_row(w8 + r * rb, nb, a);
    }
}

