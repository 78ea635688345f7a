/* Q1_0's rows64 layout (packed.h) decoded back to file blocks with 256-bit byte unpacks, and the
 * GEMM over that: the rows64 GEMMs of avx2 / avxvnni (rows64_q1_0-inl.h) and of avx512vnni
 * without VBMI (rows64_q1_0_avx512vnni.c), each with its variant's file-layout GEMM. */
#ifndef LOWBIT_ROWS64_DECODE_INL_H
#define LOWBIT_ROWS64_DECODE_INL_H
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "../internal.h"
#include "../platform.h" /* lowbit_alloc_pages */

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

/* The first nl rows of tile T back to file blocks in dst (rb bytes a row): for each ymm half s,
 * 4 rounds of byte unpacks take a block's vector k (byte k of lanes 32 s ..) to 128-bit lane h of
 * register i holding the 16 bytes of lane 32 s + 16 h + i (q1_lut-inl.h's transpose, inverted),
 * stored straight into that lane's row */
static void rows64_decode(const lowbit_matrix *m, int64_t T, int64_t nl, uint8_t *dst, int64_t rb) {
    const int64_t nb = m->nchunks, t0 = T * LOWBIT_ROWS64;
    int64_t off[LOWBIT_ROWS64]; /* lane e's row offset in dst, -1 past nl */
    for (int e = 0; e < LOWBIT_ROWS64; e++) {
        const int l = lowbit_rows64_row(e);
        off[e] = l < nl ? l * rb : -1;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb = m->codes + (t0 * nb + b * LOWBIT_ROWS64) * 16;
        uint8_t *blk = dst + b * (int64_t)sizeof(lowbit_block_q1_0);
        for (int s = 0; s < 2; s++) {
            __m256i R[16];
            for (int k = 0; k < 16; k++) R[k] = _mm256_loadu_si256((const __m256i *)(pb + 64 * k + 32 * s));
            for (int round = 0; round < 4; round++) {
                __m256i U[16];
                for (int i = 0; i < 8; i++) {
                    U[2 * i] = _mm256_unpacklo_epi8(R[i], R[i + 8]);
                    U[2 * i + 1] = _mm256_unpackhi_epi8(R[i], R[i + 8]);
                }
                for (int i = 0; i < 16; i++) R[i] = U[i];
            }
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                const int64_t o0 = off[32 * s + i], o1 = off[32 * s + 16 + i];
                if (o0 >= 0)
                    _mm_storeu_si128((__m128i *)(blk + o0 + offsetof(lowbit_block_q1_0, qs)),
                                     _mm256_castsi256_si128(R[i]));
                if (o1 >= 0)
                    _mm_storeu_si128((__m128i *)(blk + o1 + offsetof(lowbit_block_q1_0, qs)),
                                     _mm256_extracti128_si256(R[i], 1));
            }
        }
        const uint16_t *sc = m->scales + t0 * nb + b * LOWBIT_ROWS64;
        uint8_t *d = blk + offsetof(lowbit_block_q1_0, d);
        for (int l = 0; l < nl; l++) memcpy(d + l * rb, sc + l, 2);
    }
}

/* A rows64 GEMM: a task's tiles decoded into the file layout one at a time (a tile's rows stay in
 * L2 for the GEMM that reads them back), the file layout's GEMM `gemm` on them (the reference if
 * that memory is not there) */
AI void rows64_gemm_decoded(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy, lowbit_gemm_sig *gemm) {
    if (r1 > m->rows) r1 = m->rows;
    if (r1 <= r0) return;
    const int64_t rb = m->nchunks * (int64_t)sizeof(lowbit_block_q1_0);
    const size_t bytes = (size_t)(LOWBIT_ROWS64 * rb);
    uint8_t *rows = (uint8_t *)lowbit_alloc_pages(bytes); /* 64-byte aligned */
    if (!rows) {
        lowbit_rows64_gemm_ref(m, r0, r1, a, batch, y, ldy);
        return;
    }
    for (int64_t T = r0 / LOWBIT_ROWS64; T * LOWBIT_ROWS64 < r1; T++) {
        const int64_t base = T * LOWBIT_ROWS64, lo = r0 > base ? r0 : base;
        const int64_t hi = r1 < base + LOWBIT_ROWS64 ? r1 : base + LOWBIT_ROWS64;
        rows64_decode(m, T, hi - base, rows, rb);
        gemm(rows, rb, lo - base, hi - base, a, batch, y + base, ldy);
    }
    lowbit_free_pages(rows, bytes);
}
#endif /* LOWBIT_ROWS64_DECODE_INL_H */
