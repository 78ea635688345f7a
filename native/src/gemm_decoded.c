/* A GEMM over a layout without GEMM kernels of its own (dense base-3, rows16): the rows decoded
 * into the canonical 2-bit layout, a 2-bit GEMM on them (packed.h). */
#include "internal.h"
#include "platform.h" /* lowbit_alloc_pages: 64-byte aligned */

/* Decoded rows a slab at a time, each slab a whole number of row sets (16 rows) of at most
 * DECODE_SLAB bytes: the slab stays in L2 for the GEMM that reads it back, and one small buffer
 * from the heap serves the call (a whole task's copy took fresh pages, faulted in and zeroed on
 * every call). */
#define DECODE_SLAB (64 * 1024)

void lowbit_base3_gemm_decoded(lowbit_base3_decode_fn decode,
                               void (*gemm)(const lowbit_matrix *, int64_t, int64_t,
                                            const lowbit_act *, int64_t, float *, int64_t),
                               const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               int64_t batch, float *y, int64_t ldy) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    const int64_t set_rgs = LOWBIT_BASE3_ROWS / LOWBIT_PACK_ROWS;
    const size_t rg_codes = (size_t)m->nchunks * LOWBIT_PACK_ROWS * 32;
    const size_t rg_scales = (size_t)m->nscales * LOWBIT_PACK_ROWS * 2;
    int64_t slab = (int64_t)(DECODE_SLAB / (rg_codes + rg_scales)) / set_rgs * set_rgs;
    if (slab < set_rgs) slab = set_rgs;
    const int64_t rg0 = r0 / LOWBIT_PACK_ROWS, rg1 = (r1 + LOWBIT_PACK_ROWS - 1) / LOWBIT_PACK_ROWS;
    if (rg1 - rg0 < slab) slab = rg1 - rg0;
    const size_t bytes = (size_t)slab * (rg_codes + rg_scales);
    uint8_t *scratch = (uint8_t *)lowbit_alloc_pages(bytes);
    if (!scratch) {
        (m->base3 ? lowbit_base3_gemm_ref : lowbit_rows16_gemm_ref)(m, r0, r1, a, batch, y, ldy);
        return;
    }
    /* the slab's canonical 2-bit copy: row group s0 is its row group 0 */
    lowbit_matrix c = *m;
    c.base3 = c.base3f = c.rows16 = 0;
    c.codes = scratch;
    c.scales = (uint16_t *)(scratch + (size_t)slab * rg_codes);
    for (int64_t s0 = rg0; s0 < rg1;) {
        int64_t s1 = (s0 / slab + 1) * slab; /* slabs start at multiples of slab: whole sets */
        if (s1 > rg1) s1 = rg1;
        decode(m, s0, s1 - s0, c.codes, c.scales);
        const int64_t shift = s0 * LOWBIT_PACK_ROWS, lo = r0 > shift ? r0 : shift;
        const int64_t hi = r1 < s1 * LOWBIT_PACK_ROWS ? r1 : s1 * LOWBIT_PACK_ROWS;
        c.rows = hi - shift;
        gemm(&c, lo - shift, hi - shift, a, batch, y + shift, ldy);
        s0 = s1;
    }
    lowbit_free_pages(scratch, bytes);
}
