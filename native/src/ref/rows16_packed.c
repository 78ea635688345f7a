/* The rows16 layout of group-32 matrices (packed.h, above struct lowbit_matrix): its choice at
 * pack time, its scalar references (the 2-bit layout's own, which read either placement) and
 * the decode of row groups of it into the canonical layout for the GEMMs that read that one. */
#include <stdlib.h>

#include "../internal.h"

int lowbit_rows16_chosen(int type) {
    if (lowbit_act_group(type) != 32 || !lowbit_type_packs(type)) return 0;
    const char *env = getenv("PYLOWBIT_ROWS16");
    if (env && (env[0] == '0' || env[0] == '1') && !env[1]) return env[0] == '1';
    return lowbit_rows16_has_kernel(type);
}

void lowbit_rows16_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    lowbit_packed_gemv_ref(m, r0, r1, a, y);
}

void lowbit_rows16_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    lowbit_packed_gemm_ref(m, r0, r1, a, batch, y, ldy);
}

/* A set's 4-byte pieces are row-major within each 64-byte vector: row r's chunk c is 8 pieces
 * 64 bytes apart, copied as such into the canonical chunk's 32 contiguous bytes. */
void lowbit_rows16_decode(const lowbit_matrix *m, int64_t rg0, int64_t nrg, uint8_t *dst,
                          uint16_t *sdst) {
    lowbit_matrix c = *m;
    c.rows16 = 0; /* dst's placement: row group 0 of dst is row group rg0 of m */
    for (int64_t g = 0; g < nrg; g++)
        for (int i = 0; i < LOWBIT_PACK_ROWS; i++) {
            const int64_t r = (rg0 + g) * LOWBIT_PACK_ROWS + i, rd = g * LOWBIT_PACK_ROWS + i;
            for (int64_t b = 0; b < m->nscales; b++)
                sdst[lowbit_packed_scale_at(&c, rd, b)] = m->scales[lowbit_packed_scale_at(m, r, b)];
            for (int64_t ch = 0; ch < m->nchunks; ch++)
                for (int p = 0; p < 32; p += 4)
                    memcpy(dst + lowbit_packed_code_at(&c, rd, ch, p),
                           m->codes + lowbit_packed_code_at(m, r, ch, p), 4);
        }
}
