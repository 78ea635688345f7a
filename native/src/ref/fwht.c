/* Walsh-Hadamard transform: the scalar reference kernels (the specification the SIMD variants are
 * tested against, bit for bit) and the scalar entry of the kernel list.  The public entry points
 * are fwht.c.
 *
 * Sizes.  A block is either n = 2^k (k >= 1), transformed with the Sylvester matrix in natural order
 * H[r][c] = (-1)^popcount(r & c), or n = m * 2^k with m in {12, 20, 28} (k >= 0), transformed with
 * H_m (x) H_{2^k}: element a * 2^k + b (a < m, b < 2^k) maps to
 *     y[a * 2^k + b] = sum_{a', b'} H_m[a][a'] H_{2^k}[b][b'] x[a' * 2^k + b'],
 * i.e. first a 2^k-point transform of each of the m contiguous chunks, then an m-point transform
 * across chunks (stride 2^k).  H_12, H_20, H_28 are the matrices of N. J. A. Sloane's library of
 * Hadamard matrices (neilsloane.com/hadamard; the same ones and the same Kronecker order as MLX's
 * mx.hadamard_transform, so results agree with MLX).  Normalized by 1 / sqrt(m * 2^k), the transform
 * is orthogonal.  H_12 is symmetric (the transform is its own inverse); H_20 and H_28 are not: their
 * inverse is the transpose, which this API does not offer (only power-of-two sizes are involutions).
 *
 * Rounding (what "bit-exact" means across variants): every element goes through the radix-2 stages
 * in the order stride 1, 2, 4, ..., n/2, each output a single IEEE add or subtract of the previous
 * stage's values; sign flips are exact multiplications by +-1; the scale is one multiply after the
 * last stage; the m-point stage accumulates acc = 0, acc +-= x_k for k = 0..m-1.  Any kernel that
 * keeps that per-element order (blocked, vectorized, in any traversal) gives identical bits. */
#include <stdlib.h>

#include "../fwht_kernels.h"
#include "../platform.h" /* once */

/* ---- Hadamard matrices of order 12, 20, 28 (Sloane's library, '+' = +1) --------------------- */

static const char *const HAD12[12] = {
    "+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-", "+++++-++----", "+-+---+--+-+",
    "++--+++-++--", "+--++---+--+", "++----+++-++", "+--+-++---+-", "++++----+++-", "+-+--+-++---",
};
static const char *const HAD20[20] = {
    "+----+----++--++-++-", "-+----+---+++---+-++", "--+----+---+++-+-+-+", "---+----+---+++++-+-",
    "----+----++--++-++-+", "-+++++-----+--+++--+", "+-+++-+---+-+--+++--", "++-++--+---+-+--+++-",
    "+++-+---+---+-+--+++", "++++-----++--+-+--++", "--++-+-++-+-----++++", "---++-+-++-+---+-+++",
    "+---++-+-+--+--++-++", "++---++-+----+-+++-+", "-++---++-+----+++++-", "-+--+--++-+----+----",
    "+-+-----++-+----+---", "-+-+-+---+--+----+--", "--+-+++------+----+-", "+--+--++------+----+",
};
static const char *const HAD28[28] = {
    "+------++----++-+--+-+--++--", "-+-----+++-----+-+--+-+--++-", "--+-----+++---+-+-+----+--++",
    "---+-----+++---+-+-+-+--+--+", "----+-----+++---+-+-+++--+--", "-----+-----++++--+-+--++--+-",
    "------++----++-+--+-+--++--+", "--++++-+-------++--+++-+--+-", "---++++-+-----+-++--+-+-+--+",
    "+---+++--+----++-++--+-+-+--", "++---++---+----++-++--+-+-+-", "+++---+----+----++-++--+-+-+",
    "++++--------+-+--++-++--+-+-", "-++++--------+++--++--+--+-+", "-+-++-++--++--+--------++++-",
    "+-+-++--+--++--+--------++++", "-+-+-++--+--++--+----+---+++", "+-+-+-++--+--+---+---++---++",
    "++-+-+-++--+------+--+++---+", "-++-+-+-++--+------+-++++---", "+-++-+---++--+------+-++++--",
    "-++--++-+-++-+++----++------", "+-++--++-+-++-+++-----+-----", "++-++---+-+-++-+++-----+----",
    "-++-++-+-+-+-+--+++-----+---", "--++-++++-+-+----+++-----+--", "+--++-+-++-+-+----+++-----+-",
    "++--++-+-++-+-+----++------+",
};

static signed char g_had12[144], g_had20[400], g_had28[784];
static lowbit_once g_had_once = LOWBIT_ONCE_INIT;

static void had_init(void) {
    for (int i = 0; i < 12 * 12; i++) g_had12[i] = HAD12[i / 12][i % 12] == '+' ? 1 : -1;
    for (int i = 0; i < 20 * 20; i++) g_had20[i] = HAD20[i / 20][i % 20] == '+' ? 1 : -1;
    for (int i = 0; i < 28 * 28; i++) g_had28[i] = HAD28[i / 28][i % 28] == '+' ? 1 : -1;
}

const signed char *lowbit_hadamard_m(int m) {
    lowbit_once_run(&g_had_once, had_init);
    switch (m) {
    case 12: return g_had12;
    case 20: return g_had20;
    case 28: return g_had28;
    default: return NULL;
    }
}

/* ---- scalar reference kernels ---------------------------------------------------------------- */

/* The textbook in-place FWHT: log2(n) sweeps, stride h doubling.  Plain loops on purpose. */
#define DEFINE_POW2_REF(T, SUF)                                                                    \
    void lowbit_fwht_pow2_##SUF##_ref(const T *src, T *dst, int64_t n, const T *pre, const T *post, \
                                      T scale) {                                                   \
        for (int64_t i = 0; i < n; i++) dst[i] = pre ? src[i] * pre[i] : src[i];                   \
        for (int64_t h = 1; h < n; h *= 2)                                                         \
            for (int64_t i = 0; i < n; i += 2 * h)                                                 \
                for (int64_t j = i; j < i + h; j++) {                                              \
                    T a = dst[j], b = dst[j + h];                                                  \
                    dst[j] = a + b;                                                                \
                    dst[j + h] = a - b;                                                            \
                }                                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = dst[i] * scale;                                                                  \
            dst[i] = post ? v * post[i] : v;                                                       \
        }                                                                                          \
    }
DEFINE_POW2_REF(float, f32)
DEFINE_POW2_REF(double, f64)

#define DEFINE_MSTAGE_REF(T, SUF)                                                                  \
    void lowbit_fwht_mstage_##SUF##_ref(T *x, int m, int64_t len, const T *post, T scale) {        \
        const signed char *H = lowbit_hadamard_m(m);                                               \
        T col[28], out[28];                                                                        \
        for (int64_t i = 0; i < len; i++) {                                                        \
            for (int k = 0; k < m; k++) col[k] = x[k * len + i];                                   \
            for (int j = 0; j < m; j++) {                                                          \
                T acc = 0;                                                                         \
                for (int k = 0; k < m; k++) acc = H[j * m + k] > 0 ? acc + col[k] : acc - col[k];  \
                out[j] = acc * scale;                                                              \
            }                                                                                      \
            for (int j = 0; j < m; j++)                                                            \
                x[j * len + i] = post ? out[j] * post[j * len + i] : out[j];                       \
        }                                                                                          \
    }
DEFINE_MSTAGE_REF(float, f32)
DEFINE_MSTAGE_REF(double, f64)

/* Signs must be exactly +1 or -1: anything else would silently scale the data.  Checked on the
 * bit patterns: |s| == 1.0 <=> (bits & ~sign) == bits of 1.0. */
int lowbit_fwht_signs_ok_f32_ref(const float *s, int64_t n) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, s + i, sizeof u);
        bad |= (u & 0x7fffffffu) ^ 0x3f800000u;
    }
    return bad == 0;
}

int lowbit_fwht_signs_ok_f64_ref(const double *s, int64_t n) {
    uint64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, s + i, sizeof u);
        bad |= (u & 0x7fffffffffffffffull) ^ 0x3ff0000000000000ull;
    }
    return bad == 0;
}

void fwht_ref(lowbit_fwht_kernels *k) {
    *k = (lowbit_fwht_kernels){.isa = LOWBIT_ISA_SCALAR,
                               .pow2_f32 = lowbit_fwht_pow2_f32_ref,
                               .pow2_f64 = lowbit_fwht_pow2_f64_ref,
                               .mstage_f32 = lowbit_fwht_mstage_f32_ref,
                               .mstage_f64 = lowbit_fwht_mstage_f64_ref,
                               .signs_ok_f32 = lowbit_fwht_signs_ok_f32_ref,
                               .signs_ok_f64 = lowbit_fwht_signs_ok_f64_ref};
}
