/* A GEMM over a layout without GEMM kernels of its own (dense base-3, rows16): the rows decoded
 * into the canonical 2-bit layout, a 2-bit GEMM on them (packed.h). */
#include "internal.h"
#include "platform.h" /* lowbit_alloc_pages */

void lowbit_base3_gemm_decoded(lowbit_base3_decode_fn decode,
                               void (*gemm)(const lowbit_matrix *, int64_t, int64_t,
                                            const lowbit_act *, int64_t, float *, int64_t),
                               const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               int64_t batch, float *y, int64_t ldy) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    const int64_t rg0 = r0 / LOWBIT_PACK_ROWS, nrg = (r1 + LOWBIT_PACK_ROWS - 1) / LOWBIT_PACK_ROWS - rg0;
    const size_t bytes = (size_t)nrg * (size_t)m->nchunks * LOWBIT_PACK_ROWS * 32;
    const size_t sbytes = (size_t)nrg * (size_t)m->nscales * LOWBIT_PACK_ROWS * 2;
    uint8_t *scratch = (uint8_t *)lowbit_alloc_pages(bytes + sbytes);
    if (!scratch) {
        (m->base3 ? lowbit_base3_gemm_ref : lowbit_rows16_gemm_ref)(m, r0, r1, a, batch, y, ldy);
        return;
    }
    /* the rows' canonical 2-bit copy: row group rg0 is its row group 0 */
    lowbit_matrix c = *m;
    c.base3 = c.base3f = c.rows16 = 0;
    c.codes = scratch;
    c.scales = (uint16_t *)(scratch + bytes);
    decode(m, rg0, nrg, c.codes, c.scales);
    c.rows = r1 - rg0 * LOWBIT_PACK_ROWS;
    const int64_t shift = rg0 * LOWBIT_PACK_ROWS;
    gemm(&c, r0 - shift, r1 - shift, a, batch, y + shift, ldy);
    lowbit_free_pages(scratch, bytes + sbytes);
}
