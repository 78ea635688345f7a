/* The packed GEMM's blocking, shared by gemm-inl.h (gemm_avx2.c, gemm_avxvnni.c) and
 * gemm_avx512vnni.c (each includes it after its own pieces and is compiled with its own ISA
 * flags): the batch in passes of CMAX columns
 * (their float accumulators on the stack), rows in panels of PANEL, K in blocks of KB weights.
 * Per (panel, block) the includer's unpack_panel and panel_scales fill an L1 scratch of
 * SCRATCH_BYTES and the block's weight scales, then tile_any runs the register tiles of CT
 * columns over it.  The includer defines RB, PANEL, KB, CT, CMAX, SCRATCH_BYTES, cols_t and:
 *   unpack_panel(m, rg0, nrg, c0, nc, scratch)   codes of row groups [rg0, rg0 + nrg), chunks
 *                                                [c0, c0 + nc); missing row groups as zeros
 *   panel_scales(m, G, rg0, nrg, g0, ng, dw)     dw[g][PANEL] of groups [g0, g0 + ng)
 *   tile_any(G, nc, scratch, dw, ng, &cols, acc) acc[nc][PANEL] += the block's groups */
#ifndef LOWBIT_GEMM_PANELS_H
#define LOWBIT_GEMM_PANELS_H

/* y[0..nr) = acc[0..nr): vector stores for a whole panel (not an inlined memcpy:
 * docs/PERFORMANCE.md#gemm-panels-store), memcpy for a last partial one. */
AI void store_panel(float *y, const float *acc, int64_t nr) {
    if (nr == PANEL) {
        for (int i = 0; i < PANEL; i += 8) _mm256_storeu_ps(y + i, _mm256_load_ps(acc + i));
    } else {
        memcpy(y, acc, (size_t)nr * sizeof(float));
    }
}

AI void packed_gemm_g(const int G, const lowbit_matrix *m, int64_t r0, int64_t r1,
                      const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    _Alignas(64) uint8_t S[SCRATCH_BYTES];
    _Alignas(64) float dw[KB / 32 * PANEL] = {0}; /* (zeroed once: quiets -Wmaybe-uninitialized) */
    _Alignas(64) float acc[CMAX * PANEL];
    if (r1 > m->rows) r1 = m->rows;
    const int64_t n = m->cols, rgend = (r1 + LOWBIT_PACK_ROWS - 1) / LOWBIT_PACK_ROWS;
    for (int64_t j0 = 0; j0 < batch; j0 += CMAX) {
        const int64_t nb = batch - j0 < CMAX ? batch - j0 : CMAX;
        for (int64_t p0 = r0; p0 < r1; p0 += PANEL) {
            const int64_t rg0 = p0 / LOWBIT_PACK_ROWS;
            const int64_t nrg = rgend - rg0 < PANEL / 4 ? rgend - rg0 : PANEL / 4;
            memset(acc, 0, (size_t)nb * PANEL * sizeof(float));
            for (int64_t k0 = 0; k0 < n; k0 += KB) {
                const int64_t kn = n - k0 < KB ? n - k0 : KB, ng = kn / G;
                unpack_panel(m, rg0, nrg, k0 / 128, (kn + 127) / 128, S);
                panel_scales(m, G, rg0, nrg, k0 / G, ng, dw);
                for (int64_t j = 0, nc; j < nb; j += nc) {
                    /* CT + 1 columns left: CT - 1 and 2, not CT and 1 (a one-column tile runs
                     * fewer accumulator chains than the multiply-accumulate latency covers) */
                    nc = nb - j < CT ? nb - j : CT > 2 && nb - j == CT + 1 ? CT - 1 : CT;
                    cols_t C;
                    for (int c = 0; c < CT; c++) {
                        const lowbit_act *aj = &a[j0 + j + (c < nc ? c : 0)];
                        C.q[c] = aj->q + k0;
                        C.s[c] = aj->s + k0 / G;
                        C.d[c] = aj->d + k0 / G;
                    }
                    tile_any(G, (int)nc, S, dw, ng, &C, acc + j * PANEL);
                }
            }
            const int64_t nr = r1 - p0 < PANEL ? r1 - p0 : PANEL;
            for (int64_t j = 0; j < nb; j++) store_panel(y + (j0 + j) * ldy + p0, acc + j * PANEL, nr);
        }
    }
}

/* The table's packed_gemm: the activation groups the tiles know as constants, else the reference */
static void packed_gemm_panels(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                               int64_t batch, float *y, int64_t ldy) {
    switch (m->group) {
    case 32: packed_gemm_g(32, m, r0, r1, a, batch, y, ldy); break;
    case 128: packed_gemm_g(128, m, r0, r1, a, batch, y, ldy); break;
    case 256: packed_gemm_g(256, m, r0, r1, a, batch, y, ldy); break;
    default: lowbit_packed_gemm_ref(m, r0, r1, a, batch, y, ldy); break;
    }
}

#endif /* LOWBIT_GEMM_PANELS_H */
