/* GEMV / GEMM of every weight format on the file layout (the weights as GGUF stores them),
 * bit-exact with the reference (ref/dot.c); the arithmetic contract is in avx2-inl.h.  The body
 * of file_avx2.c and file_avxvnni.c, which differ in the multiply-accumulate step only
 * (dot_step-inl.h). */
#ifndef LOWBIT_FILE_INL_H
#define LOWBIT_FILE_INL_H
#include "avx2-inl.h"
#include "q1_quads.h"

/* ---- GEMV, file layout: 4 rows at a time share each activation load and one reduction ---------- */

AI void gemv_file(const int F, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                  const lowbit_act *a, float *y) {
    const int U = unit_of(F), G = group_of(F), NG = U / G, US = ustride_of(F);
    const int off = F == F_Q8 ? 0 : 1;
    const int64_t n = a->n;
    const int64_t nfull = n / U, ntail = (n % U) / G; /* Q2_0: a last lone 64-block */
    for (int64_t r = r0; r < r1; r += 4) {
        const uint8_t *row[4];
        for (int i = 0; i < 4; i++)
            row[i] = (const uint8_t *)w + (r + i < r1 ? r + i : r1 - 1) * row_bytes;
        __m128 acc = _mm_setzero_ps();
        for (int64_t u = 0; u <= nfull; u++) {
            const int ng = u < nfull ? NG : (int)ntail;
            if (ng == 0) break;
            __m256i iv[4][4];
            for (int i = 0; i < 4; i++) {
                __m256i c[8];
                if (LOWBIT_PF_FILE && US >= 32) /* four row streams: help the prefetchers */
                    _mm_prefetch((const char *)(row[i] + u * US + LOWBIT_PF_FILE), _MM_HINT_T0);
                decode(F, row[i] + u * US, ng < NG, c);
                for (int gi = 0; gi < ng && gi < NG; gi++) iv[i][gi] = group_dot(F, c, gi, a->q + u * U);
            }
            __m128 dw = _mm_set1_ps(1.0f), sb = _mm_setzero_ps();
            for (int gi = 0; gi < ng && gi < NG; gi++) {
                const int64_t g = u * NG + gi;
                if (F != F_I2S)
                    dw = _mm_cvtph_ps(_mm_setr_epi16((short)file_scale(F, row[0] + u * US, gi),
                                                     (short)file_scale(F, row[1] + u * US, gi),
                                                     (short)file_scale(F, row[2] + u * US, gi),
                                                     (short)file_scale(F, row[3] + u * US, gi), 0,
                                                     0, 0, 0));
                __m128i isum = hsum4(iv[0][gi], iv[1][gi], iv[2][gi], iv[3][gi]);
                const __m128i s = _mm_set1_epi32(off * a->s[g]);
                if (F == F_Q1)
                    sb = block_sum(sb, gi == 0, isum, s, _mm_set1_ps(a->d[g]));
                else
                    acc = group_acc(acc, isum, s, dw, _mm_set1_ps(a->d[g]));
            }
            if (F == F_Q1) acc = _mm_fmadd_ps(dw, sb, acc);
        }
        float out[4];
        _mm_storeu_ps(out, acc);
        for (int i = 0; i < 4 && r + i < r1; i++) y[r + i - r0] = out[i];
    }
}

/* ---- GEMM, file layout: one row x 4 activation columns; each unpacked unit is used 4 times --------
 * Columns outermost: 4 activation rows (4 * cols bytes) stay in L1 while the task's rows stream
 * from L2. */

/* transposed per-group activation scales / sums of a column tile: dT[g][j], sT[g][j] */
typedef struct {
    float *d;
    int32_t *s;
    void *mem;
} act_t;

static int transpose_acts(const lowbit_act *a, int64_t batch, act_t *T) {
    const int64_t ng = a[0].n / a[0].group, bp = (batch + 3) & ~(int64_t)3;
    T->mem = malloc((size_t)(ng * bp) * 8 + 32);
    if (!T->mem) return -1;
    T->d = (float *)T->mem;
    T->s = (int32_t *)(T->d + ng * bp);
    for (int64_t g = 0; g < ng; g++)
        for (int64_t j = 0; j < bp; j++) {
            const lowbit_act *aj = &a[j < batch ? j : batch - 1];
            T->d[g * bp + j] = aj->d[g];
            T->s[g * bp + j] = aj->s[g];
        }
    return 0;
}

AI void gemm_file(const int F, const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                  const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    const int U = unit_of(F), G = group_of(F), NG = U / G, US = ustride_of(F);
    const int off = F == F_Q8 ? 0 : 1;
    const int64_t n = a[0].n, bp = (batch + 3) & ~(int64_t)3;
    const int64_t nfull = n / U, ntail = (n % U) / G;
    act_t T;
    if (transpose_acts(a, batch, &T)) { /* out of memory: column by column */
        for (int64_t b = 0; b < batch; b++) gemv_file(F, w, row_bytes, r0, r1, &a[b], y + b * ldy + r0);
        return;
    }
    for (int64_t j = 0; j < batch; j += 4) {
        const int8_t *aq[4];
        for (int jj = 0; jj < 4; jj++) aq[jj] = a[j + jj < batch ? j + jj : batch - 1].q;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = (const uint8_t *)w + r * row_bytes;
            __m128 acc = _mm_setzero_ps();
            for (int64_t u = 0; u <= nfull; u++) {
                const int ng = u < nfull ? NG : (int)ntail;
                if (ng == 0) break;
                __m256i c[8];
                decode(F, row + u * US, ng < NG, c);
                float dw = 1.0f;
                __m128 sb = _mm_setzero_ps();
                for (int gi = 0; gi < ng && gi < NG; gi++) {
                    const int64_t g = u * NG + gi;
                    __m128i isum = hsum4(group_dot(F, c, gi, aq[0] + u * U),
                                         group_dot(F, c, gi, aq[1] + u * U),
                                         group_dot(F, c, gi, aq[2] + u * U),
                                         group_dot(F, c, gi, aq[3] + u * U));
                    if (F != F_I2S) dw = _cvtsh_ss(file_scale(F, row + u * US, gi));
                    __m128i s = _mm_loadu_si128((const __m128i *)(T.s + g * bp + j));
                    if (!off) s = _mm_setzero_si128();
                    const __m128 da = _mm_loadu_ps(T.d + g * bp + j);
                    if (F == F_Q1)
                        sb = block_sum(sb, gi == 0, isum, s, da);
                    else
                        acc = group_acc(acc, isum, s, _mm_set1_ps(dw), da);
                }
                if (F == F_Q1) acc = _mm_fmadd_ps(_mm_set1_ps(dw), sb, acc);
            }
            float out[4];
            _mm_storeu_ps(out, acc);
            for (int jj = 0; jj < 4 && j + jj < batch; jj++) y[(j + jj) * ldy + r] = out[jj];
        }
    }
    free(T.mem);
}


/* ---- Q1_0: 8 rows a lane each (q1_0_avx512-inl.h's scheme on 256 bits) --------------------------
 * A group's 32 bits of 8 rows are transposed into dword lanes (8 16-byte loads, a 4x4 dword
 * transpose per 128-bit lane); bit t of every byte is the quad {t, t + 8, t + 16, t + 24}
 * (q1_quads.h), its codes 2 * bit come out of vpshufb on a 16-entry table (the byte's low or high
 * nibble), and dot_acc adds them times the quad's broadcast activation codes into the rows'
 * lanes: no horizontal sums.  Codes 0 / 2 against |q| <= 127: 8 steps of int16 pair sums stay
 * below 4096 under MADDUBS. */
AI void q1_rows8(const int NC, const uint8_t *p, int64_t rb, int64_t nb, const int8_t *const *qp,
                 const lowbit_act *const *aq, __m256 acc[4]) {
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    __m256i T[4];
    for (int t = 0; t < 4; t++) {
        uint8_t tab[16];
        for (int x = 0; x < 16; x++) tab[x] = (uint8_t)(2 * ((x >> t) & 1));
        T[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tab));
    }
    const char *pf = (const char *)p + LOWBIT_PF_Q8;
    for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int64_t o = (int64_t)sizeof(lowbit_block_q1_0) * b;
        if (LOWBIT_PF_Q8) /* the 8 rows are one run of memory, prefetched as Q8_0's */
            for (const char *lim = (const char *)p + 8 * o + 8 * 18 + LOWBIT_PF_Q8; pf < lim; pf += 64)
                _mm_prefetch(pf, _MM_HINT_T0);
        __m256i R[4]; /* 128-bit lane h: the code bytes of row 4 h + i */
        for (int i = 0; i < 4; i++)
            R[i] = _mm256_loadu2_m128i((const __m128i *)(p + (4 + i) * rb + o + AT(q1_0, qs)),
                                       (const __m128i *)(p + i * rb + o + AT(q1_0, qs)));
        const __m256i t0 = _mm256_unpacklo_epi32(R[0], R[1]), t1 = _mm256_unpackhi_epi32(R[0], R[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(R[2], R[3]), t3 = _mm256_unpackhi_epi32(R[2], R[3]);
        const __m256i G[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                              _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
        uint64_t lo = 0, hi = 0;
        for (int i = 0; i < 4; i++) {
            lo |= (uint64_t)ld16(p + i * rb + o + AT(q1_0, d)) << (16 * i);
            hi |= (uint64_t)ld16(p + (4 + i) * rb + o + AT(q1_0, d)) << (16 * i);
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
        __m256 S[4]; /* the block's sum of (float) isum * da, column j */
        for (int j = 0; j < 4; j++) S[j] = _mm256_setzero_ps();
        for (int g = 0; g < 4; g++) {
            const int64_t gg = 4 * b + g;
            const __m256i xl = _mm256_and_si256(G[g], lo4);
            const __m256i xh = _mm256_and_si256(_mm256_srli_epi16(G[g], 4), lo4);
            dot_t s[4];
            for (int j = 0; j < NC; j++) s[j] = _mm256_setzero_si256();
            for (int t = 0; t < 8; t++) {
                const __m256i c = _mm256_shuffle_epi8(T[t & 3], t < 4 ? xl : xh);
                for (int j = 0; j < NC; j++) {
                    int32_t v;
                    memcpy(&v, qp[j] + 32 * gg + 4 * t, 4);
                    s[j] = dot_acc(s[j], c, _mm256_set1_epi32(v));
                }
            }
            for (int j = 0; j < NC; j++) {
                const __m256i isum = _mm256_sub_epi32(dot_wide(s[j]), _mm256_set1_epi32(aq[j]->s[gg]));
                const __m256 da = _mm256_set1_ps(aq[j]->d[gg]), f = _mm256_cvtepi32_ps(isum);
                S[j] = g ? _mm256_fmadd_ps(f, da, S[j]) : _mm256_mul_ps(f, da);
            }
        }
        for (int j = 0; j < NC; j++) acc[j] = _mm256_fmadd_ps(dw, S[j], acc[j]);
    }
}

/* Tiles of 8 rows; a last one of fewer is the 8 ending at r1 (rows before r0 exist in w).  Under 8
 * rows, or without memory for the reordered codes: the general file kernel. */
static void q1_gemv_8rows(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    int8_t stack[LOWBIT_Q1_STACK];
    const int8_t *qp[4];
    int8_t *buf = r1 >= 8 ? q1_quads_of(&a, 1, stack, qp) : NULL;
    if (!buf) {
        gemv_file(F_Q1, w, rb, r0, r1, a, y);
        return;
    }
    for (int64_t r = r0; r < r1; r += 8) {
        const int64_t t = r + 8 <= r1 ? r : r1 - 8;
        __m256 acc[4];
        q1_rows8(1, (const uint8_t *)w + t * rb, rb, a->n / 128, qp, &a, acc);
        float out[8];
        _mm256_storeu_ps(out, acc[0]);
        memcpy(y + r - r0, out + (r - t), sizeof(float) * (size_t)(8 - (r - t)));
    }
    if (buf != stack) free(buf);
}
static void q1_gemm_8rows(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          int64_t batch, float *y, int64_t ldy) {
    int8_t stack[LOWBIT_Q1_STACK];
    for (int64_t j = 0; j < batch; j += 4) {
        const int64_t nc = batch - j < 4 ? batch - j : 4;
        const lowbit_act *aq[4];
        for (int jj = 0; jj < 4; jj++) aq[jj] = &a[j + (jj < nc ? jj : nc - 1)];
        const int8_t *qp[4];
        int8_t *buf = r1 >= 8 ? q1_quads_of(aq, 4, stack, qp) : NULL;
        if (!buf) {
            gemm_file(F_Q1, w, rb, r0, r1, a + j, nc, y + j * ldy, ldy);
            continue;
        }
        for (int64_t r = r0; r < r1; r += 8) {
            const int64_t t = r + 8 <= r1 ? r : r1 - 8;
            __m256 acc[4];
            q1_rows8(4, (const uint8_t *)w + t * rb, rb, a[0].n / 128, qp, aq, acc);
            for (int jj = 0; jj < nc; jj++) {
                float out[8];
                _mm256_storeu_ps(out, acc[jj]);
                memcpy(y + (j + jj) * ldy + r, out + (r - t), sizeof(float) * (size_t)(8 - (r - t)));
            }
        }
        if (buf != stack) free(buf);
    }
}

#include "q1_lut-inl.h"

/* Q8_0, file layout: 8 rows at a time, so a block's 8 int32 sums come out of one transpose-reduce
 * (hsum_8x8) and the spec's float steps run once per block for 8 rows.  The 8 rows are one
 * contiguous run of memory read as 8 streams side by side; it is prefetched as one run,
 * LOWBIT_PF_Q8 bytes ahead of the average position (docs/PERFORMANCE.md#q8-8-rows). */
/* fp16 scales of block offset o of 8 rows, gathered in general-purpose registers (the vector
 * shuffle ports are the busy ones) */
AI __m256 q8_scales8(const uint8_t *const row[8], int64_t o) {
    uint64_t lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        lo |= (uint64_t)ld16(row[i] + o) << (16 * i);
        hi |= (uint64_t)ld16(row[i + 4] + o) << (16 * i);
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* acc += (float)isum * (dw * da) for block b of the 8 rows */
AI __m256 q8_acc(__m256 acc, __m256i isum, const uint8_t *const row[8], int64_t b, const lowbit_act *a) {
    const __m256 sc = _mm256_mul_ps(q8_scales8(row, (int64_t)sizeof(lowbit_block_q8_0) * b + AT(q8_0, d)), _mm256_set1_ps(a->d[b]));
    __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), sc);
    return _mm256_add_ps(acc, p);
}

static void q8_gemv_8rows(const void *w, int64_t rb, int64_t r0, int64_t r1, const lowbit_act *a,
                          float *y) {
    const int64_t nb = a->n / 32;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        const uint8_t *row[8];
        for (int i = 0; i < 8; i++) row[i] = (const uint8_t *)w + (r + i) * rb;
        __m256 acc = _mm256_setzero_ps();
        __m256i pis = _mm256_setzero_si256(); /* block pb's sums, float steps pending */
        int64_t pb = 0;
        /* rows r.. r+7 are [row[0], row[0] + 8 rb); the previous group prefetched up to
         * row[0] + LOWBIT_PF_Q8 */
        const char *pf = (const char *)row[0] + LOWBIT_PF_Q8;
        for (int64_t b = 0; b < nb; b++) {
            const int64_t o = (int64_t)sizeof(lowbit_block_q8_0) * b;
            if (LOWBIT_PF_Q8)
                for (const char *lim = (const char *)row[0] + 8 * (int64_t)sizeof(lowbit_block_q8_0) * (b + 1) + LOWBIT_PF_Q8; pf < lim; pf += 64)
                    _mm_prefetch(pf, _MM_HINT_T0);
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));
            __m256i v[8];
            for (int i = 0; i < 8; i++) {
                __m256i c = _mm256_loadu_si256((const __m256i *)(row[i] + o + AT(q8_0, qs)));
                __asm__("" : "+x"(c)); /* one load (often a line split), not one per use */
                v[i] = dot_wide(dot_mul(_mm256_abs_epi8(c), _mm256_sign_epi8(av, c)));
            }
            const __m256i isum = hsum_8x8(v);
            if (b) acc = q8_acc(acc, pis, row, pb, a); /* pipelined as packed_gemv_k */
            pis = isum, pb = b;
        }
        _mm256_storeu_ps(y + r - r0, nb ? q8_acc(acc, pis, row, pb, a) : acc);
    }
    if (r < r1) gemv_file(F_Q8, w, rb, r, r1, a, y + r - r0);
}

/* Every format's file-layout GEMV and GEMM, one pair per slot of kernel_table.h's list (F is the
 * slot): gemv_file / gemm_file, but Q8_0's GEMV and Q1_0's GEMM (the 8-row kernels above) and
 * Q1_0's GEMV (q1_lut-inl.h). */
#define DEFINE_FILE(K, T, name)                                                                    \
    void KN(gemv_##name)(const void *w, int64_t rb, int64_t r0, int64_t r1,                        \
                         const lowbit_act *a, float *y) {                                          \
        if ((int)K == F_Q8)                                                                        \
            q8_gemv_8rows(w, rb, r0, r1, a, y);                                                    \
        else if ((int)K == F_Q1)                                                                   \
            q1_gemv_lut(w, rb, r0, r1, a, y);                                                      \
        else                                                                                       \
            gemv_file(K, w, rb, r0, r1, a, y);                                                     \
    }                                                                                              \
    void KN(gemm_##name)(const void *w, int64_t rb, int64_t r0, int64_t r1,                        \
                         const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {              \
        if ((int)K == F_Q1)                                                                        \
            q1_gemm_8rows(w, rb, r0, r1, a, batch, y, ldy);                                        \
        else                                                                                       \
            gemm_file(K, w, rb, r0, r1, a, batch, y, ldy);                                         \
    }
LOWBIT_FOR_EACH_QUANT_TYPE(DEFINE_FILE)
#undef DEFINE_FILE
#endif /* LOWBIT_FILE_INL_H */
