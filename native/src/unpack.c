/* The inverse of the packers (pack.c): a packed matrix's file layout written back, for a runtime
 * that keeps only the packed copy and still saves the portable bytes.  A row is read through the
 * scalar references' readers (ref/packed.c, ref/base3_packed.c, ref/rows64_packed.c) and each file block encoded by
 * ref/codecs.c's encoders: no layout is spelled out twice. */
#include <stdlib.h>

#include "internal.h"

/* File block b of a row from its codes (0..3, weight order) and fp16 scale: the inverse of
 * pack.c's file_block_codes.  (I2_S: a 32-byte group, no scale.) */
static void file_block_put(int type, uint8_t *row, int64_t b, const uint8_t *codes, uint16_t d) {
    switch (type) {
    case LOWBIT_TYPE_TQ1_0: {
        lowbit_block_tq1_0 *blk = (lowbit_block_tq1_0 *)row + b;
        lowbit_base3_encode(256, codes, blk->qs, blk->qh);
        blk->d = d;
        return;
    }
    case LOWBIT_TYPE_PTQ1_0: {
        lowbit_block_ptq1_0 *blk = (lowbit_block_ptq1_0 *)row + b;
        lowbit_base3_encode(128, codes, blk->qs, blk->qh);
        blk->d = d;
        return;
    }
    case LOWBIT_TYPE_TQ2_0: {
        lowbit_block_tq2_0 *blk = (lowbit_block_tq2_0 *)row + b;
        lowbit_tq2_0_encode(codes, blk->qs);
        blk->d = d;
        return;
    }
    case LOWBIT_TYPE_I2_S: lowbit_i2_s_encode(codes, row + 32 * b); return;
    case LOWBIT_TYPE_Q2_0:
    case LOWBIT_TYPE_PQ2_0: {
        const int qk = type == LOWBIT_TYPE_Q2_0 ? 64 : 128;
        uint8_t *blk = row + b * (2 + qk / 4); /* fp16 d, then qs (formats.h) */
        memcpy(blk, &d, 2);
        memset(blk + 2, 0, (size_t)qk / 4);
        for (int j = 0; j < qk; j++) blk[2 + j / 4] |= (uint8_t)((codes[j] & 3) << (2 * (j % 4)));
        return;
    }
    }
}

typedef struct {
    const lowbit_matrix *m;
    uint8_t *out;
    int64_t row_bytes, rows_per_task;
} unpack_job;

/* Rows of the dense base-3 layouts: a period's codes at a time, 5 blocks (= groups) each */
static void unpack_base3_row(const lowbit_matrix *m, int64_t r, uint8_t *row) {
    uint8_t codes[LOWBIT_BASE3_PERIOD_CODES];
    for (int64_t p = 0; p < lowbit_base3_periods(m); p++) {
        lowbit_base3_period_codes(m, r, p, codes);
        for (int64_t b = 5 * p; b < lowbit_base3_period_groups_end(m, p); b++)
            file_block_put(m->type, row, b, codes + (b - 5 * p) * m->qk,
                           m->scales[lowbit_base3_scale_at(m, r, b)]);
    }
}

/* Rows of the 2-bit layouts: a span of whole chunks at a time (one block, or one chunk for
 * blocks under 128 weights), as pack_group packed them */
static void unpack_2bit_row(const lowbit_matrix *m, int64_t r, uint8_t *row) {
    const int64_t qk = m->type == LOWBIT_TYPE_I2_S ? 128 : m->qk;
    const int64_t span = qk > 128 ? qk : 128;
    uint8_t codes[256];
    for (int64_t s0 = 0; s0 < m->cols; s0 += span) {
        for (int64_t c = s0 / 128; c < (s0 + span) / 128 && c < m->nchunks; c++)
            lowbit_packed_chunk_codes(m, r, c, codes + 128 * c - s0);
        const int64_t have = m->cols - s0 < span ? m->cols - s0 : span;
        for (int64_t j = 0; j < have; j += qk) {
            const int64_t b = (s0 + j) / qk;
            file_block_put(m->type, row, b, codes + j,
                           m->nscales ? m->scales[lowbit_packed_scale_at(m, r, b)] : 0);
        }
    }
}

/* Row r of a packed matrix in the file layout */
static void unpack_row(const lowbit_matrix *m, int64_t r, uint8_t *row) {
    if (m->rows64) /* Q1_0: its blocks as they were */
        for (int64_t b = 0; b < m->nchunks; b++)
            lowbit_rows64_block(m, r, b, (lowbit_block_q1_0 *)row + b);
    else if (m->q8rows)
        lowbit_q8rows_row(m, r, row); /* q8rows.c */
    else if (m->base3)
        unpack_base3_row(m, r, row);
    else
        unpack_2bit_row(m, r, row);
}

static void unpack_task(void *ctx, int64_t t) {
    const unpack_job *U = (const unpack_job *)ctx;
    for (int64_t r = t * U->rows_per_task; r < (t + 1) * U->rows_per_task && r < U->m->rows; r++)
        unpack_row(U->m, r, U->out + r * U->row_bytes);
}

int lowbit_matrix_unpack(const lowbit_matrix *m, void *file_bytes, int64_t nbytes, int threads) {
    if (!m || !file_bytes) return LOWBIT_EINVAL;
    const int64_t need = lowbit_tensor_bytes(m->type, m->rows * m->cols);
    if (need < 0) return (int)need;
    if (nbytes != need) return LOWBIT_ESIZE;
    if (!m->packed) { /* borrowed as it is (a type not repacked, an empty matrix) */
        if (need && m->w) memcpy(file_bytes, m->w, (size_t)need);
        return LOWBIT_OK;
    }
    const int64_t rb = lowbit_row_bytes(m->type, m->cols);
    /* tasks of whole row groups (row sets), so that a task reads its rows' bytes alone */
    const int64_t per = m->rows64 ? LOWBIT_ROWS64 : m->base3 || m->rows16 || m->q8rows ? LOWBIT_BASE3_ROWS : 16;
    unpack_job U = {m, (uint8_t *)file_bytes, rb, per};
    lowbit_parallel_for((m->rows + per - 1) / per, unpack_task, &U, threads);
    if (m->type == LOWBIT_TYPE_I2_S) memcpy((uint8_t *)file_bytes + m->rows * rb, m->tail, 32);
    return LOWBIT_OK;
}

int lowbit_matrix_unpack_rows(const lowbit_matrix *m, const int64_t *idx, int64_t n, void *out) {
    if (!m || n < 0 || (n && (!idx || !out))) return LOWBIT_EINVAL;
    if (m->type == LOWBIT_TYPE_I2_S) return LOWBIT_ETYPE;
    const int64_t rb = lowbit_row_bytes(m->type, m->cols);
    if (rb < 0) return (int)rb;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= m->rows) return LOWBIT_EINVAL;
    for (int64_t i = 0; i < n; i++) {
        uint8_t *row = (uint8_t *)out + i * rb;
        if (m->packed)
            unpack_row(m, idx[i], row);
        else if (rb) /* borrowed as it is */
            memcpy(row, (const uint8_t *)m->w + idx[i] * rb, (size_t)rb);
    }
    return LOWBIT_OK;
}
