/* GEMM of the packed layout (the prompt path): y[b][r] for a batch of activation columns.  The
 * body of gemm_avx2.c and gemm_avxvnni.c, which differ in the multiply-accumulate step only
 * (dot_step-inl.h: vpmaddubsw into int16, or vpdpbusd into int32, where no SUBQ bound applies).
 *
 * The decode-path layout (codes[rg][c][i][32], internal.h) is unpacked ONCE per panel of 32 rows
 * and block of K into an L1-resident scratch (8 KB), transposed so that one ymm holds 4 consecutive
 * weights ("a quad") of each of 8 rows:
 *
 *   W[quad t][row block rb][row i 0..7][4 code bytes]      (one 32-byte vector per (t, rb))
 *
 * Then vpmaddubsw(W[t][rb], broadcast of column j's 4 activation codes of quad t) gives, in int16
 * lanes 2i and 2i+1, the two pair sums of row i: lane = row.  Summing quads in int16 over a group
 * and widening with one vpmaddwd(ones) leaves every group sum of 8 rows x 1 column in the 8 int32
 * lanes, already in the order the float epilogue needs (lane = row, one accumulator per column):
 * no horizontal reduction at all, and the same code for group sizes 32, 128 and 256 (only how many
 * quads go into a sum changes).  The inner loop is a register tile of 4 row blocks x 2 columns:
 * per quad 4 weight loads, 2 broadcasts, 8 vpmaddubsw + 8 vpaddw (8 int16 accumulators, and half
 * the broadcasts per vpmaddubsw of a 2 x 4 tile).  The batch is a runtime count: a
 * last odd column runs a 4 x 1 tile.
 *
 * Bit-exact with lowbit_packed_gemm_ref: the integer group sums are the same sums reordered, and
 * each (row, column) accumulates acc += (float)(isum - s_g) * (d_w * d_a) group by group from 0,
 * product rounded before the add (no FMA: the library is built with -ffp-contract=off).
 * int16 bounds: codes <= 3, |a| <= 127 (A8 codes, formats.h), so one lane gains <= 2 * 3 * 127 =
 * 762 per quad; SUBQ = 32 quads (128 weights) sum to <= 24384 < 32767.  A 256-group adds two such
 * sums in int32. */
#ifndef LOWBIT_GEMM_INL_H
#define LOWBIT_GEMM_INL_H
#include <immintrin.h>

#include "../internal.h"

#define AI static inline __attribute__((always_inline))

#include "dot_step-inl.h"

#ifndef LOWBIT_GEMM_KB
#define LOWBIT_GEMM_KB 256 /* weights per K block: the scratch is PANEL * KB = 8 KB
                              (docs/PERFORMANCE.md#gemm-avx2-kb) */
#endif
enum {
    RB = 4,                  /* 8-row blocks per panel: a panel is 32 rows = 8 packed row groups */
    PANEL = 8 * RB,          /* rows per panel */
    KB = LOWBIT_GEMM_KB,
    SUBQ = DOT_INT16 ? 32 : 64, /* quads summed before widening (int16: the bound above) */
    CT = DOT_INT16 ? 2 : 3,  /* columns per register tile (vpdpbusd: 12 accumulators, as 8
                                chains of its 5-cycle latency would bound it) */
    CMAX = 64,               /* columns per pass: the float accumulators (8 KB) live on the stack */
    SCRATCH_BYTES = KB / 4 * RB * 32, /* a block's quads: [KB / 4][RB][32] */
};


/* acc + the products of a quad's weights w and activations b.  AVX2: the add in int16 in place, as
 * gcc 12 otherwise adds into a fresh register and copies it back each iteration (a vmovdqa per
 * vpaddw in the inner loop); vpdpbusd accumulates in place by itself. */
AI dot_t quad_acc(dot_t acc, __m256i w, __m256i b) {
#if DOT_INT16
    __asm__("vpaddw %1, %0, %0" : "+x"(acc) : "x"(dot_mul(w, b)));
    return acc;
#else
    return dot_acc(acc, w, b);
#endif
}

AI __m256i bcast4(const int8_t *p) { /* 4 activation codes, repeated 8 times */
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* ---- unpack: 8 rows (two packed row groups) x one 128-weight chunk -> 32 quad vectors ----------
 * v[i] = the row's 32 code bytes (byte p: weights p + 32k at bits 2k).  An 8x8 transpose of
 * 32-bit lanes gives T[j] with lane i = bytes 4j..4j+3 of row i; plane k of T[j] is then weights
 * 32k + 4j .. 32k + 4j + 3 of every row: quad 8k + j of the chunk, in natural order. */
AI void unpack_chunk8(const __m256i v[8], uint8_t *dst /* quad 0 of the chunk, this rb */) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i t[8], u[8], T[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);     /* rows i, i+1: bytes 0-7 | 16-23 */
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]); /* 8-15 | 24-31 */
    }
    for (int h = 0; h < 8; h += 4) { /* rows h..h+3 */
        u[h + 0] = _mm256_unpacklo_epi64(t[h], t[h + 2]);     /* dwords 0 | 4 */
        u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);     /* 1 | 5 */
        u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]); /* 2 | 6 */
        u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]); /* 3 | 7 */
    }
    for (int j = 0; j < 4; j++) {
        T[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        T[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
    for (int j = 0; j < 8; j++)
        for (int k = 0; k < 4; k++)
            _mm256_store_si256((__m256i *)(dst + (size_t)(8 * k + j) * RB * 32),
                               _mm256_and_si256(_mm256_srli_epi16(T[j], 2 * k), m3));
}

/* Codes of rows [4 rg0, 4 rg0 + PANEL) x chunks [c0, c0 + nc) into W; row groups from rg0 + nrg
 * on (past the matrix or the caller's range) are zeros, never read. */
static void unpack_panel(const lowbit_matrix *m, int64_t rg0, int64_t nrg, int64_t c0, int64_t nc,
                         uint8_t *W) {
    for (int64_t c = c0; c < c0 + nc; c++)
        for (int rb = 0; rb < RB; rb++) {
            __m256i v[8];
            for (int h = 0; h < 2; h++) {
                const int64_t rg = rg0 + 2 * rb + h;
                const uint8_t *src = m->codes + (rg * m->nchunks + c) * LOWBIT_PACK_ROWS * 32;
                for (int i = 0; i < 4; i++)
                    v[4 * h + i] = rg - rg0 < nrg ? _mm256_load_si256((const __m256i *)(src + 32 * i))
                                                  : _mm256_setzero_si256();
            }
            unpack_chunk8(v, W + ((c - c0) * 32 * RB + rb) * 32);
        }
}

/* ---- the register tile: rows of the panel x NC <= CT columns, over the groups of one K block ---- */

typedef struct {
    const int8_t *q[CT]; /* column codes at the K block's first weight */
    const int32_t *s[CT];
    const float *d[CT];  /* sums and scales at the K block's first group */
} cols_t;

/* One quad of 4 row blocks x 2 columns: 2 broadcasts, 4 weight loads, 8 multiply-accumulates
 * (AVX2: vpmaddubsw + vpaddw; AVX-VNNI: vpdpbusd).  In asm because gcc 12 re-loads each weight
 * vector for the second column and copies accumulators around (under AVX-VNNI it even keeps two
 * of them on the stack, a store-to-load chain per quad); here every weight is loaded once and
 * accumulated in place. */
#if DOT_INT16
#define STEP_MAC(s, b) "vpmaddubsw %[" #b "], %[x], %[t]\n\tvpaddw %[t], %[" #s "], %[" #s "]\n\t"
#define STEP_MAC_LAST(s, b) "vpmaddubsw %[" #b "], %[x], %[x]\n\tvpaddw %[x], %[" #s "], %[" #s "]\n\t"
#else
#define STEP_MAC(s, b) "%{vex%} vpdpbusd %[" #b "], %[x], %[" #s "]\n\t"
#define STEP_MAC_LAST STEP_MAC
#endif
#define STEP_ROW(off, s0, s1) "vmovdqa " #off "(%[w]), %[x]\n\t" STEP_MAC(s0, b0) STEP_MAC_LAST(s1, b1)
AI void step_4x2(const uint8_t *w, const int8_t *qa, const int8_t *qb, dot_t s[CT][RB]) {
    __m256i b0, b1, x, t;
    __asm__("vpbroadcastd %[qa], %[b0]\n\t"
            "vpbroadcastd %[qb], %[b1]\n\t"
            STEP_ROW(0, s00, s10) STEP_ROW(32, s01, s11) STEP_ROW(64, s02, s12) STEP_ROW(96, s03, s13)
            : [s00] "+x"(s[0][0]), [s01] "+x"(s[0][1]), [s02] "+x"(s[0][2]), [s03] "+x"(s[0][3]),
              [s10] "+x"(s[1][0]), [s11] "+x"(s[1][1]), [s12] "+x"(s[1][2]), [s13] "+x"(s[1][3]),
              [b0] "=&x"(b0), [b1] "=&x"(b1), [x] "=&x"(x), [t] "=&x"(t)
            : [w] "r"(w), [qa] "m"(*(const int32_t *)qa), [qb] "m"(*(const int32_t *)qb),
              "m"(*(const uint8_t(*)[128])w));
    (void)t;
}
#if !DOT_INT16
/* The AVX-VNNI main tile, 4 row blocks x 3 columns: 12 vpdpbusd a quad on 12 accumulators (all 16
 * ymm registers with the 3 broadcasts and the weights), so that each accumulator's chain waits
 * on vpdpbusd's latency less often than the ports can issue: docs/PERFORMANCE.md#gemm-avxvnni. */
#define STEP_ROW3(off, s0, s1, s2) \
    "vmovdqa " #off "(%[w]), %[x]\n\t" STEP_MAC(s0, b0) STEP_MAC(s1, b1) STEP_MAC(s2, b2)
AI void step_4x3(const uint8_t *w, const int8_t *qa, const int8_t *qb, const int8_t *qc,
                 dot_t s[CT][RB]) {
    __m256i x; /* the broadcasts as inputs: an asm takes at most 30 operands */
    __asm__(STEP_ROW3(0, s00, s10, s20) STEP_ROW3(32, s01, s11, s21)
            STEP_ROW3(64, s02, s12, s22) STEP_ROW3(96, s03, s13, s23)
            : [s00] "+x"(s[0][0]), [s01] "+x"(s[0][1]), [s02] "+x"(s[0][2]), [s03] "+x"(s[0][3]),
              [s10] "+x"(s[1][0]), [s11] "+x"(s[1][1]), [s12] "+x"(s[1][2]), [s13] "+x"(s[1][3]),
              [s20] "+x"(s[2][0]), [s21] "+x"(s[2][1]), [s22] "+x"(s[2][2]), [s23] "+x"(s[2][3]),
              [x] "=&x"(x)
            : [w] "r"(w), [b0] "x"(bcast4(qa)), [b1] "x"(bcast4(qb)), [b2] "x"(bcast4(qc)),
              "m"(*(const uint8_t(*)[128])w));
}
#undef STEP_ROW3
#endif
#undef STEP_ROW
#undef STEP_MAC_LAST
#undef STEP_MAC

/* is[c][rb] = the int32 sums (lane = row) of the NQ <= SUBQ quads from quad t0, column c. */
AI void quad_sums(const int NC, const int NQ, const uint8_t *W, int64_t t0, const cols_t *C,
                  __m256i is[CT][RB]) {
    dot_t s16[CT][RB];
    for (int c = 0; c < NC; c++)
        for (int rb = 0; rb < RB; rb++) s16[c][rb] = _mm256_setzero_si256();
    /* the tiles by hand (the emulated variant's step is not one instruction: the loop below) */
    if (LOWBIT_DOT != LOWBIT_DOT_VNNI_EMULATED && NC == 2 && RB == 4) {
        for (int64_t t = t0; t < t0 + NQ; t++)
            step_4x2(W + t * RB * 32, C->q[0] + 4 * t, C->q[1] + 4 * t, s16);
#if !DOT_INT16
    } else if (LOWBIT_DOT != LOWBIT_DOT_VNNI_EMULATED && NC == 3 && RB == 4) {
        for (int64_t t = t0; t < t0 + NQ; t++)
            step_4x3(W + t * RB * 32, C->q[0] + 4 * t, C->q[1] + 4 * t, C->q[2] + 4 * t, s16);
#endif
    } else {
        for (int64_t t = t0; t < t0 + NQ; t++) {
            __m256i b[CT];
            for (int c = 0; c < NC; c++) b[c] = bcast4(C->q[c] + 4 * t);
            for (int rb = 0; rb < RB; rb++) {
                const __m256i w = _mm256_load_si256((const __m256i *)(W + (t * RB + rb) * 32));
                for (int c = 0; c < NC; c++)
                    s16[c][rb] = quad_acc(s16[c][rb], w, b[c]);
            }
        }
    }
    for (int c = 0; c < NC; c++)
        for (int rb = 0; rb < RB; rb++) is[c][rb] = dot_wide(s16[c][rb]);
}

/* acc[c][rb] (8 floats, lane = row) += the groups [0, ng) of the block (G weights each).  W: the
 * block's quads; dw[g][rb]: the weight scales of group g. */
AI void tile(const int G, const int NC, const uint8_t *W, const float *dw, int64_t ng,
             const cols_t *C, float *acc /* [NC][PANEL] */) {
    const int GQ = G / 4, SQ = GQ < SUBQ ? GQ : SUBQ; /* quads per group, per int16 sum */
    for (int64_t g = 0; g < ng; g++) {
        __m256i is[CT][RB];
        quad_sums(NC, SQ, W, g * GQ, C, is);
        if (GQ > SQ) { /* a 256-group (G <= 256): its second half; the first waits in memory, as
                          8 more live registers would spill the tile's */
            _Alignas(32) int32_t part[CT][RB][8];
            for (int c = 0; c < NC; c++)
                for (int rb = 0; rb < RB; rb++) _mm256_store_si256((__m256i *)part[c][rb], is[c][rb]);
            quad_sums(NC, SQ, W, g * GQ + SQ, C, is);
            for (int c = 0; c < NC; c++)
                for (int rb = 0; rb < RB; rb++)
                    is[c][rb] = _mm256_add_epi32(is[c][rb], _mm256_load_si256((const __m256i *)part[c][rb]));
        }
        /* acc += (float)(isum - s) * (dw * da), lane by lane in group order */
        for (int c = 0; c < NC; c++) {
            const __m256i s = _mm256_set1_epi32(C->s[c][g]);
            const __m256 da = _mm256_set1_ps(C->d[c][g]);
            for (int rb = 0; rb < RB; rb++) {
                const __m256 sc = _mm256_mul_ps(_mm256_load_ps(dw + (g * RB + rb) * 8), da);
                const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(is[c][rb], s)), sc);
                float *a = acc + c * PANEL + rb * 8;
                _mm256_store_ps(a, _mm256_add_ps(_mm256_load_ps(a), p));
            }
        }
    }
}

AI void tile_any(const int G, int nc, const uint8_t *W, const float *dw, int64_t ng,
                 const cols_t *C, float *acc) {
    if (nc == CT) /* else a column tail of the batch */
        tile(G, CT, W, dw, ng, C, acc);
    else if (CT > 2 && nc == 2)
        tile(G, 2, W, dw, ng, C, acc);
    else
        tile(G, 1, W, dw, ng, C, acc);
}

/* Weight scales of the panel's rows for groups [g0, g0 + ng): dw[g][rb][8]; 1 for I2_S (its
 * per-tensor scale is the caller's), 0 for missing row groups. */
static void panel_scales(const lowbit_matrix *m, int64_t G, int64_t rg0, int64_t nrg, int64_t g0,
                         int64_t ng, float *dw) {
    for (int64_t g = 0; g < ng; g++)
        for (int rb = 0; rb < RB; rb++) {
            __m128i h[2];
            for (int k = 0; k < 2; k++) {
                const int64_t rg = rg0 + 2 * rb + k;
                if (rg - rg0 >= nrg) {
                    h[k] = _mm_setzero_si128();
                } else if (!m->qk) {
                    h[k] = _mm_set1_epi16(0x3c00); /* fp16 1.0 */
                } else {
                    const int64_t b = (g0 + g) * G / m->qk;
                    h[k] = _mm_loadl_epi64((const __m128i *)(m->scales + (rg * m->nscales + b) * 4));
                }
            }
            _mm256_store_ps(dw + (g * RB + rb) * 8, _mm256_cvtph_ps(_mm_unpacklo_epi64(h[0], h[1])));
        }
}

#include "gemm_panels-inl.h"

void KN(packed_gemm)(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                     int64_t batch, float *y, int64_t ldy) {
    packed_gemm_panels(m, r0, r1, a, batch, y, ldy);
}
#endif /* LOWBIT_GEMM_INL_H */
