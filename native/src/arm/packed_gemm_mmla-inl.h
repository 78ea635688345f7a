/* The i8mm variant's packed GEMM (packed_gemm_mmla), part of packed_arm-inl.h's body: included by
 * it where its helpers (unpack_chunk, pair_lo / pair_hi, packed_accumulate, store_group, GEMM_TILE)
 * and arm-inl.h's mmla16 are defined. */
#ifndef LOWBIT_PACKED_GEMM_MMLA_INL_H
#define LOWBIT_PACKED_GEMM_MMLA_INL_H

/* packed_gemm_g with SMMLA (arm-inl.h, mmla16): rows 2p, 2p+1 of the row group against activations
 * t, t+1 at once, each pair of rows' chunks unpacked once per tile and paired.  The int32 sums of a
 * group are gathered per (group part, activation pair, row pair), then unzipped into lane = row
 * vectors for packed_accumulate, which runs in packed_gemm_g's order. */
AI void packed_gemm_mmla(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                         int64_t batch, float *y, int64_t ldy, const int G) {
    const int CG = G < 128 ? G : 128, CPG = G > 128 ? G / 128 : 1, RP = CG / 16;
    const int64_t nch = m->nchunks, cols = m->cols;
    const int64_t rend = r1 < m->rows ? r1 : m->rows;
    for (int64_t rg0 = r0 - r0 % 4; rg0 < rend; rg0 += 4) {
        const uint8_t *cp0 = m->codes + rg0 / 4 * nch * 128;
        const uint16_t *sp = m->scales + rg0 / 4 * m->nscales * 4;
        for (int64_t b0 = 0; b0 < batch; b0 += GEMM_TILE) {
            const int nt = (int)(batch - b0 < GEMM_TILE ? batch - b0 : GEMM_TILE);
            float32x4_t acc[GEMM_TILE];
            for (int t = 0; t < nt; t++) acc[t] = vdupq_n_f32(0.0f);
            for (int64_t ch = 0; ch < nch; ch += CPG) {
                const int ng = (int)((cols - ch * 128 < 128 ? cols - ch * 128 : 128) / CG);
                /* [group part][activation pair][row pair]: mmla16's lanes */
                int32x4_t v[4][GEMM_TILE / 2][2];
                for (int h = 0; h < ng; h++)
                    for (int t = 0; t < nt; t += 2) v[h][t / 2][0] = v[h][t / 2][1] = vdupq_n_s32(0);
                for (int cc = 0; cc < CPG; cc++)
                    for (int p = 0; p < 2; p++) {
                        int8x16_t c0[8], c1[8], wl[8], wh[8];
                        unpack_chunk(cp0 + (ch + cc) * 128 + 64 * p, c0);
                        unpack_chunk(cp0 + (ch + cc) * 128 + 64 * p + 32, c1);
                        for (int k = 0; k < ng * RP; k++) {
                            wl[k] = pair_lo(c0[k], c1[k]);
                            wh[k] = pair_hi(c0[k], c1[k]);
                        }
                        for (int t = 0; t < nt; t += 2) {
                            const int8_t *q0 = a[b0 + t].q + (ch + cc) * 128;
                            const int8_t *q1 = t + 1 < nt ? a[b0 + t + 1].q + (ch + cc) * 128 : q0;
                            for (int h = 0; h < ng; h++)
                                for (int k = h * RP; k < (h + 1) * RP; k++)
                                    v[h][t / 2][p] = mmla16(v[h][t / 2][p], wl[k], wh[k],
                                                            vld1q_s8(q0 + 16 * k), vld1q_s8(q1 + 16 * k));
                        }
                    }
                for (int t = 0; t < nt; t++)
                    for (int h = 0; h < ng; h++) {
                        const int32x4_t *pr = v[h][t / 2]; /* lane = row: this activation's lanes */
                        const int32x4_t isum = t % 2 ? vuzp2q_s32(pr[0], pr[1]) : vuzp1q_s32(pr[0], pr[1]);
                        acc[t] = packed_accumulate(acc[t], isum, m, sp, &a[b0 + t], (ch * 128 + h * CG) / G, G);
                    }
            }
            for (int t = 0; t < nt; t++) store_group(y + (b0 + t) * ldy, acc[t], rg0, r0, rend);
        }
    }
}

#endif /* LOWBIT_PACKED_GEMM_MMLA_INL_H */
