/* AArch64 kernels of the BASE3F layout (TQ1_0 / PTQ1_0 in the dense base-3 geometry with
 * file-style bytes, packed.h above struct lowbit_matrix), included by base3_neon.c and
 * base3_dotprod.c (LOWBIT_ARM_DOTPROD 0 / 1): the GEMV reads 5 trits a byte as packed, bit-exact
 * with lowbit_base3_gemv_ref; the GEMM decodes a task's rows into the 2-bit layout and runs the
 * variant's 2-bit GEMM on them.
 *
 * A byte s_0 is a centred fraction whose base-3 digits are the trits: s_k = 3^k s_0 (mod 256, one
 * vmulq_u8) brings trit k to the top, and weight k = [s_k < -42] - [s_k > 42] as the difference
 * of two compare masks.  A 16-byte vector holds 4 bytes of each of 4 rows (a lane a row), so the
 * activation quad of plane k meets each row's 4 weights: with dotprod one vdotq_laneq_s32 gives
 * each row's int32 sum; without it w * a (exact in int8: w is -1, 0 or 1) is added pairwise into
 * int16 lanes (a lane adds at most 64 pairs of 2 x 127 in a group: no overflow).  The group's
 * float step acc += (float)isum * (dw * d[g]) runs in the references' order (no code offset: the
 * sums are of w, not of w + 1). */
#ifndef LOWBIT_ARM_BASE3_INL_H
#define LOWBIT_ARM_BASE3_INL_H

#include <arm_neon.h>
#include <string.h>

#include "../internal.h"

#ifndef LOWBIT_ARM_DOTPROD
#error "define LOWBIT_ARM_DOTPROD to 0 or 1 before including base3-inl.h"
#endif

#define AI static inline __attribute__((always_inline))

#if LOWBIT_ARM_DOTPROD
#define B3_VARIANT(name) name##_dotprod
typedef int32x4_t b3_acc; /* a row's int32 sum in each lane */
AI b3_acc b3_zero(void) { return vdupq_n_s32(0); }
/* acc += the dot of each row's 4 weights w with the activation quad `lane` of x */
#define B3_DOT(acc, w, x, lane) vdotq_laneq_s32(acc, w, x, lane)
AI int32x4_t b3_sums(b3_acc acc) { return acc; }
#else
#define B3_VARIANT(name) name##_neon
typedef int16x8_t b3_acc; /* a row's int16 pair sums in two lanes */
AI b3_acc b3_zero(void) { return vdupq_n_s16(0); }
#define B3_DOT(acc, w, x, lane)                                                                   \
    vpadalq_s8(acc, vmulq_s8(w, vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), lane))))
AI int32x4_t b3_sums(b3_acc acc) { return vpaddlq_s16(acc); }
#endif

/* The weights (-1, 0, 1) of one plane of 16 bytes s */
AI int8x16_t b3_weights(int8x16_t s) {
    const uint8x16_t p = vcgtq_s8(s, vdupq_n_s8(42)), n = vcltq_s8(s, vdupq_n_s8(-42));
    return vreinterpretq_s8_u8(vsubq_u8(n, p));
}

/* Plane k of s_0: 3^k s_0 mod 256 */
AI int8x16_t b3_plane(int8x16_t s0, int k) {
    static const uint8_t POW3[5] = {1, 3, 9, 27, 81};
    return vreinterpretq_s8_u8(vmulq_u8(vreinterpretq_u8_s8(s0), vdupq_n_u8(POW3[k])));
}

/* One unit of one set (t: its 512 bytes): into P[v] the sums of planes 0..3 of rows 4v..4v+3,
 * into P4[v] those of plane 4 (X4: the unit has one).  q[k]: plane k's slice (32 activations). */
AI void b3_unit(const int X4, const uint8_t *t, const int8_t *const q[5], b3_acc P[4],
                b3_acc P4[4]) {
    for (int jh = 0; jh < 2; jh++) { /* runs 4 jh .. 4 jh + 3: their quads are one 16-byte load */
        int8x16_t x[5];
        for (int k = 0; k < 4 + X4; k++) x[k] = vld1q_s8(q[k] + 16 * jh);
#define B3_RUN(j)                                                                                  \
        for (int v = 0; v < 4; v++) {                                                              \
            const int8x16_t s0 = vld1q_s8((const int8_t *)t + 64 * (4 * jh + (j)) + 16 * v);       \
            for (int k = 0; k < 4; k++) P[v] = B3_DOT(P[v], b3_weights(b3_plane(s0, k)), x[k], j); \
            if (X4) P4[v] = B3_DOT(P4[v], b3_weights(b3_plane(s0, 4)), x[4], j);                   \
        }
        B3_RUN(0) B3_RUN(1) B3_RUN(2) B3_RUN(3)
#undef B3_RUN
    }
}

/* acc[v] += (float)isum * (dw * d[g]) for rows 4v..4v+3 of set R */
AI void b3_float_step(const lowbit_matrix *m, int64_t R, const lowbit_act *a, int64_t g,
                      const b3_acc P[4], float32x4_t acc[4]) {
    const uint16_t *sc = m->scales + lowbit_base3_scale_at(m, R * LOWBIT_BASE3_ROWS, g);
    for (int v = 0; v < 4; v++) {
        const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(sc + 4 * v)));
        acc[v] = vaddq_f32(acc[v], vmulq_f32(vcvtq_f32_s32(b3_sums(P[v])), vmulq_n_f32(dw, a->d[g])));
    }
}

/* Set R's rows in [lo, hi) of a matrix of S slices a group (4: PTQ1_0, 8: TQ1_0) */
AI void b3_set16(const int S, const lowbit_matrix *m, int64_t R, int64_t lo, int64_t hi,
                 const lowbit_act *a, float *y) {
    const int64_t G = 32 * S, ng = m->cols / G, np = ng / 5;
    const uint8_t *t = m->codes + R * m->nunits * 512;
    float32x4_t acc[4];
    for (int v = 0; v < 4; v++) acc[v] = vdupq_n_f32(0.0f);
    for (int64_t g0 = 0; g0 < ng; g0 += 5) {
        const int full = g0 / 5 < np; /* a period of 5 groups, else the tail's groups */
        b3_acc P4[4];
        for (int v = 0; v < 4; v++) P4[v] = b3_zero();
        for (int j = 0; j < 5 && g0 + j < ng; j++) {
            if (j == 4) { /* group 4: plane 4 of the period's units */
                b3_float_step(m, R, a, g0 + 4, P4, acc);
                break;
            }
            b3_acc P[4];
            for (int v = 0; v < 4; v++) P[v] = b3_zero();
            for (int uu = 0; uu < S / 4; uu++) {
                const int8_t *qg = a->q + (g0 + j) * G + 128 * uu, *q[5];
                for (int k = 0; k < 4; k++) q[k] = qg + 32 * k;
                q[4] = a->q + (g0 + 4) * G + 32 * (j * S / 4 + uu); /* full periods only */
                if (full)
                    b3_unit(1, t, q, P, P4);
                else
                    b3_unit(0, t, q, P, P4);
                t += 512;
            }
            b3_float_step(m, R, a, g0 + j, P, acc);
        }
    }
    float out[16];
    for (int v = 0; v < 4; v++) vst1q_f32(out + 4 * v, acc[v]);
    if (hi > m->rows) hi = m->rows;
    for (int l = 0; l < 16; l++) {
        const int64_t r = R * 16 + l;
        if (r >= lo && r < hi) y[r] = out[l];
    }
}

static __attribute__((noinline)) void b3_set16_4(const lowbit_matrix *m, int64_t R, int64_t lo,
                                                 int64_t hi, const lowbit_act *a, float *y) {
    b3_set16(4, m, R, lo, hi, a, y);
}
static __attribute__((noinline)) void b3_set16_8(const lowbit_matrix *m, int64_t R, int64_t lo,
                                                 int64_t hi, const lowbit_act *a, float *y) {
    b3_set16(8, m, R, lo, hi, a, y);
}

void B3_VARIANT(base3f_gemv)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                             float *y) {
    if (r1 > m->rows) r1 = m->rows;
    for (int64_t R = r0 / 16; R * 16 < r1; R++)
        (m->group == 256 ? b3_set16_8 : b3_set16_4)(m, R, r0, r1, a, y);
}

/* ---- the GEMM: rows decoded into the 2-bit layout (as base3_avx2.c) ------------------------- */

/* The trit (0..2) of each byte of plane s: [s > -43] + [s > 42] */
AI uint8x16_t b3_trit(int8x16_t s) {
    const uint8x16_t hi = vcgtq_s8(s, vdupq_n_s8(42)), mid = vcgtq_s8(s, vdupq_n_s8(-43));
    return vsubq_u8(vdupq_n_u8(0), vaddq_u8(hi, mid));
}

/* V[j]: bytes 4j..4j+3 of rows 16R + l (64 bytes a j) of one chunk, to the 2-bit chunk of the rows
 * of row groups [rg0, rg0 + nrg) among them */
static void b3_put_chunk(const uint8_t V[8][64], int64_t R, int64_t rg0, int64_t nrg, int64_t nch,
                         int64_t chunk, uint8_t *dst) {
    for (int l = 0; l < 16; l++) {
        const int64_t g = 4 * R + l / 4 - rg0;
        if (g < 0 || g >= nrg) continue;
        uint8_t *d = dst + ((g * nch + chunk) * 4 + l % 4) * 32;
        for (int j = 0; j < 8; j++) memcpy(d + 4 * j, V[j] + 4 * l, 4);
    }
}

static void b3_decode(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                      uint16_t *sdst) {
    const int64_t G = m->group, S = G / 32, ng = m->cols / G, np = ng / 5, per = S / 4;
    const int64_t nu = m->nunits, nch = m->nchunks;
    uint8_t C[8][64], X[8][64];
    for (int64_t R = rg0 / 4; R * 4 < rg0 + nrg; R++) {
        const uint8_t *src = m->codes + R * nu * 512;
        memset(X, 0, sizeof X);
        for (int64_t u = 0; u < nu; u++) {
            const int64_t p = u / S, uu = u % S;
            for (int j = 0; j < 8; j++)
                for (int v = 0; v < 4; v++) {
                    const int8x16_t s0 = vld1q_s8((const int8_t *)src + u * 512 + 64 * j + 16 * v);
                    uint8x16_t c = b3_trit(b3_plane(s0, 0));
                    for (int k = 1; k < 4; k++)
                        c = vorrq_u8(c, vshlq_u8(b3_trit(b3_plane(s0, k)), vdupq_n_s8((int8_t)(2 * k))));
                    vst1q_u8(C[j] + 16 * v, c);
                    if (p < np) { /* plane 4 of unit uu is field uu % 4 of its chunk */
                        const uint8x16_t f = vshlq_u8(b3_trit(b3_plane(s0, 4)),
                                                      vdupq_n_s8((int8_t)(2 * (uu % 4))));
                        vst1q_u8(X[j] + 16 * v, uu % 4 ? vorrq_u8(vld1q_u8(X[j] + 16 * v), f) : f);
                    }
                }
            /* planes 0..3: chunk uu % per of group 5p + uu / per (the tail alike) */
            b3_put_chunk(C, R, rg0, nrg, nch, (5 * p + uu / per) * per + uu % per, dst);
            if (p < np && uu % 4 == 3)
                b3_put_chunk(X, R, rg0, nrg, nch, (5 * p + 4) * per + uu / 4, dst);
        }
        lowbit_set_scales_decoded(m, R, rg0, nrg, sdst);
    }
}

void B3_VARIANT(packed_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                             int64_t batch, float *y, int64_t ldy);

void B3_VARIANT(base3f_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                             int64_t batch, float *y, int64_t ldy) {
    lowbit_base3_gemm_decoded(b3_decode, B3_VARIANT(packed_gemm), m, r0, r1, a, batch, y, ldy);
}

#endif
