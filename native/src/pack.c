/* The packing module: the lowbit_matrix_* entry points, the choice of a matrix's packed layout
 * (packed.h above struct lowbit_matrix: the 2-bit row groups, rows16, dense base-3) and the
 * once-at-load packers into each.  The scalar reference kernels of the layouts are ref/. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"
#include "platform.h" /* lowbit_weights_alloc */

/* Codes (0..3, natural order) and fp16 scale of file block b of a row.  qk weights per block. */
static uint16_t file_block_codes(int type, const uint8_t *row, int64_t b, uint8_t *codes) {
    uint16_t d = 0;
    switch (type) {
    case LOWBIT_TYPE_TQ1_0: {
        const lowbit_block_tq1_0 *blk = (const lowbit_block_tq1_0 *)row + b;
        lowbit_base3_codes(256, blk->qs, blk->qh, codes);
        return blk->d;
    }
    case LOWBIT_TYPE_PTQ1_0: {
        const lowbit_block_ptq1_0 *blk = (const lowbit_block_ptq1_0 *)row + b;
        lowbit_base3_codes(128, blk->qs, blk->qh, codes);
        return blk->d;
    }
    case LOWBIT_TYPE_TQ2_0: {
        const lowbit_block_tq2_0 *blk = (const lowbit_block_tq2_0 *)row + b;
        lowbit_tq2_0_codes(blk->qs, codes);
        return blk->d;
    }
    case LOWBIT_TYPE_I2_S: lowbit_i2_s_codes(row + 32 * b, codes); return 0;
    case LOWBIT_TYPE_Q2_0: {
        const lowbit_block_q2_0 *blk = (const lowbit_block_q2_0 *)row + b;
        for (int j = 0; j < 64; j++) codes[j] = (blk->qs[j / 4] >> (2 * (j % 4))) & 3;
        memcpy(&d, &blk->d, 2);
        return d;
    }
    case LOWBIT_TYPE_PQ2_0: {
        const lowbit_block_pq2_0 *blk = (const lowbit_block_pq2_0 *)row + b;
        for (int j = 0; j < 128; j++) codes[j] = (blk->qs[j / 4] >> (2 * (j % 4))) & 3;
        memcpy(&d, &blk->d, 2);
        return d;
    }
    }
    return 0;
}

typedef struct {
    lowbit_matrix *m;
    const uint8_t *w;
    int64_t row_bytes;
} pack_job;

/* One row group (rows16: a row set): decode a row's file blocks a span at a time and write them
 * in canonical chunk bytes where the matrix's 2-bit layout places them.  A span is one block, or
 * one chunk for blocks of under 128 weights: whole chunks of at most 256 codes (qk <= 256), but
 * for a last half chunk whose missing half keeps zero codes. */
static void pack_group(void *ctx, int64_t rg) {
    const pack_job *P = (const pack_job *)ctx;
    lowbit_matrix *m = P->m;
    const int64_t qk = m->type == LOWBIT_TYPE_I2_S ? 128 : m->qk;
    const int64_t span = qk > 128 ? qk : 128, n = m->rows16 ? LOWBIT_BASE3_ROWS : LOWBIT_PACK_ROWS;
    uint8_t codes[256];
    size_t at[32]; /* byte p of a chunk: at[p] past its byte 0, the same for every chunk */
    for (int p = 0; p < 32; p++)
        at[p] = lowbit_packed_code_at(m, 0, 0, p) - lowbit_packed_code_at(m, 0, 0, 0);
    for (int64_t r = rg * n; r < (rg + 1) * n && r < m->rows; r++) {
        /* padding rows keep zero codes and zero scales */
        const uint8_t *row = P->w + r * P->row_bytes;
        for (int64_t s0 = 0; s0 < m->cols; s0 += span) {
            const int64_t have = m->cols - s0 < span ? m->cols - s0 : span;
            if (have < span) memset(codes + have, 0, (size_t)(span - have));
            for (int64_t j = 0; j < have; j += qk) {
                const int64_t b = (s0 + j) / qk;
                const uint16_t d = file_block_codes(m->type, row, b, codes + j);
                if (m->nscales) m->scales[lowbit_packed_scale_at(m, r, b)] = d;
            }
            for (int64_t c = s0 / 128; c < (s0 + span) / 128; c++) {
                const uint8_t *src = codes + 128 * c - s0;
                uint8_t *dst = m->codes + lowbit_packed_code_at(m, r, c, 0);
                for (int p = 0; p < 32; p++)
                    dst[at[p]] =
                        (uint8_t)(src[p] | src[p + 32] << 2 | src[p + 64] << 4 | src[p + 96] << 6);
            }
        }
    }
}

/* ---- the dense base-3 layout (TQ1_0, PTQ1_0) ---------------------------------------------- */

/* The inverse: period p of row r from its codes (a unit's missing plane 4 holds zeros) */
static void set_period(lowbit_matrix *m, int64_t r, int64_t p, const uint8_t *codes) {
    int64_t u0, u1 = lowbit_base3_period_units(m, p, &u0);
    static const uint8_t zeros[32], ones[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const uint8_t *none = m->base3f ? ones : zeros; /* a missing plane: weights 0 (BASE3F) */
    for (int64_t u = u0; u < u1; u++) {
        int64_t off[5];
        lowbit_base3_unit_slices(m, p, u, off);
        const uint8_t *t[5];
        for (int k = 0; k < 5; k++) t[k] = off[k] < 0 ? none : codes + off[k];
        uint8_t *dst = m->codes + lowbit_base3_unit_at(m, r, u);
        for (int j = 0; j < 32; j++) {
            const uint8_t tj[5] = {t[0][j], t[1][j], t[2][j], t[3][j], t[4][j]};
            dst[lowbit_base3_byte(j)] =
                m->base3f ? lowbit_base3f_byte(tj)
                          : (uint8_t)(84 * tj[4] + tj[0] + 3 * tj[1] + 9 * tj[2] + 27 * tj[3]);
        }
    }
}

static void pack_base3_set(lowbit_matrix *m, const uint8_t *w, int64_t row_bytes, int64_t R) {
    const int64_t qk = m->qk;
    uint8_t codes[LOWBIT_BASE3_PERIOD_CODES];
    for (int l = 0; l < LOWBIT_BASE3_ROWS; l++) {
        const int64_t r = R * LOWBIT_BASE3_ROWS + l;
        if (r >= m->rows) break; /* padding rows keep zero codes and zero scales */
        const uint8_t *row = w + r * row_bytes;
        for (int64_t p = 0; p < lowbit_base3_periods(m); p++) {
            for (int64_t b = 5 * p; b < lowbit_base3_period_groups_end(m, p); b++) {
                uint8_t *dst = codes + (b - 5 * p) * qk;
                uint16_t d;
                if (m->type == LOWBIT_TYPE_TQ1_0) {
                    const lowbit_block_tq1_0 *blk = (const lowbit_block_tq1_0 *)row + b;
                    lowbit_base3_codes(256, blk->qs, blk->qh, dst);
                    d = blk->d;
                } else {
                    const lowbit_block_ptq1_0 *blk = (const lowbit_block_ptq1_0 *)row + b;
                    lowbit_base3_codes(128, blk->qs, blk->qh, dst);
                    d = blk->d;
                }
                m->scales[lowbit_base3_scale_at(m, r, b)] = d;
            }
            set_period(m, r, p, codes);
        }
    }
}


/* ---- the rows64 layout (Q1_0) --------------------------------------------------------------- */

/* Tile T: every row's blocks as they lie in the file, each byte to its lane */
static void pack_rows64_tile(lowbit_matrix *m, const uint8_t *w, int64_t row_bytes, int64_t T) {
    for (int l = 0; l < LOWBIT_ROWS64; l++) {
        const int64_t r = T * LOWBIT_ROWS64 + l;
        if (r >= m->rows) break; /* padding rows keep zero codes and zero scales */
        const lowbit_block_q1_0 *row = (const lowbit_block_q1_0 *)(w + r * row_bytes);
        for (int64_t b = 0; b < m->nchunks; b++) {
            uint16_t d;
            memcpy(&d, &row[b].d, 2);
            m->scales[lowbit_packed_scale_at(m, r, b)] = d;
            for (int k = 0; k < 16; k++) m->codes[lowbit_rows64_code_at(m, r, b, k)] = row[b].qs[k];
        }
    }
}

/* ---- the layout choice ----------------------------------------------------------------------- */

/* PYLOWBIT_<name>=0 / =1 forces a layout off / on (tests); -1: unset */
static int forced(const char *name) {
    const char *env = getenv(name);
    return env && (env[0] == '0' || env[0] == '1') && !env[1] ? env[0] == '1' : -1;
}

/* The layout of a described packed matrix: of the base-3 formats, dense base-3 where the active
 * variant's chain has a GEMV for it, else BASE3F where it has one for that (the kernel list holds
 * a BASE3F GEMV only where it beats the 2-bit one); else rows16 where the chain has a GEMV for it,
 * else the 2-bit row groups of 4.  PYLOWBIT_BASE3 / PYLOWBIT_BASE3F / PYLOWBIT_ROWS16 =1 force
 * one; PYLOWBIT_BASE3=0 keeps both base-3 layouts off unless PYLOWBIT_BASE3F=1.  Q1_0: rows64
 * where the chain has a GEMV for it (PYLOWBIT_ROWS64 forces it on or off), else FILE: not
 * repacked; Q8_0 the same with q8rows (PYLOWBIT_Q8ROWS). */
static int choose_layout(const lowbit_matrix *m) {
    const int own = lowbit_type_file_repack(m->type);
    if (own >= 0) {
        const int f = forced(own == LOWBIT_LAYOUT_ROWS64 ? "PYLOWBIT_ROWS64" : "PYLOWBIT_Q8ROWS");
        return f == 1 || (f < 0 && lowbit_layout_has_kernel(m, own)) ? own : LOWBIT_LAYOUT_FILE;
    }
    if (lowbit_type_base3(m->type)) {
        const int f = forced("PYLOWBIT_BASE3"), ff = forced("PYLOWBIT_BASE3F");
        if (f == 1 || (f < 0 && ff < 1 && lowbit_layout_has_kernel(m, LOWBIT_LAYOUT_BASE3)))
            return LOWBIT_LAYOUT_BASE3;
        if (ff == 1 || (f < 0 && ff < 0 && lowbit_layout_has_kernel(m, LOWBIT_LAYOUT_BASE3F)))
            return LOWBIT_LAYOUT_BASE3F;
    }
    const int f = forced("PYLOWBIT_ROWS16");
    if (f == 1 || (f < 0 && lowbit_layout_has_kernel(m, LOWBIT_LAYOUT_ROWS16)))
        return LOWBIT_LAYOUT_ROWS16;
    return LOWBIT_LAYOUT_PACKED;
}

static void pack_group_any(void *ctx, int64_t rg) {
    const pack_job *P = (const pack_job *)ctx;
    if (P->m->rows64) /* rg: a tile */
        pack_rows64_tile(P->m, P->w, P->row_bytes, rg);
    else if (P->m->q8rows) /* rg: a row set (q8rows.c) */
        lowbit_q8rows_pack_set(P->m, P->w, P->row_bytes, rg);
    else if (P->m->base3) /* rg: a row set (also for rows16, in pack_group) */
        pack_base3_set(P->m, P->w, P->row_bytes, rg);
    else
        pack_group(ctx, rg);
}

/* A matrix of rows x cols of `type` described, its layout chosen (and its kernels planned if
 * `plan`), its I2_S tail read from w (NULL: none yet); *rb its file row bytes.  NULL and *status
 * on failure. */
static lowbit_matrix *new_matrix(int type, const void *w, int64_t rows, int64_t cols, int plan,
                                 int64_t *rb, int *status) {
    *status = LOWBIT_EINVAL;
    if (rows < 0 || cols < 0) return NULL;
    if (!lowbit_type_known(type) || type == LOWBIT_TYPE_Q8_K) {
        *status = LOWBIT_ETYPE;
        return NULL;
    }
    *rb = lowbit_row_bytes(type, cols);
    if (*rb < 0) {
        *status = (int)*rb;
        return NULL;
    }
    lowbit_matrix *m = (lowbit_matrix *)calloc(1, sizeof *m);
    if (!m) {
        *status = LOWBIT_ENOMEM;
        return NULL;
    }
    lowbit_matrix_describe(type, cols, m);
    m->rows = rows;
    m->w = w;
    m->tensor_scale = 1.0f;
    if (type == LOWBIT_TYPE_I2_S && w) {
        memcpy(m->tail, (const uint8_t *)w + rows * *rb, sizeof m->tail);
        memcpy(&m->tensor_scale, m->tail, 4);
    }
    const int layout = m->packed && rows ? choose_layout(m) : LOWBIT_LAYOUT_FILE;
    if (layout == LOWBIT_LAYOUT_FILE) {
        m->packed = 0, m->qk = m->nchunks = m->nscales = 0;
    } else {
        lowbit_matrix_set_layout(m, layout);
        if (plan) lowbit_plan_packed(m);
        m->nbytes = lowbit_packed_code_bytes(m) + lowbit_packed_scale_bytes(m);
    }
    *status = LOWBIT_OK;
    return m;
}

/* Packs the file rows w into m's zeroed codes and scales */
static void fill(lowbit_matrix *m, const void *w, int64_t rb, int threads) {
    const int sets = m->base3 || m->rows16 || m->q8rows; /* rows in sets of LOWBIT_BASE3_ROWS */
    const int64_t n = m->rows64 ? (m->rows + LOWBIT_ROWS64 - 1) / LOWBIT_ROWS64
                      : sets    ? (m->rows + LOWBIT_BASE3_ROWS - 1) / LOWBIT_BASE3_ROWS
                                : lowbit_packed_row_groups(m);
    pack_job P = {m, (const uint8_t *)w, rb};
    lowbit_parallel_for(n, pack_group_any, &P, threads);
}

lowbit_matrix *lowbit_matrix_pack(int type, const void *w, int64_t rows, int64_t cols,
                                  int threads, int *status) {
    int st_local;
    if (!status) status = &st_local;
    int64_t rb;
    lowbit_matrix *m = w ? new_matrix(type, w, rows, cols, 1, &rb, status) : NULL;
    if (!w) *status = LOWBIT_EINVAL;
    if (!m || !m->packed) return m; /* the file layout, borrowed */
    /* 64-byte alignment: a 4-row chunk tile (128 bytes) never straddles a cache line.  Huge pages
     * where the system grants them (lowbit_weights_alloc), asked before the first touch: streamed
     * once per token, 4 KB pages cost a TLB miss every 4 KB (docs/PERFORMANCE.md#huge-pages).
     * 64 bytes of slack past the scales, zero. */
    const size_t total = (size_t)m->nbytes + 64;
    void *mem = lowbit_weights_alloc(total);
    if (!mem) {
        free(m);
        *status = LOWBIT_ENOMEM;
        return NULL;
    }
    memset(mem, 0, total);
    m->codes = (uint8_t *)mem;
    m->scales = (uint16_t *)(m->codes + lowbit_packed_code_bytes(m));
    fill(m, w, rb, threads);
    return m;
}

/* ---- packing into a caller's buffer ---------------------------------------------------------- */

/* The header of lowbit_matrix_pack_into's bytes: what lowbit_matrix_wrap needs to read them back
 * (their layout was chosen by the CPU and the overrides at packing time, not at wrapping time). */
typedef struct {
    char magic[8];
    int32_t type, layout;
    int64_t rows, cols;
    uint8_t tail[32]; /* I2_S: the file's tail (its tensor scale first) */
} packed_header;
typedef char packed_header_is_64_bytes[sizeof(packed_header) == LOWBIT_PACKED_HEADER ? 1 : -1];
static const char MAGIC[8] = {'l', 'o', 'w', 'b', 'i', 't', 'P', '1'};

static int layout_of(const lowbit_matrix *m) {
    return m->base3f ? LOWBIT_LAYOUT_BASE3F : m->base3 ? LOWBIT_LAYOUT_BASE3
         : m->rows16 ? LOWBIT_LAYOUT_ROWS16 : m->rows64 ? LOWBIT_LAYOUT_ROWS64
         : m->q8rows ? LOWBIT_LAYOUT_Q8ROWS : LOWBIT_LAYOUT_PACKED;
}

int64_t lowbit_matrix_packed_nbytes(int type, int64_t rows, int64_t cols) {
    int st;
    int64_t rb;
    lowbit_matrix *m = new_matrix(type, NULL, rows, cols, 0, &rb, &st); /* sizes only */
    if (!m) return st;
    const int64_t n = m->packed ? LOWBIT_PACKED_HEADER + m->nbytes + 64 : 0;
    free(m);
    return n;
}

/* Points a borrowing matrix's codes and scales into buf, past the header */
static void borrow(lowbit_matrix *m, void *buf) {
    m->borrowed = 1;
    m->codes = (uint8_t *)buf + LOWBIT_PACKED_HEADER;
    m->scales = (uint16_t *)(m->codes + lowbit_packed_code_bytes(m));
}

lowbit_matrix *lowbit_matrix_pack_into(int type, const void *w, int64_t rows, int64_t cols,
                                       void *dst, int64_t dst_bytes, int threads, int *status) {
    int st_local;
    if (!status) status = &st_local;
    *status = LOWBIT_EINVAL;
    if (!w || !dst || dst_bytes < 0 || (uintptr_t)dst % LOWBIT_PACKED_ALIGN) return NULL;
    int64_t rb;
    lowbit_matrix *m = new_matrix(type, w, rows, cols, 1, &rb, status);
    if (!m) return NULL;
    if (!m->packed || LOWBIT_PACKED_HEADER + m->nbytes + 64 > dst_bytes) {
        /* a type that is not repacked (here: Q1_0 without a rows64 GEMV,
         * Q8_0 without a q8rows one); an empty matrix
         * or a buffer too small */
        *status = !lowbit_type_packs(type) || (rows && cols && !m->packed) ? LOWBIT_ETYPE : LOWBIT_ESIZE;
        free(m);
        return NULL;
    }
    memset(dst, 0, (size_t)(LOWBIT_PACKED_HEADER + m->nbytes + 64));
    packed_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    h.type = type, h.layout = layout_of(m), h.rows = rows, h.cols = cols;
    memcpy(h.tail, m->tail, sizeof h.tail);
    memcpy(dst, &h, sizeof h);
    borrow(m, dst);
    fill(m, w, rb, threads);
    return m;
}

lowbit_matrix *lowbit_matrix_wrap(const void *packed, int64_t nbytes, int *status) {
    int st_local;
    if (!status) status = &st_local;
    *status = LOWBIT_EINVAL;
    packed_header h;
    if (!packed || nbytes < LOWBIT_PACKED_HEADER || (uintptr_t)packed % LOWBIT_PACKED_ALIGN)
        return NULL;
    memcpy(&h, packed, sizeof h);
    const int L = h.layout;
    if (memcmp(h.magic, MAGIC, sizeof MAGIC) || !lowbit_type_known(h.type) ||
        !lowbit_type_packs(h.type) || h.rows <= 0 || h.cols <= 0 || h.rows > INT32_MAX ||
        h.cols > INT32_MAX || h.rows * h.cols > (INT64_C(1) << 56) || /* sizes cannot overflow */
        !lowbit_type_file_repack_fits(h.type, L) ||
        (L != LOWBIT_LAYOUT_PACKED && L != LOWBIT_LAYOUT_ROWS16 && L != LOWBIT_LAYOUT_ROWS64 &&
         L != LOWBIT_LAYOUT_Q8ROWS &&
         ((L != LOWBIT_LAYOUT_BASE3 && L != LOWBIT_LAYOUT_BASE3F) || !lowbit_type_base3(h.type))))
        return NULL;
    lowbit_matrix *m = (lowbit_matrix *)calloc(1, sizeof *m);
    if (!m) {
        *status = LOWBIT_ENOMEM;
        return NULL;
    }
    if (lowbit_matrix_describe(h.type, h.cols, m) != LOWBIT_OK || !m->packed ||
        lowbit_row_bytes(h.type, h.cols) < 0) {
        free(m);
        return NULL;
    }
    m->rows = h.rows;
    memcpy(m->tail, h.tail, sizeof m->tail);
    m->tensor_scale = 1.0f;
    if (h.type == LOWBIT_TYPE_I2_S) memcpy(&m->tensor_scale, m->tail, 4);
    lowbit_matrix_set_layout(m, L);
    m->nbytes = lowbit_packed_code_bytes(m) + lowbit_packed_scale_bytes(m);
    if (LOWBIT_PACKED_HEADER + m->nbytes + 64 > nbytes) {
        free(m);
        *status = LOWBIT_ESIZE;
        return NULL;
    }
    lowbit_plan_packed(m);
    borrow(m, (void *)(uintptr_t)packed); /* read only: no kernel writes the codes */
    *status = LOWBIT_OK;
    return m;
}

void lowbit_matrix_free(lowbit_matrix *m) {
    if (!m) return;
    if (m->codes && !m->borrowed) lowbit_weights_free(m->codes, (size_t)m->nbytes + 64); /* the size allocated */
    free(m);
}

int64_t lowbit_matrix_nbytes(const lowbit_matrix *m) {
    return m ? (m->borrowed ? 0 : m->nbytes) : LOWBIT_EINVAL;
}
int lowbit_matrix_is_packed(const lowbit_matrix *m) { return m ? m->packed : LOWBIT_EINVAL; }
int64_t lowbit_matrix_rows(const lowbit_matrix *m) { return m ? m->rows : LOWBIT_EINVAL; }
int64_t lowbit_matrix_cols(const lowbit_matrix *m) { return m ? m->cols : LOWBIT_EINVAL; }
int lowbit_matrix_type(const lowbit_matrix *m) { return m ? m->type : LOWBIT_EINVAL; }
