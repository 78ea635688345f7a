/* The packed (row-interleaved) matrix: its layouts, their geometry (pure inline functions, the one
 * place a byte's address is computed), the predicates its kernels are chosen by, and who builds
 * and reads it: pack.c (the packers and the layout choice), ref/ (the scalar references). */
#ifndef LOWBIT_PACKED_H
#define LOWBIT_PACKED_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "act_rules.h"
#include "kernel_table.h"
#include "lowbit/lowbit.h"

/* ---- packed matrices (pack.c) ------------------------------------------------------------------
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
 * registers takes the dense layout below instead).  Q1_0 and Q8_0 keep their file bytes in layouts
 * of their own where the variant has kernels for them (rows64, q8rows below); other types (F16,
 * F32, and those two elsewhere) are not repacked: the matrix borrows the caller's buffer and runs
 * the file-layout kernels. */
#define LOWBIT_PACK_ROWS 4
/* The dense base-3 layout (TQ1_0 / PTQ1_0 where the active variant has a kernel for it: pack.c's
 * choice; its reference ref/base3_packed.c): the file's density, 5 trits a byte, rows in sets of
 * LOWBIT_BASE3_ROWS (padded with zero rows), stored so that one 64-byte vector holds 4 bytes of
 * each of 16 rows:
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
 * ng % 5 groups take S/4 units each, planes 0..3 (plane 4 holds zeros): 2 bits a weight there.
 * Its kernels are the list's BASE3 layout entries.
 *
 * The BASE3F layout has the same geometry (the functions below serve both) and another byte: the
 * trits as the leading base-3 digits of a fraction, as TQ1_0's qs bytes hold them, centred --
 * byte p = ceil(v * 256 / 243) - 128 (two's complement) with v = 81 t0 + 27 t1 + 9 t2 + 3 t3 + t4
 * -- so that s_0 = the byte, s_k+1 = 3 s_k (mod 256, a byte add twice) and weight k is
 * [s_k > 42] - [s_k < -42]: one compare pair a plane, no table (AVX2, NEON; lowbit_base3f_*).
 * A missing plane 4 holds trit 1 (weight 0). */
#define LOWBIT_BASE3_ROWS 16
/* The BASE3F byte of trits t[0..4] (codes 0..2) and trit k of such a byte */
static inline uint8_t lowbit_base3f_byte(const uint8_t t[5]) {
    const int v = 81 * t[0] + 27 * t[1] + 9 * t[2] + 3 * t[3] + t[4];
    return (uint8_t)((v * 256 + 242) / 243 - 128);
}
static inline int lowbit_base3f_trit(uint8_t b, int k) {
    uint8_t s = b;
    for (int i = 0; i < k; i++) s = (uint8_t)(3 * s);
    const int8_t v = (int8_t)s;
    return v > 42 ? 2 : v < -42 ? 0 : 1;
}
/* The rows16 layout (2-bit matrices where the active variant has a GEMV for it: Q2_0, PQ2_0, TQ2_0; its
 * reference ref/rows16_packed.c): the canonical layout's 2-bit chunk bytes, rows in sets of
 * LOWBIT_BASE3_ROWS stored as the dense base-3 layout stores its units, so that one 64-byte vector holds 4 bytes of each of 16
 * rows and a kernel's lane is a row without a transpose:
 *
 *   codes[R][c][j][l][4]  row set R (rows 16R..16R+15, padded with zero rows), 128-weight chunk
 *                         c, bytes 4j..4j+3 (j = 0..7) of the canonical 32-byte chunk of row
 *                         16R + l (a last half chunk too: its planes 2, 3 are zero).
 *   scales[R][b][l]       fp16 scale of block b of row 16R + l: a block's 16 scales one 32-byte run.
 *
 * lowbit_packed_code_at / lowbit_packed_scale_at below place a byte in either 2-bit layout. */
/* The rows64 layout (Q1_0 where the active variant has a GEMV for it; its reference
 * ref/rows64_packed.c): the file's bytes, rows in tiles of LOWBIT_ROWS64 (padded with zero rows),
 * each code byte of a block stored for the tile's 64 rows side by side, so that one 64-byte
 * vector holds byte k of every row (a byte lane a row) and a table lookup serves 64 rows with no
 * transpose:
 *
 *   codes[T][b][k][e]  tile T (rows 64T..64T+63), block b, byte k (weights 8k..8k+7, bit t weight
 *                      8k + t, as qs[k] holds them) of row 64T + lowbit_rows64_row(e).
 *   scales[T][b][l]    fp16 scale of block b of row 64T + l: a block's 64 scales one 128-byte run.
 *
 * Lane e's row is the one a kernel's interleaving byte sums (two byte unpacks, then even and odd
 * dwords) bring to dword l % 16 of output vector l / 16, so results come out in row order. */
#define LOWBIT_ROWS64 64
static inline int lowbit_rows64_row(int e) {
    const int r = e % 16, v = 2 * (r / 8) + r % 2;
    return 16 * v + 4 * (e / 16) + (r % 8) / 2;
}
static inline int lowbit_rows64_lane(int l) {
    const int v = l / 16;
    return 16 * (l % 16 / 4) + 8 * (v / 2) + 2 * (l % 4) + v % 2;
}
/* The q8rows layout (Q8_0 where the active variant has a GEMV for it; its reference
 * ref/q8rows_packed.c, its packer and row reader q8rows.c): the file's bytes in row sets of
 * LOWBIT_BASE3_ROWS (padded with zero rows), so that one 64-byte vector holds 4 codes of each of
 * 16 rows, a lane a row:
 *
 *   codes[R][b][j][l][4]  row set R, 32-weight block b, codes 4j..4j+3 (j = 0..7) of block b of
 *                         row 16R + l, each stored as w ^ 0x80 = w + 128 (0..255: vpdpbusd's
 *                         unsigned operand, so the activation quad is the signed one).
 *   scales[R][b][l]       fp16 scale of block b of row 16R + l: a block's 16 scales one 32-byte run.
 *
 * lowbit_q8rows_code_at / lowbit_q8rows_scale_at below place a byte. */
/* lowbit_matrix_pack_into's buffer starts with a header of this many bytes (pack.c: the type,
 * shape and layout lowbit_matrix_wrap reads back), then the codes and scales, then 64 bytes of
 * slack: the codes stay LOWBIT_PACKED_ALIGN-aligned. */
#define LOWBIT_PACKED_HEADER 64
struct lowbit_matrix {
    int type, kidx;
    int packed;           /* 1: canonical interleaved copy; 0: borrows `w` in the file layout */
    int base3;            /* packed in the dense base-3 geometry (above), not the 2-bit one */
    int base3f;           /* base3 with BASE3F bytes (above) */
    int rows16;           /* the 2-bit codes in the rows16 layout (above), not row groups of 4 */
    int rows64;           /* Q1_0 in the rows64 layout (above) */
    int q8rows;           /* Q8_0 in the q8rows layout (above) */
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
    uint8_t tail[32];     /* I2_S: the file's 32 bytes after the codes, as read (unpack) */
    int64_t nbytes;       /* bytes of codes + scales (owned unless `borrowed`) */
    int borrowed;         /* codes and scales lie in a caller's buffer (pack_into, wrap) */
    lowbit_packed_plan plan[LOWBIT_ISA_COUNT]; /* per usable variant, lowbit_plan_packed */
};

/* ---- geometry ------------------------------------------------------------------------------ */

/* The layout a type read in the file layout is repacked into where a variant has kernels for it
 * (ROWS64: Q1_0, Q8ROWS: Q8_0), -1 for the other types */
static inline int lowbit_type_file_repack(int type) {
    return type == LOWBIT_TYPE_Q1_0 ? LOWBIT_LAYOUT_ROWS64
           : type == LOWBIT_TYPE_Q8_0 ? LOWBIT_LAYOUT_Q8ROWS
                                      : -1;
}
/* 0 if `layout` cannot hold `type` for that reason: those two types have no other packed layout,
 * and those layouts hold no other type */
static inline int lowbit_type_file_repack_fits(int type, int layout) {
    const int own = lowbit_type_file_repack(type);
    return own >= 0 ? layout == own : layout != LOWBIT_LAYOUT_ROWS64 && layout != LOWBIT_LAYOUT_Q8ROWS;
}

/* 1 for the base-3 formats the dense layout holds (TQ1_0, PTQ1_0) */
static inline int lowbit_type_base3(int type) {
    return type == LOWBIT_TYPE_TQ1_0 || type == LOWBIT_TYPE_PTQ1_0;
}

/* The shape fields of the matrix lowbit_matrix_pack makes of rows of `cols` weights of `type`
 * (no rows, no data, no plan; packed = 0 for the borrowed file layout, the 2-bit row groups of 4
 * otherwise): what the kernel predicates read.  LOWBIT_OK or LOWBIT_ETYPE. */
static inline int lowbit_matrix_describe(int type, int64_t cols, lowbit_matrix *m) {
    memset(m, 0, sizeof *m);
    if (!lowbit_type_known(type) || type == LOWBIT_TYPE_Q8_K || cols < 0) return LOWBIT_ETYPE;
    m->type = type;
    m->kidx = lowbit_kernel_index(type);
    m->cols = cols;
    m->group = lowbit_act_group(type);
    if (!lowbit_type_packs(type) || cols == 0) return LOWBIT_OK;
    m->packed = 1;
    m->qk = type == LOWBIT_TYPE_I2_S ? 0 : lowbit_type_block_size(type);
    m->nchunks = (cols + 127) / 128;
    m->nscales = m->qk ? cols / m->qk : 0;
    return LOWBIT_OK;
}

/* Units of a dense base-3 row: every 5 groups of S = group / 32 slices take S units, the last
 * ng % 5 groups S / 4 each */
static inline int64_t lowbit_base3_units(int64_t cols, int64_t group) {
    const int64_t S = group / 32, ng = cols / group;
    return ng / 5 * S + ng % 5 * (S / 4);
}

/* Sets a described packed matrix's layout fields: LOWBIT_LAYOUT_PACKED, _BASE3, _BASE3F, _ROWS16
 * or _ROWS64 */
static inline void lowbit_matrix_set_layout(lowbit_matrix *m, int layout) {
    m->base3 = layout == LOWBIT_LAYOUT_BASE3 || layout == LOWBIT_LAYOUT_BASE3F;
    m->base3f = layout == LOWBIT_LAYOUT_BASE3F;
    m->rows16 = layout == LOWBIT_LAYOUT_ROWS16;
    m->rows64 = layout == LOWBIT_LAYOUT_ROWS64;
    m->q8rows = layout == LOWBIT_LAYOUT_Q8ROWS;
    m->nunits = m->base3 ? lowbit_base3_units(m->cols, m->group) : 0;
}

/* Bytes of codes per LOWBIT_PACK_ROWS rows (a row group; base3: a quarter of a row set) */
static inline int64_t lowbit_packed_group_bytes(const lowbit_matrix *m) {
    if (m->rows64) return m->nchunks * LOWBIT_PACK_ROWS * 16; /* 1 bit a weight */
    if (m->q8rows) return m->cols * LOWBIT_PACK_ROWS;
    return (m->base3 ? m->nunits : m->nchunks) * LOWBIT_PACK_ROWS * 32;
}

/* Bytes of codes and of scales of a packed matrix of m->rows rows in its layout: whole row
 * groups of 4 (row sets of 16 for the dense base-3 and rows16 layouts, tiles of 64 for rows64),
 * padding rows included. */
static inline int64_t lowbit_packed_row_groups(const lowbit_matrix *m) {
    if (m->rows64)
        return (m->rows + LOWBIT_ROWS64 - 1) / LOWBIT_ROWS64 * (LOWBIT_ROWS64 / LOWBIT_PACK_ROWS);
    if (m->base3 || m->rows16 || m->q8rows)
        return (m->rows + LOWBIT_BASE3_ROWS - 1) / LOWBIT_BASE3_ROWS * (LOWBIT_BASE3_ROWS / LOWBIT_PACK_ROWS);
    return (m->rows + LOWBIT_PACK_ROWS - 1) / LOWBIT_PACK_ROWS;
}
static inline int64_t lowbit_packed_code_bytes(const lowbit_matrix *m) {
    return lowbit_packed_row_groups(m) * lowbit_packed_group_bytes(m);
}
static inline int64_t lowbit_packed_scale_bytes(const lowbit_matrix *m) {
    return lowbit_packed_row_groups(m) * m->nscales * LOWBIT_PACK_ROWS * 2;
}

/* Offset in m->codes of byte p (0..31) of 128-weight chunk c of row r, and in m->scales of the
 * scale of block b of row r, in the 2-bit layout m holds (canonical or rows16). */
static inline size_t lowbit_packed_code_at(const lowbit_matrix *m, int64_t r, int64_t c, int p) {
    if (m->rows16)
        return (size_t)(((r / LOWBIT_BASE3_ROWS * m->nchunks + c) * 8 + p / 4) * 64 +
                        r % LOWBIT_BASE3_ROWS * 4 + p % 4);
    return (size_t)(((r / LOWBIT_PACK_ROWS * m->nchunks + c) * LOWBIT_PACK_ROWS + r % LOWBIT_PACK_ROWS) * 32 + p);
}
static inline size_t lowbit_packed_scale_at(const lowbit_matrix *m, int64_t r, int64_t b) {
    const int64_t n = m->rows64 ? LOWBIT_ROWS64 : m->rows16 ? LOWBIT_BASE3_ROWS : LOWBIT_PACK_ROWS;
    return (size_t)((r / n * m->nscales + b) * n + r % n);
}
/* rows64: offset in m->codes of code byte k (0..15) of block b of row r */
static inline size_t lowbit_rows64_code_at(const lowbit_matrix *m, int64_t r, int64_t b, int k) {
    return (size_t)(((r / LOWBIT_ROWS64 * m->nchunks + b) * 16 + k) * LOWBIT_ROWS64 +
                    lowbit_rows64_lane((int)(r % LOWBIT_ROWS64)));
}

/* Offset in m->codes of code p (0..31) of block b of row r, and in m->scales of its scale
 * (q8rows) */
static inline size_t lowbit_q8rows_code_at(const lowbit_matrix *m, int64_t r, int64_t b, int p) {
    return (size_t)(((r / LOWBIT_BASE3_ROWS * m->nscales + b) * 8 + p / 4) * 64 +
                    r % LOWBIT_BASE3_ROWS * 4 + p % 4);
}
static inline size_t lowbit_q8rows_scale_at(const lowbit_matrix *m, int64_t r, int64_t b) {
    return (size_t)((r / LOWBIT_BASE3_ROWS * m->nscales + b) * LOWBIT_BASE3_ROWS +
                    r % LOWBIT_BASE3_ROWS);
}

/* The dense base-3 layout: offset in its row of the slice that plane k of unit u holds (ng groups
 * of G), -1 if none */
static inline int64_t lowbit_base3_slice(int64_t G, int64_t ng, int64_t u, int k) {
    const int64_t S = G / 32, per = S / 4; /* units per period, units per group (planes 0..3) */
    const int64_t p = u / S, uu = u % S;
    if (k < 4) return (5 * p + uu / per) * G + (4 * (uu % per) + k) * 32;
    if (5 * p + 4 >= ng) return -1; /* the tail's units have no plane 4 */
    return (5 * p + 4) * G + uu * 32;
}
/* Where byte p of unit u of row r sits: lowbit_base3_unit_at(m, r, u) + lowbit_base3_byte(p);
 * and the scale of block b of row r */
static inline size_t lowbit_base3_unit_at(const lowbit_matrix *m, int64_t r, int64_t u) {
    const int64_t R = r / LOWBIT_BASE3_ROWS, l = r % LOWBIT_BASE3_ROWS;
    return (size_t)((R * m->nunits + u) * 8 * 64 + l * 4);
}
static inline size_t lowbit_base3_byte(int p) { return (size_t)(p / 4 * 64 + p % 4); }
static inline size_t lowbit_base3_scale_at(const lowbit_matrix *m, int64_t r, int64_t b) {
    const int64_t R = r / LOWBIT_BASE3_ROWS, l = r % LOWBIT_BASE3_ROWS;
    return (size_t)((R * m->nscales + b) * LOWBIT_BASE3_ROWS + l);
}
/* A period: the 5 groups (the tail: the last ng % 5) whose codes units [p S, (p + 1) S) hold
 * (lowbit_base3_slice); G <= 256 bounds its codes.  Group = scale block in both formats. */
#define LOWBIT_BASE3_PERIOD_CODES (5 * 256)
static inline int64_t lowbit_base3_periods(const lowbit_matrix *m) {
    return (m->cols / m->group + 4) / 5;
}
/* Units [*u0, returned) of period p */
static inline int64_t lowbit_base3_period_units(const lowbit_matrix *m, int64_t p, int64_t *u0) {
    const int64_t S = m->group / 32, u1 = (p + 1) * S;
    *u0 = p * S;
    return u1 < m->nunits ? u1 : m->nunits;
}
/* Groups [5 p, returned) of period p */
static inline int64_t lowbit_base3_period_groups_end(const lowbit_matrix *m, int64_t p) {
    const int64_t ng = m->cols / m->group;
    return 5 * p + 5 < ng ? 5 * p + 5 : ng;
}
/* Where in its period's codes plane k of unit u of period p starts, -1 if the unit has none */
static inline void lowbit_base3_unit_slices(const lowbit_matrix *m, int64_t p, int64_t u,
                                            int64_t off[5]) {
    const int64_t G = m->group, ng = m->cols / G;
    for (int k = 0; k < 5; k++) {
        const int64_t o = lowbit_base3_slice(G, ng, u, k);
        off[k] = o < 0 ? -1 : o - 5 * p * G;
    }
}

/* The packed GEMV variant `isa` planned for m: pair kernels run it on the rows they leave over. */
#define LOWBIT_PLANNED_GEMV(m, isa) ((m)->plan[isa].gemv)

/* ---- the predicates ------------------------------------------------------------------------ */

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

/* ---- who builds and reads it ---------------------------------------------------------------- */

/* dispatch.c: 1 if the active variant's chain has a GEMV other than the reference for m in packed
 * `layout` (BASE3, ROWS16, ROWS64), by the kernel list's entries: the layout pays there (pack.c). */
int lowbit_layout_has_kernel(const lowbit_matrix *m, int layout);

/* ref/base3_packed.c, ref/rows16_packed.c: the scalar references of the dense base-3 and the
 * rows16 layouts (ref/packed.c's lowbit_packed_gemv_ref / _gemm_ref read either 2-bit layout) */
void lowbit_base3_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y);
void lowbit_base3_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           int64_t batch, float *y, int64_t ldy);
void lowbit_base3f_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y);
void lowbit_base3f_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);
/* ref/codecs.c: the codes (0..3, weight order) of one file block of a base-3 format (qk 256:
 * TQ1_0, 128: PTQ1_0), TQ2_0 and I2_S (a 32-byte group), and the block bytes of such codes: what
 * pack.c reads and unpack.c writes. */
void lowbit_base3_codes(int qk, const uint8_t *qs, const uint8_t *qh, uint8_t *codes);
void lowbit_tq2_0_codes(const uint8_t *qs, uint8_t *codes);
void lowbit_i2_s_codes(const uint8_t *qs, uint8_t *codes);
void lowbit_base3_encode(int qk, const uint8_t *codes, uint8_t *qs, uint8_t *qh);
void lowbit_tq2_0_encode(const uint8_t *codes, uint8_t *qs);
void lowbit_i2_s_encode(const uint8_t *codes, uint8_t *qs);

/* ... and how they read a row back: the codes (0..3) of 128-weight chunk c of row r in either
 * 2-bit layout, weight order (ref/packed.c); the codes (0..2) of period p of row r in the dense
 * base-3 layouts, codes[j] weight 5 p G + j (ref/base3_packed.c).  unpack.c writes the file
 * layout back from them. */
void lowbit_packed_chunk_codes(const lowbit_matrix *m, int64_t r, int64_t c, uint8_t codes[128]);
void lowbit_base3_period_codes(const lowbit_matrix *m, int64_t r, int64_t p, uint8_t *codes);
void lowbit_rows16_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y);
void lowbit_rows16_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);

/* ref/rows64_packed.c: the rows64 layout's scalar references, and file block b of row r read back
 * from it (what unpack.c writes) */
void lowbit_rows64_block(const lowbit_matrix *m, int64_t r, int64_t b, lowbit_block_q1_0 *blk);
void lowbit_rows64_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y);
void lowbit_rows64_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);
/* The q8rows layout (q8rows.c): row set R of the file rows w (row_bytes apart) packed into m's
 * codes and scales; row r's file bytes back.  Its scalar references (ref/q8rows_packed.c), bit
 * for bit the file layout's (ref/dot.c). */
void lowbit_q8rows_pack_set(lowbit_matrix *m, const uint8_t *w, int64_t row_bytes, int64_t R);
void lowbit_q8rows_row(const lowbit_matrix *m, int64_t r, uint8_t *row);
void lowbit_q8rows_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y);
void lowbit_q8rows_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy);

/* gemm_decoded.c: a base-3 (or rows16) GEMM run by a canonical 2-bit layout GEMM (`gemm`) on the
 * rows' codes decoded by `decode` into a scratch copy; the layout's reference if that memory is
 * not there.  `decode` writes row groups [rg0, rg0 + nrg) (4 rows each) in the 2-bit layout:
 * codes dst[nrg][nchunks][4][32], scales sdst[nrg][nscales][4]. */
typedef void (*lowbit_base3_decode_fn)(const lowbit_matrix *m, int64_t rg0, int64_t nrg,
                                       uint8_t *dst, uint16_t *sdst);
/* A decode's scales from row set R (the dense base-3 and rows16 layouts): those of its row groups
 * in [rg0, rg0 + nrg), into sdst as above */
static inline void lowbit_set_scales_decoded(const lowbit_matrix *m, int64_t R, int64_t rg0,
                                             int64_t nrg, uint16_t *sdst) {
    for (int l = 0; l < LOWBIT_BASE3_ROWS; l++) {
        const int64_t g = R * (LOWBIT_BASE3_ROWS / 4) + l / 4 - rg0;
        if (g < 0 || g >= nrg) continue;
        for (int64_t b = 0; b < m->nscales; b++)
            sdst[(g * m->nscales + b) * 4 + l % 4] =
                m->scales[lowbit_base3_scale_at(m, LOWBIT_BASE3_ROWS * R + l, b)];
    }
}
void lowbit_base3_gemm_decoded(lowbit_base3_decode_fn decode,
                               void (*gemm)(const lowbit_matrix *, int64_t, int64_t,
                                            const lowbit_act *, int64_t, float *, int64_t),
                               const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               int64_t batch, float *y, int64_t ldy);

#endif /* LOWBIT_PACKED_H */
