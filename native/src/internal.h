/* Internal plumbing shared by the reference code, the SIMD variants and the dispatcher. */
#ifndef LOWBIT_INTERNAL_H
#define LOWBIT_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lowbit/lowbit.h"

/* Linux-only facilities (sysfs topology, sched_getaffinity, getauxval, madvise huge pages) are used
 * only under LOWBIT_LINUX.  A LOWBIT_PORTABLE build leaves it undefined, so that the fallbacks the
 * other systems take are built and tested on Linux too. */
#if defined(__linux__) && !defined(LOWBIT_PORTABLE)
#define LOWBIT_LINUX 1
#endif

/* The machine's default thread count (topology.c); writes how it was chosen into why. */
int lowbit_detect_threads(char *why, size_t why_len);

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
enum { LOWBIT_ACT_A8, LOWBIT_ACT_Q8_0, LOWBIT_ACT_Q8_K, LOWBIT_ACT_P2, LOWBIT_ACT_S8 };
static inline int lowbit_act_rule_of_group(int64_t group) {
    return group == 256 ? LOWBIT_ACT_Q8_K : group == 32 ? LOWBIT_ACT_Q8_0
         : group == 128 ? LOWBIT_ACT_P2 : LOWBIT_ACT_A8;
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
    if (rule == LOWBIT_ACT_S8) {
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

/* ---- packed matrices (repack.c) ----------------------------------------------------------------
 *
 * The decode path reads each weight once per token, so the layout is chosen for DRAM streaming: the
 * rows of a matrix are taken LOWBIT_PACK_ROWS at a time and their blocks interleaved, so that one
 * GEMV walks a single sequential run of memory (hardware prefetchers follow it; they lose track of
 * several row-major rows read side by side).  Every ternary / 2-bit format (TQ1_0, TQ2_0, I2_S,
 * Q2_0, PQ2_0, PTQ1_0) is converted to one canonical code layout:
 *
 *   codes[rg][c][i][32]  row group rg (rows 4rg..4rg+3), 128-weight chunk c of the row, row i:
 *                        byte p holds weights 128c + p + 32k at bits 2k (k = 0..3), code 0..3
 *                        meaning value (code - 1) * d.  A last chunk of 64 weights (Q2_0 rows of
 *                        an odd number of blocks) uses k = 0, 1 only.
 *   scales[rg][b][i]     fp16 scale of weight block b (of the file format's block size `qk`) of
 *                        row 4rg+i.  I2_S has none (its fp32 per-tensor scale is `tensor_scale`).
 *
 * so the kernels unpack with one shift and mask per 32 weights, in activation order, and the codes
 * of a 4-row group stay 32-byte aligned.  Base-3 formats grow from 1.69 / 1.75 to 2.06 / 2.13 bits
 * per weight this way, a trade for 2-bit-speed unpacking (a variant that decodes base-3 in
 * registers takes the dense layout below instead).  Other types (Q8_0, Q1_0, F16, F32) are
 * not repacked: the matrix borrows the caller's buffer and runs the file-layout kernels. */
#define LOWBIT_PACK_ROWS 4
/* The dense base-3 layout (TQ1_0 / PTQ1_0 where the active variant decodes it, `base3` below;
 * ref/base3_packed.c): the file's density, 5 trits a byte, rows in sets of LOWBIT_BASE3_ROWS
 * (padded with zero rows), stored so that one 64-byte vector holds 4 bytes of each of 16 rows:
 *
 *   codes[R][u][j][l][4]  row set R (rows 16R..16R+15), 32-byte unit u of the row, bytes 4j..4j+3
 *                         (j = 0..7) of row 16R + l: byte p holds trits t0..t4 (codes 0..2) as
 *                         84 t4 + t0 + 3 t1 + 9 t2 + 27 t3, trit k being weight p of the
 *                         32-weight slice that plane k of unit u holds.
 *   scales[R][b][l]       fp16 scale of block b of row 16R + l.
 *
 * With S = group / 32 slices per activation group (4 for PTQ1_0, 8 for TQ1_0), every 5 groups
 * are S units: unit u of such a period holds slices 4 (u % (S/4)) .. + 3 of the period's group
 * u / (S/4) in planes 0..3 and slice u of its group 4 in plane 4, so each group's sums close
 * within its own units (group 4's at the period's end) and no slice straddles a group.  The last
 * ng % 5 groups take S/4 units each, planes 0..3 (plane 4 holds zeros): 2 bits a weight there. */
#define LOWBIT_BASE3_ROWS 16
struct lowbit_matrix {
    int type, kidx;
    int packed;           /* 1: canonical interleaved copy; 0: borrows `w` in the file layout */
    int base3;            /* packed in the dense base-3 layout (above), not the 2-bit one */
    int64_t nunits;       /* base3: 32-byte units per row */
    int64_t rows, cols;
    int64_t qk;           /* scale block of the format (0 for I2_S) */
    int64_t group;        /* activation group */
    int64_t nchunks;      /* 128-weight chunks per row (last may be half) */
    int64_t nscales;      /* scale blocks per row */
    const void *w;        /* packed == 0: the file-layout data (borrowed) */
    uint8_t *codes;       /* packed == 1 */
    uint16_t *scales;
    float tensor_scale;   /* I2_S */
    int64_t nbytes;       /* bytes owned (codes + scales) */
};

/* Bytes of codes per LOWBIT_PACK_ROWS rows (a row group; base3: a quarter of a row set) */
static inline int64_t lowbit_packed_group_bytes(const lowbit_matrix *m) {
    return (m->base3 ? m->nunits : m->nchunks) * LOWBIT_PACK_ROWS * 32;
}

/* Whether a packed GEMV may take the I2_S row-sum path (every SIMD variant's packed_gemv_i2s_row:
 * a row's int sums over all its chunks, one float step): I2_S in whole 128-weight chunks with P2
 * activations that make the per-group float steps exact (lowbit_act_p2_row_ok). */
static inline int lowbit_i2s_row_sums_ok(const lowbit_matrix *m, const lowbit_act *a) {
    return m->type == LOWBIT_TYPE_I2_S && m->cols % 128 == 0 &&
           lowbit_act_p2_row_ok(a->d, m->cols / 128, m->cols);
}

/* The I2_S row-sum path's +1 code offset, undone once per row: the activation code sums of all
 * the row's chunks (a chunk is an activation group there). */
static inline int32_t lowbit_i2s_code_offset(const lowbit_matrix *m, const lowbit_act *a) {
    int32_t stot = 0;
    for (int64_t c = 0; c < m->nchunks; c++) stot += a->s[c];
    return stot;
}

/* The matrices packed_gemv_pair runs (the others keep one range per task, but group 32 in a
 * table with packed_gemv_pair32): whole groups of one scale block each, 256 weights (TQ2_0,
 * TQ1_0) or 128 (PQ2_0, PTQ1_0), and I2_S in whole 128-weight chunks. */
static inline int lowbit_pair_rows_ok(const lowbit_matrix *m) {
    if (!m->packed || m->base3) return 0;
    if (m->type == LOWBIT_TYPE_I2_S) return m->cols % 128 == 0;
    return (m->group == 256 || m->group == 128) && m->qk == m->group && m->cols % m->group == 0;
}

/* ---- kernel table filled by the dispatcher ---------------------------------------------------- */

/* y[r - r0] = dot(row r of W, a) for r in [r0, r1).  `w` points at row 0, rows are row_bytes apart.
 * I2_S kernels return the unscaled sum (the per-tensor scale is applied by the caller). */
typedef void (*lowbit_gemv_fn)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                               const lowbit_act *a, float *y);
/* y[b * ldy + r] for b < batch, r in [r0, r1): the same dot for each of `batch` activations. */
typedef void (*lowbit_gemm_fn)(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                               const lowbit_act *a, int64_t batch, float *y, int64_t ldy);
/* A packed GEMV of two row ranges in one pass (packed_gemv_pair below) */
typedef void (*lowbit_pair_fn)(const struct lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                               int64_t b1, const lowbit_act *a, float *y);
/* x[n] -> q[n], d[n / group], s[n / group] with rounding rule `rule` (LOWBIT_ACT_*) */
typedef void (*lowbit_quantize_act_fn)(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                                       float *d, int32_t *s);

/* Weight types with quantized kernels, in table order. */
enum {
    LOWBIT_K_TQ1_0,
    LOWBIT_K_TQ2_0,
    LOWBIT_K_I2_S,
    LOWBIT_K_Q1_0,
    LOWBIT_K_Q2_0,
    LOWBIT_K_PQ2_0,
    LOWBIT_K_PTQ1_0,
    LOWBIT_K_Q8_0,
    LOWBIT_K_Q5_0, /* ggml's formats (ref/kquant.c), outside the list below */
    LOWBIT_K_Q4_K,
    LOWBIT_K_Q6_K,
    LOWBIT_K_COUNT
};
int lowbit_kernel_index(int type); /* LOWBIT_K_* or -1 */
/* The A8 code formats, as X(LOWBIT_K_*, name): the one list that each variant's registration (and
 * the reference's definitions in ref/dot.c) walks.  Q5_0 / Q4_K / Q6_K have their own reference
 * (ref/kquant.c, lowbit_fill_kquant_scalar) and SIMD files (x86/kquant_avx2.c). */
#define LOWBIT_FOR_EACH_QUANT_TYPE(X)                                                              \
    X(LOWBIT_K_TQ1_0, tq1_0)                                                                       \
    X(LOWBIT_K_TQ2_0, tq2_0)                                                                       \
    X(LOWBIT_K_I2_S, i2_s)                                                                         \
    X(LOWBIT_K_Q1_0, q1_0)                                                                         \
    X(LOWBIT_K_Q2_0, q2_0)                                                                         \
    X(LOWBIT_K_PQ2_0, pq2_0)                                                                       \
    X(LOWBIT_K_PTQ1_0, ptq1_0)                                                                     \
    X(LOWBIT_K_Q8_0, q8_0)

typedef struct lowbit_kernels {
    lowbit_gemv_fn gemv[LOWBIT_K_COUNT];
    lowbit_gemm_fn gemm[LOWBIT_K_COUNT];
    lowbit_quantize_act_fn quantize_act;
    /* float GEMV for F32 / F16 / BF16 weights (the tied-embedding LM head): y[r - r0] = W[r] . x */
    void (*gemv_f32)(const float *w, int64_t cols, int64_t r0, int64_t r1, const float *x, float *y);
    void (*gemv_f16)(const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                     float *y);
    void (*gemv_bf16)(const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x,
                      float *y);
    /* Packed (row-interleaved) matrices, see repack.c: rows [r0, r1) with r0 a multiple of
     * LOWBIT_PACK_ROWS; y is indexed by absolute row (y[r], or y[b * ldy + r] for GEMM).  Rows
     * past m->rows are never written. */
    void (*packed_gemv)(const struct lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        float *y);
    void (*packed_gemm)(const struct lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                        int64_t batch, float *y, int64_t ldy);
    /* Optional (NULL: none): the GEMV of two row ranges far apart in one pass, [a0, a1) and
     * [b0, b1) (multiples of LOWBIT_PACK_ROWS at their starts, b1 - b0 <= a1 - a0), for the
     * matrices lowbit_pair_rows_ok accepts: results as two packed_gemv calls, bit for bit.  A
     * GEMV job then gives each task a row tile of the matrix's first half and its twin in the
     * second (api.c): each thread streams two runs of memory side by side, which the prefetchers
     * of this Zen 3 follow faster than one run of the same bytes. */
    lowbit_pair_fn packed_gemv_pair;
    /* Optional (NULL: group-32 matrices run unpaired): the same for packed group-32 matrices
     * (Q2_0), where only a variant whose group-32 kernel gains from pairing sets it (AVX-512
     * VNNI; see its kernels_avx512vnni.c). */
    lowbit_pair_fn packed_gemv_pair32;
    /* Reads n bytes (a multiple of 64) as fast as the core can and returns the sum of its 64-bit
     * words mod 2^64: the loop of lowbit_stream_read, the roofline's bandwidth probe (a slow probe
     * would inflate the shares). */
    uint64_t (*read_bytes)(const uint8_t *p, int64_t n);
    /* Matrices in the dense base-3 layout (m->base3): what packed_gemv / packed_gemm /
     * packed_gemv_pair (optional) are for the others, same contracts.  base3_pack: 1 if
     * lowbit_matrix_pack builds TQ1_0 / PTQ1_0 in it while this table is active (a variant that
     * decodes it in registers); the others still run such a matrix, with the reference. */
    void (*base3_gemv)(const struct lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       float *y);
    void (*base3_gemm)(const struct lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                       int64_t batch, float *y, int64_t ldy);
    lowbit_pair_fn base3_gemv_pair;
    int base3_pack;
} lowbit_kernels;

/* The active table (initialized on first use, thread-safely). */
const lowbit_kernels *lowbit_active_kernels(void);

/* Each variant fills the entries it implements and leaves the rest as they were (the dispatcher
 * starts from the scalar table, so a missing SIMD kernel falls back to the reference). */
void lowbit_fill_kernels_scalar(lowbit_kernels *k);
void lowbit_fill_kernels_avx2(lowbit_kernels *k);
void lowbit_fill_kernels_avx512vnni(lowbit_kernels *k);
void lowbit_fill_kernels_neon(lowbit_kernels *k);
void lowbit_fill_kernels_dotprod(lowbit_kernels *k);
void lowbit_fill_kquant_scalar(lowbit_kernels *k); /* ref/kquant.c, called by the scalar fill */

/* Scalar reference kernels, also callable directly by tests and by SIMD tails. */
void lowbit_quantize_act_ref(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                             float *d, int32_t *s);
void lowbit_packed_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y);
void lowbit_packed_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);
/* 1 on an x86 CPU whose vendor is Intel (CPUID leaf 0), else 0: kernels whose best software
 * prefetch differs between Intel and AMD cores pick it at registration (dispatch.c). */
int lowbit_cpu_is_intel(void);
/* The AVX2 packed GEMV (x86/kernels_avx2.c), for what the avx512vnni variant does not speed up. */
void lowbit_packed_gemv_avx2(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                             float *y);
int lowbit_type_packs(int type);
/* ---- the dense base-3 layout (ref/base3_packed.c) ---- */
/* 1 if lowbit_matrix_pack builds `type` in it: TQ1_0 / PTQ1_0 where the active table asks for it
 * (base3_pack); PYLOWBIT_BASE3=0 forces the 2-bit layout, =1 the dense one. */
int lowbit_base3_chosen(int type);
int64_t lowbit_base3_units(int64_t cols, int64_t group); /* units per row */
/* Offset in its row of the slice that plane k of unit u holds (ng groups of G), -1 if none */
int64_t lowbit_base3_slice(int64_t G, int64_t ng, int64_t u, int k);
/* Row set R from the file layout (rows row_bytes apart) */
void lowbit_base3_pack_set(lowbit_matrix *m, const uint8_t *w, int64_t row_bytes, int64_t R);
void lowbit_base3_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y);
void lowbit_base3_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           int64_t batch, float *y, int64_t ldy);
/* Row groups [rg0, rg0 + nrg) (4 rows each) of a base-3 matrix in the 2-bit layout: codes
 * dst[nrg][nchunks][4][32], scales sdst[nrg][nscales][4] */
typedef void (*lowbit_base3_decode_fn)(const lowbit_matrix *m, int64_t rg0, int64_t nrg,
                                       uint8_t *dst, uint16_t *sdst);
void lowbit_base3_decode_ref(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                             uint16_t *sdst);
/* A base-3 GEMM run by a 2-bit layout GEMM (`gemm`, a table's packed_gemm) on the rows' codes
 * decoded by `decode` into a scratch copy; the reference if that memory is not there. */
void lowbit_base3_gemm_decoded(lowbit_base3_decode_fn decode,
                               void (*gemm)(const lowbit_matrix *, int64_t, int64_t,
                                            const lowbit_act *, int64_t, float *, int64_t),
                               const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               int64_t batch, float *y, int64_t ldy);
/* ref/kquant.c: ggml's Q5_0 / Q4_K / Q6_K codes (weight order) and block decoding */
void lowbit_q5_0_codes(const lowbit_block_q5_0 *b, uint8_t codes[32]);
void lowbit_q4_k_scale_min(const uint8_t scales[12], int k, int *sc, int *m);
void lowbit_q4_k_codes(const lowbit_block_q4_k *b, uint8_t codes[256]);
void lowbit_q6_k_codes(const lowbit_block_q6_k *b, uint8_t codes[256]);
int lowbit_dequantize_kquant(int type, const uint8_t *in, int64_t nb, float *y); /* 1 if lowbit_matrix_pack builds the interleaved layout */
void lowbit_gemm_generic(lowbit_gemv_fn gemv, const void *w, int64_t row_bytes, int64_t r0,
                         int64_t r1, const lowbit_act *a, int64_t batch, float *y, int64_t ldy);

/* ---- threads ------------------------------------------------------------------------------- */

/* Run fn(ctx, i) for i in [0, ntasks) on up to `threads` threads of the persistent pool (the
 * calling thread takes part).  threads <= 0 means the library default. */
typedef void (*lowbit_task_fn)(void *ctx, int64_t i);
void lowbit_parallel_for(int64_t ntasks, lowbit_task_fn fn, void *ctx, int threads);
/* The threads lowbit_parallel_for(ntasks, ..., threads) would split its tasks over; task i of
 * slot s's range comes first in that thread: ranges [ntasks * s / n, ntasks * (s + 1) / n). */
int lowbit_pool_slots(int64_t ntasks, int threads);
/* Read-ahead: hand the pool's idle (spinning) threads up to LOWBIT_READAHEAD_MAX spans of memory
 * that the next job will read first, to prefetch (line by line, spans side by side) while the
 * caller does the work between two jobs; a job that starts stops it.  Only a hint: no effect on
 * any result. */
#define LOWBIT_READAHEAD_MAX 16
typedef struct {
    const void *p;
    int64_t n;
} lowbit_span;
void lowbit_pool_readahead(const lowbit_span *spans, int n);

#endif /* LOWBIT_INTERNAL_H */
