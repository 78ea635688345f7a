/* The SIMD Walsh-Hadamard kernels' body, shared by x86/fwht_avx2.c, x86/fwht_avx512.c and
 * arm/fwht_neon.c, each compiled with its own flags and supplying only vector primitives.
 *
 * Bit-exact with the scalar reference (ref/fwht.c): every element sees the radix-2 stages in the
 * order stride 1, 2, 4, ...; the in-vector stages use fma(v, +-1, swapped(v)), which rounds exactly
 * like the reference's a + b / a - b because v * +-1 is exact.
 *
 * Structure of one 2^L transform (W = lanes per vector, R = registers per tile):
 *   - n <= 2^LB (fits L1): a first pass loads R vectors, does the in-vector stages and log2(R)
 *     register stages, then "mid" passes do up to FWHT_GMAX stages each on tiles at stride s.
 *   - n > 2^LB: recursively transform the 2^g sub-blocks (depth first, so each stays in L1/L2
 *     while it is worked on), then one sweep does the top g <= FWHT_GMAX stages.  Only the first
 *     touch and the top sweep go beyond L2: two sweeps over memory for n = 2^20 instead of
 *     ceil(log2(n) / FWHT_GMAX).
 *   - the scale and the post-signs are folded into the last pass, the pre-signs into the first.
 *
 * The includer includes fwht_kernels.h, then defines for SUF = f32 (float) and f64 (double):
 *   vec_SUF                           the vector type (its lane count W follows from its size)
 *   vld_SUF(p), vst_SUF(p, v)         unaligned load and store
 *   vadd_SUF, vsub_SUF, vmul_SUF      lane-wise a + b, a - b, a * b
 *   vset1_SUF(x)                      a broadcast
 *   vinreg_SUF(v)                     the stages of strides 1 .. W/2 inside one vector
 *   sign_err_SUF(p)                   sign_bits, zero exactly where p[i] is +1 or -1
 * and once: the type sign_bits with sign_bits_zero(), sign_bits_or(a, b), sign_bits_any(b);
 * FWHT_ISA (its lowbit_isa) and FWHT_FILL (the name of its kernel-list entry, which fills its table); then includes
 * this file once.  It includes fwht_type-inl.h once per element type (FWHT_SUF, FWHT_T set).
 * How the tuning constants were chosen: docs/PERFORMANCE.md#fwht-tuning. */

/* ---- constants, both element types (fwht_type-inl.h), the table ---- */

/* Tuning constants; an ISA file may set one first, a benchmark build with -D. */
#ifndef FWHT_LOGR_FIRST
#define FWHT_LOGR_FIRST 4 /* log2(vectors per first-pass tile): as many as the registers hold */
#endif
#ifndef FWHT_GMAX
#define FWHT_GMAX 3 /* stages per mid pass: its 2^GMAX x FWHT_COLS vectors fill the registers */
#endif
#ifndef FWHT_COLS
#define FWHT_COLS 2 /* vectors per row of a mid-pass tile: a whole 64-byte line where it can */
#endif
#ifndef FWHT_LB_f32
#define FWHT_LB_f32 13 /* log2(floats) of the largest transform run in cache whole (L1d) */
#endif
#ifndef FWHT_LB_f64
#define FWHT_LB_f64 12 /* the same bytes in doubles */
#endif
#ifndef FWHT_LEAF_f32
#define FWHT_LEAF_f32 FWHT_LB_f32 /* log2(elements) of a large transform's in-cache sub-blocks */
#endif
#ifndef FWHT_LEAF_f64
#define FWHT_LEAF_f64 FWHT_LB_f64
#endif
#define FWHT_SIGN_CHAINS 4 /* independent OR chains of the sign check: load-bound, not OR-bound */

#if FWHT_GMAX < 1 || FWHT_GMAX > 5 || FWHT_LOGR_FIRST < 0 || FWHT_LOGR_FIRST > 5
#error "a tile holds at most 2^5 vectors per column (the r[32] arrays, the pass switches)"
#endif

#define AI static inline __attribute__((always_inline))
#define FWHT_PASTE2(a, b) a##_##b
#define FWHT_PASTE(a, b) FWHT_PASTE2(a, b)
#define FN(name) FWHT_PASTE(name, FWHT_SUF)        /* name_f32 / name_f64 */
#define FWHT_REF3(name, s) lowbit_fwht_##name##_##s##_ref
#define FWHT_REF2(name, s) FWHT_REF3(name, s)
#define REF(name) FWHT_REF2(name, FWHT_SUF)        /* the scalar reference of the same type */

/* The (G, flags) combinations of a pass, instantiated once each; the switch is on run-time values. */
#define FIRST_CASES(G)                                                                             \
    case G * 8 + 0: FN(first_pass)(src, dst, n, pre, post, scale, G, 0, 0, 0); break;             \
    case G * 8 + 1: FN(first_pass)(src, dst, n, pre, post, scale, G, 1, 0, 0); break;             \
    case G * 8 + 2: FN(first_pass)(src, dst, n, pre, post, scale, G, 0, 1, 0); break;             \
    case G * 8 + 3: FN(first_pass)(src, dst, n, pre, post, scale, G, 1, 1, 0); break;             \
    case G * 8 + 6: FN(first_pass)(src, dst, n, pre, post, scale, G, 0, 1, 1); break;             \
    case G * 8 + 7: FN(first_pass)(src, dst, n, pre, post, scale, G, 1, 1, 1); break;
#define MID_CASES(G)                                                                               \
    case G * 4 + 0: FN(mid_pass)(x, n, s, post, scale, G, 0, 0); break;                           \
    case G * 4 + 1: FN(mid_pass)(x, n, s, post, scale, G, 1, 0); break;                           \
    case G * 4 + 3: FN(mid_pass)(x, n, s, post, scale, G, 1, 1); break;

#define FWHT_SUF f32
#define FWHT_T float
#include "fwht_type-inl.h"
#undef FWHT_SUF
#undef FWHT_T
#define FWHT_SUF f64
#define FWHT_T double
#include "fwht_type-inl.h"
#undef FWHT_SUF
#undef FWHT_T

void FWHT_FILL(lowbit_fwht_kernels *k) {
    *k = (lowbit_fwht_kernels){.isa = FWHT_ISA, .pow2_f32 = pow2_f32, .pow2_f64 = pow2_f64,
                               .mstage_f32 = mstage_f32, .mstage_f64 = mstage_f64,
                               .signs_ok_f32 = signs_ok_f32, .signs_ok_f64 = signs_ok_f64};
}

#undef FIRST_CASES
#undef MID_CASES
#undef REF
#undef FWHT_REF2
#undef FWHT_REF3
#undef FN
#undef FWHT_PASTE
#undef FWHT_PASTE2
#undef AI

