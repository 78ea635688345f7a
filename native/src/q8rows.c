/* The q8rows layout of Q8_0 matrices (packed.h): its packer and its row reader (unpack.c writes
 * the file layout back through it).  pack.c calls in here (and chooses the layout); the scalar
 * references are ref/q8rows_packed.c. */
#include "internal.h"

void lowbit_q8rows_pack_set(lowbit_matrix *m, const uint8_t *w, int64_t row_bytes, int64_t R) {
    for (int l = 0; l < LOWBIT_BASE3_ROWS; l++) {
        const int64_t r = R * LOWBIT_BASE3_ROWS + l;
        static const lowbit_block_q8_0 zero; /* padding rows: weights 0 (code 0x80), scale 0 */
        const lowbit_block_q8_0 *row = r < m->rows ? (const lowbit_block_q8_0 *)(w + r * row_bytes) : NULL;
        for (int64_t b = 0; b < m->nscales; b++) {
            const lowbit_block_q8_0 *blk = row ? row + b : &zero;
            m->scales[lowbit_q8rows_scale_at(m, r, b)] = blk->d;
            uint8_t *dst = m->codes + lowbit_q8rows_code_at(m, r, b, 0);
            for (int p = 0; p < 32; p++) dst[p / 4 * 64 + p % 4] = (uint8_t)blk->qs[p] ^ 0x80;
        }
    }
}

void lowbit_q8rows_row(const lowbit_matrix *m, int64_t r, uint8_t *out) {
    lowbit_block_q8_0 *row = (lowbit_block_q8_0 *)out;
    for (int64_t b = 0; b < m->nscales; b++) {
        row[b].d = m->scales[lowbit_q8rows_scale_at(m, r, b)];
        const uint8_t *src = m->codes + lowbit_q8rows_code_at(m, r, b, 0);
        for (int p = 0; p < 32; p++) row[b].qs[p] = (int8_t)(src[p / 4 * 64 + p % 4] ^ 0x80);
    }
}
