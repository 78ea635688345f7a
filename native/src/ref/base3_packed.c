/* The dense base-3 packed layout of TQ1_0 / PTQ1_0 (packed.h, above struct lowbit_matrix):
 * building it, its scalar reference GEMV / GEMM, and decoding row groups of it into the 2-bit
 * layout for the GEMMs that read that one.  The reference takes the same integer group sums (the
 * codes are only reordered) in the same float order as lowbit_packed_gemv_ref and the file-layout
 * reference, so the three agree bit for bit. */
#include <stdlib.h>

#include "../internal.h"
#include "../platform.h" /* lowbit_alloc_pages */

void lowbit_base3_codes(int qk, const uint8_t *qs, const uint8_t *qh, uint8_t *codes);

int lowbit_base3_chosen(int type) {
    if (type != LOWBIT_TYPE_TQ1_0 && type != LOWBIT_TYPE_PTQ1_0) return 0;
    const char *env = getenv("PYLOWBIT_BASE3");
    if (env && (env[0] == '0' || env[0] == '1') && !env[1]) return env[0] == '1';
    return lowbit_layout_has_kernel(type, LOWBIT_LAYOUT_BASE3);
}

int64_t lowbit_base3_units(int64_t cols, int64_t group) {
    const int64_t S = group / 32, ng = cols / group;
    return ng / 5 * S + ng % 5 * (S / 4);
}

int64_t lowbit_base3_slice(int64_t G, int64_t ng, int64_t u, int k) {
    const int64_t S = G / 32, per = S / 4; /* units per period, units per group (planes 0..3) */
    const int64_t p = u / S, uu = u % S;
    if (k < 4) return (5 * p + uu / per) * G + (4 * (uu % per) + k) * 32;
    if (5 * p + 4 >= ng) return -1; /* the tail's units have no plane 4 */
    return (5 * p + 4) * G + uu * 32;
}

/* Where byte p of unit u of row r sits: unit_at(m, r, u) + unit_byte(p); and the scale of block b
 * of row r */
static size_t unit_at(const lowbit_matrix *m, int64_t r, int64_t u) {
    const int64_t R = r / LOWBIT_BASE3_ROWS, l = r % LOWBIT_BASE3_ROWS;
    return (size_t)((R * m->nunits + u) * 8 * 64 + l * 4);
}
static size_t unit_byte(int p) { return (size_t)(p / 4 * 64 + p % 4); }
static size_t scale_at(const lowbit_matrix *m, int64_t r, int64_t b) {
    const int64_t R = r / LOWBIT_BASE3_ROWS, l = r % LOWBIT_BASE3_ROWS;
    return (size_t)((R * m->nscales + b) * LOWBIT_BASE3_ROWS + l);
}

/* A period: the 5 groups (the tail: the last ng % 5) whose codes units [p S, (p + 1) S) hold
 * (lowbit_base3_slice); G <= 256 bounds its codes.  Group = scale block in both formats. */
#define PERIOD_MAX_CODES (5 * 256)

static int64_t n_periods(const lowbit_matrix *m) { return (m->cols / m->group + 4) / 5; }

/* Units [*u0, returned) of period p */
static int64_t period_units(const lowbit_matrix *m, int64_t p, int64_t *u0) {
    const int64_t S = m->group / 32, u1 = (p + 1) * S;
    *u0 = p * S;
    return u1 < m->nunits ? u1 : m->nunits;
}

/* Where in its period's codes plane k of unit u of period p starts, -1 if the unit has none */
static void unit_slices(const lowbit_matrix *m, int64_t p, int64_t u, int64_t off[5]) {
    const int64_t G = m->group, ng = m->cols / G;
    for (int k = 0; k < 5; k++) {
        const int64_t o = lowbit_base3_slice(G, ng, u, k);
        off[k] = o < 0 ? -1 : o - 5 * p * G;
    }
}

/* Codes (0..2) of period p of row r in weight order, codes[j] weight 5 p G + j: the period's
 * groups times G of them */
static void period_codes(const lowbit_matrix *m, int64_t r, int64_t p, uint8_t *codes) {
    static const uint8_t pow3[4] = {1, 3, 9, 27};
    int64_t u0, u1 = period_units(m, p, &u0);
    for (int64_t u = u0; u < u1; u++) {
        int64_t off[5];
        unit_slices(m, p, u, off);
        const uint8_t *src = m->codes + unit_at(m, r, u);
        for (int k = 0; k < 5; k++) {
            if (off[k] < 0) continue;
            for (int j = 0; j < 32; j++) {
                const uint8_t v = src[unit_byte(j)];
                const int t4 = v / 84, rest = v - 84 * t4;
                codes[off[k] + j] = (uint8_t)(k == 4 ? t4 : rest / pow3[k] % 3);
            }
        }
    }
}

/* The inverse: period p of row r from its codes (a unit's missing plane 4 holds zeros) */
static void set_period(lowbit_matrix *m, int64_t r, int64_t p, const uint8_t *codes) {
    int64_t u0, u1 = period_units(m, p, &u0);
    static const uint8_t none[32]; /* a missing plane: zeros */
    for (int64_t u = u0; u < u1; u++) {
        int64_t off[5];
        unit_slices(m, p, u, off);
        const uint8_t *t[5];
        for (int k = 0; k < 5; k++) t[k] = off[k] < 0 ? none : codes + off[k];
        uint8_t *dst = m->codes + unit_at(m, r, u);
        for (int j = 0; j < 32; j++)
            dst[unit_byte(j)] =
                (uint8_t)(84 * t[4][j] + t[0][j] + 3 * t[1][j] + 9 * t[2][j] + 27 * t[3][j]);
    }
}

/* Groups [5 p, returned) of period p */
static int64_t period_groups_end(const lowbit_matrix *m, int64_t p) {
    const int64_t ng = m->cols / m->group;
    return 5 * p + 5 < ng ? 5 * p + 5 : ng;
}

void lowbit_base3_pack_set(lowbit_matrix *m, const uint8_t *w, int64_t row_bytes, int64_t R) {
    const int64_t qk = m->qk;
    uint8_t codes[PERIOD_MAX_CODES];
    for (int l = 0; l < LOWBIT_BASE3_ROWS; l++) {
        const int64_t r = R * LOWBIT_BASE3_ROWS + l;
        if (r >= m->rows) break; /* padding rows keep zero codes and zero scales */
        const uint8_t *row = w + r * row_bytes;
        for (int64_t p = 0; p < n_periods(m); p++) {
            for (int64_t b = 5 * p; b < period_groups_end(m, p); b++) {
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
                m->scales[scale_at(m, r, b)] = d;
            }
            set_period(m, r, p, codes);
        }
    }
}

void lowbit_base3_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           float *y) {
    const int64_t G = m->group;
    uint8_t codes[PERIOD_MAX_CODES];
    for (int64_t r = r0; r < r1 && r < m->rows; r++) {
        float acc = 0.0f;
        for (int64_t p = 0; p < n_periods(m); p++) {
            period_codes(m, r, p, codes);
            for (int64_t g = 5 * p; g < period_groups_end(m, p); g++) {
                /* one scale block per group */
                const float dw = lowbit_fp16_to_fp32(m->scales[scale_at(m, r, g)]);
                const uint8_t *c = codes + (g - 5 * p) * G;
                const int8_t *q = a->q + g * G;
                int32_t isum = 0;
                for (int64_t j = 0; j < G; j++) isum += c[j] * q[j];
                isum -= a->s[g]; /* the +1 code offset */
                acc += (float)isum * (dw * a->d[g]);
            }
        }
        y[r] = acc;
    }
}

void lowbit_base3_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                           int64_t batch, float *y, int64_t ldy) {
    for (int64_t b = 0; b < batch; b++) lowbit_base3_gemv_ref(m, r0, r1, &a[b], y + b * ldy);
}

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
    c.base3 = c.rows16 = 0;
    c.codes = scratch;
    c.scales = (uint16_t *)(scratch + bytes);
    decode(m, rg0, nrg, c.codes, c.scales);
    c.rows = r1 - rg0 * LOWBIT_PACK_ROWS;
    const int64_t shift = rg0 * LOWBIT_PACK_ROWS;
    gemm(&c, r0 - shift, r1 - shift, a, batch, y + shift, ldy);
    lowbit_free_pages(scratch, bytes + sbytes);
}
