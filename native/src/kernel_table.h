/* The kernel list and the tables the selector builds from it.
 *
 * Every microkernel is one entry of the list (kernel_list.c): its name (the C function's, also its
 * test's), the ISA it is compiled for, the weight type and layout it reads, its role and a predicate
 * on the matrices it takes.  The selector (dispatch.c) walks an ISA's fallback chain and takes the
 * first entry that fits: for the file layout, the quantizer, the float GEMVs, the read probe, the
 * FWHT and the decoder ops once per ISA into a lowbit_kernels table; for packed matrices once per matrix at pack time, into the
 * matrix's plan (packed.h).  Adding a format or an ISA is a list entry. */
#ifndef LOWBIT_KERNEL_TABLE_H
#define LOWBIT_KERNEL_TABLE_H

#include <stdint.h>

#include "lowbit/lowbit.h"

/* The kernel signatures, by role: X_sig is the function type (kernel_list.c declares every kernel
 * with it), X_fn the pointer.
 *
 * y[r - r0] = dot(row r of W, a) for r in [r0, r1).  `w` points at row 0, rows are row_bytes apart.
 * I2_S kernels return the unscaled sum (the per-tensor scale is applied by the caller). */
typedef void lowbit_gemv_sig(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                             const lowbit_act *a, float *y);
/* y[b * ldy + r] for b < batch, r in [r0, r1): the same dot for each of `batch` activations. */
typedef void lowbit_gemm_sig(const void *w, int64_t row_bytes, int64_t r0, int64_t r1,
                             const lowbit_act *a, int64_t batch, float *y, int64_t ldy);
/* Packed (row-interleaved) matrices, see pack.c: rows [r0, r1) with r0 a multiple of
 * LOWBIT_PACK_ROWS; y is indexed by absolute row (y[r], or y[b * ldy + r] for GEMM).  Rows past
 * m->rows are never written. */
typedef void lowbit_packed_gemv_sig(const struct lowbit_matrix *m, int64_t r0, int64_t r1,
                                    const lowbit_act *a, float *y);
typedef void lowbit_packed_gemm_sig(const struct lowbit_matrix *m, int64_t r0, int64_t r1,
                                    const lowbit_act *a, int64_t batch, float *y, int64_t ldy);
/* The GEMV of two row ranges far apart in one pass, [a0, a1) and [b0, b1) (multiples of
 * LOWBIT_PACK_ROWS at their starts, b1 - b0 <= a1 - a0): results as two packed GEMV calls, bit
 * for bit.  A GEMV job then gives each task a row tile of the matrix's first half and its twin in
 * the second (api.c): each thread streams two runs of memory side by side, which hardware
 * prefetchers can follow faster than one run of the same bytes (docs/PERFORMANCE.md#paired-gemv). */
typedef void lowbit_pair_sig(const struct lowbit_matrix *m, int64_t a0, int64_t a1, int64_t b0,
                             int64_t b1, const lowbit_act *a, float *y);
/* x[n] -> q[n], d[n / group], s[n / group] with rounding rule `rule` (LOWBIT_RULE_*) */
typedef void lowbit_quantize_sig(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                                 float *d, int32_t *s);
/* float GEMV for F32 / F16 / BF16 weights (the tied-embedding LM head): y[r - r0] = W[r] . x */
typedef void lowbit_gemv_f32_sig(const float *w, int64_t cols, int64_t r0, int64_t r1,
                                 const float *x, float *y);
typedef void lowbit_gemv_u16_sig(const uint16_t *w, int64_t cols, int64_t r0, int64_t r1,
                                 const float *x, float *y);
/* Reads n bytes (a multiple of 64) as fast as the core can and returns the sum of its 64-bit words
 * mod 2^64: the loop of lowbit_stream_read, the roofline's bandwidth probe (a slow probe would
 * inflate the shares). */
typedef uint64_t lowbit_read_sig(const uint8_t *p, int64_t n);

/* The Walsh-Hadamard transform's kernels (ref/fwht.c is their specification), one table per variant.
 * y = post * (scale * H_n (pre * x)) for one vector of n = 2^k elements (1 <= k <= 30), Sylvester
 * order, unnormalized butterflies.  src may equal dst (in place); otherwise they must not overlap.
 * pre / post (length n, values +-1) may be NULL.  Pass scale = 1 for no scaling. */
typedef void (*lowbit_fwht_run_f32_fn)(const float *src, float *dst, int64_t n, const float *pre,
                                        const float *post, float scale);
typedef void (*lowbit_fwht_run_f64_fn)(const double *src, double *dst, int64_t n,
                                        const double *pre, const double *post, double scale);
/* The m-point stage of an m * 2^k transform, in place: x holds m rows of len = 2^k elements
 * (row j at x + j * len) and becomes x[j][i] = post[j*len+i] * scale * sum_k H_m[j][k] x[k][i],
 * the sum taken as acc = 0, acc +-= x[k][i] for k = 0..m-1 (that order is part of the spec). */
typedef void (*lowbit_fwht_mstage_f32_fn)(float *x, int m, int64_t len, const float *post,
                                          float scale);
typedef void (*lowbit_fwht_mstage_f64_fn)(double *x, int m, int64_t len, const double *post,
                                          double scale);
/* 1 if every one of s[0..n) is exactly +1 or -1 (validation on the hot path, so it is a kernel). */
typedef int (*lowbit_fwht_signs_ok_f32_fn)(const float *s, int64_t n);
typedef int (*lowbit_fwht_signs_ok_f64_fn)(const double *s, int64_t n);
typedef struct lowbit_fwht_kernels {
    int isa; /* lowbit_isa of the variant that filled it */
    lowbit_fwht_run_f32_fn pow2_f32;
    lowbit_fwht_run_f64_fn pow2_f64;
    lowbit_fwht_mstage_f32_fn mstage_f32;
    lowbit_fwht_mstage_f64_fn mstage_f64;
    lowbit_fwht_signs_ok_f32_fn signs_ok_f32;
    lowbit_fwht_signs_ok_f64_fn signs_ok_f64;
} lowbit_fwht_kernels;
/* An FWHT entry: fills every member of *k with its variant's kernels.  Compiled with its ISA's
 * flags, so called only for a variant the CPU runs (the selector builds only those tables). */
typedef void lowbit_fwht_sig(lowbit_fwht_kernels *k);

/* The decoder ops (role OP, their entries' type a LOWBIT_OP_*; ops.c, ops_gdn.c):
 * attention: lowbit_attention's query rows [r0, r1) over the filled caches (ops_attention-inl.h),
 * p scratch of attn_scratch_floats(pos, T) floats. */
typedef void lowbit_attention_sig(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                                  const float *kc, const float *vc, int64_t ctx, int64_t pos,
                                  int64_t window, float scale, float *out, float *p, int64_t r0,
                                  int64_t r1);
/* out[i] = act(gate[i]) * up[i] (SiLU or GELU) for a prefix of the n values; returns its length
 * (the caller finishes with ops_silu / ops_gelu, the same bits). */
typedef int64_t lowbit_gate_mul_sig(const float *gate, const float *up, int64_t n, float *out);
/* y = x / sqrt(mean(x^2) + eps) * w (w NULL: no w) of one row of n, in ops_rms_row's operations
 * (ops_common.h); y may be x. */
typedef void lowbit_rms_norm_sig(const float *x, const float *w, int64_t n, float eps, float *y);
/* The Gated-DeltaNet loops (gdn_kernels, ops_gdn-inl.h): returns the variant's table. */
struct gdn_kernels;
typedef const struct gdn_kernels *lowbit_gdn_sig(void);

typedef lowbit_gemv_sig *lowbit_gemv_fn;
typedef lowbit_gemm_sig *lowbit_gemm_fn;
typedef lowbit_packed_gemv_sig *lowbit_packed_gemv_fn;
typedef lowbit_packed_gemm_sig *lowbit_packed_gemm_fn;
typedef lowbit_pair_sig *lowbit_pair_fn;
typedef lowbit_quantize_sig *lowbit_quantize_act_fn;
typedef lowbit_gemv_f32_sig *lowbit_gemv_f32_fn;
typedef lowbit_gemv_u16_sig *lowbit_gemv_u16_fn;
typedef lowbit_read_sig *lowbit_read_fn;
typedef lowbit_fwht_sig *lowbit_fwht_fn;
typedef lowbit_attention_sig *lowbit_attention_fn;
typedef lowbit_gate_mul_sig *lowbit_gate_mul_fn;
typedef lowbit_rms_norm_sig *lowbit_rms_norm_fn;
typedef lowbit_gdn_sig *lowbit_gdn_fn;

/* The kernel slots of the weight types with quantized file-layout kernels, LOWBIT_K_##ID, in the
 * order of formats.h's lists (LOWBIT_A8_KERNEL_FORMATS, then LOWBIT_GGML_KERNEL_FORMATS). */
#define LOWBIT_K_SLOT_(X, ID, name) LOWBIT_K_##ID,
enum {
    LOWBIT_A8_KERNEL_FORMATS(LOWBIT_K_SLOT_, ~)
    LOWBIT_GGML_KERNEL_FORMATS(LOWBIT_K_SLOT_, ~)
    LOWBIT_K_COUNT
};
#undef LOWBIT_K_SLOT_
int lowbit_kernel_index(int type); /* LOWBIT_K_* or -1 */
int lowbit_type_packs(int type);   /* 1 if lowbit_matrix_pack builds a packed layout (types.c) */
/* The A8 code formats, as X(LOWBIT_K_*, LOWBIT_TYPE_*, name): the one list the kernel list (and
 * the file-layout kernels' definitions: ref/dot.c, x86/file-inl.h) walks.  Q5_0 / Q4_K / Q6_K:
 * LOWBIT_FOR_EACH_KQUANT.  Both are formats.h's lists. */
#define LOWBIT_K_TYPE_NAME_(X, ID, name) X(LOWBIT_K_##ID, LOWBIT_TYPE_##ID, name)
#define LOWBIT_FOR_EACH_QUANT_TYPE(X) LOWBIT_A8_KERNEL_FORMATS(LOWBIT_K_TYPE_NAME_, X)
#define LOWBIT_FOR_EACH_KQUANT(X) LOWBIT_GGML_KERNEL_FORMATS(LOWBIT_K_TYPE_NAME_, X)

/* ---- the list ---------------------------------------------------------------------------------- */

typedef union {
    lowbit_gemv_fn gemv;
    lowbit_gemm_fn gemm;
    lowbit_packed_gemv_fn packed_gemv;
    lowbit_packed_gemm_fn packed_gemm;
    lowbit_pair_fn pair;
    lowbit_quantize_act_fn quantize;
    lowbit_gemv_f32_fn gemv_f32;
    lowbit_gemv_u16_fn gemv_u16;
    lowbit_read_fn read;
    lowbit_fwht_fn fwht;
    lowbit_attention_fn attention;
    lowbit_gate_mul_fn gate_mul;
    lowbit_rms_norm_fn rms_norm;
    lowbit_gdn_fn gdn;
} lowbit_kernel_fn;

/* What an entry needs of the CPU beyond its ISA (a bit set): INTEL, a tuning for Intel cores (a
 * kernel whose best software prefetch differs there: the Intel twin, suffixed _l2pf, is listed
 * first); AMD, a tuning for AMD cores (a prefetch twin suffixed _amdpf, or the kernel of a layout
 * that pays only there); L1_48K, an L1 data cache of 48 KB or more (AMD_L1_48K: an AMD core with
 * one: a twin suffixed _l1pf prefetches into L1 as far ahead as the _amdpf one does into L2, a
 * distance a smaller L1 could not hold); NOT_AMD_L1_48K, any core but those (AMD_NOT_L1_48K: an
 * AMD core with a smaller L1): the pair entries of a GEMV that reads faster there as one run (its
 * _l1pf or _amdpf twin); VBMI, AVX512_VBMI, which the avx512vnni variant does not require.  ASKED is no CPU
 * condition: the kernel of a packed layout that the variant's CPUs read slower than the layout
 * they would get otherwise, so pack.c takes that layout only where it is asked for (PYLOWBIT_*);
 * a matrix packed so runs on it (tested like any entry, for the machines where it may win). */
enum { LOWBIT_NEEDS_ANY = 0, LOWBIT_NEEDS_INTEL = 1, LOWBIT_NEEDS_VBMI = 2,
       LOWBIT_NEEDS_INTEL_VBMI = 3, LOWBIT_NEEDS_ASKED = 4, LOWBIT_NEEDS_AMD = 8,
       LOWBIT_NEEDS_L1_48K = 16, LOWBIT_NEEDS_AMD_L1_48K = 24, LOWBIT_NEEDS_NOT_AMD_L1_48K = 32,
       LOWBIT_NEEDS_AMD_NOT_L1_48K = 40 };

typedef struct lowbit_kernel_entry {
    const char *name;
    int isa;    /* LOWBIT_ISA_*: the variant it is compiled for */
    int type;   /* LOWBIT_TYPE_* it reads, -1: any */
    int layout; /* LOWBIT_LAYOUT_* */
    int role;   /* LOWBIT_ROLE_* */
    int needs;  /* LOWBIT_NEEDS_* */
    /* packed kernels: the matrices it takes, and that predicate's name ("any": every one) */
    int (*accepts)(const struct lowbit_matrix *m);
    const char *when;
    lowbit_kernel_fn fn;
} lowbit_kernel_entry;

extern const lowbit_kernel_entry lowbit_kernel_list[];
extern const int lowbit_kernel_list_count;

/* ---- the tables built from it ----------------------------------------------------------------- */

typedef struct lowbit_kernels {
    int isa; /* the variant this table is for: indexes a packed matrix's plan */
    lowbit_gemv_fn gemv[LOWBIT_K_COUNT];
    lowbit_gemm_fn gemm[LOWBIT_K_COUNT];
    lowbit_quantize_act_fn quantize_act;
    lowbit_gemv_f32_fn gemv_f32;
    lowbit_gemv_u16_fn gemv_f16;
    lowbit_gemv_u16_fn gemv_bf16;
    lowbit_read_fn read_bytes;
    lowbit_fwht_kernels fwht;
    lowbit_attention_fn attention;
    lowbit_gate_mul_fn silu_mul, gelu_mul;
    lowbit_rms_norm_fn rms_norm;
    const struct gdn_kernels *gdn;
} lowbit_kernels;

/* A packed matrix's kernels for one variant, chosen at pack time (pair: NULL, no pairing). */
typedef struct lowbit_packed_plan {
    lowbit_packed_gemv_fn gemv;
    lowbit_pair_fn pair;
    lowbit_packed_gemm_fn gemm;
} lowbit_packed_plan;

/* The active table (initialized on first use, thread-safely). */
const lowbit_kernels *lowbit_active_kernels(void);
/* Fills m->plan for every usable variant (m's shape fields set, m->packed = 1). */
void lowbit_plan_packed(struct lowbit_matrix *m);

/* Scalar reference kernels, also callable directly by tests and by SIMD tails. */
void lowbit_quantize_act_ref(const float *x, int64_t n, int64_t group, int rule, int8_t *q,
                             float *d, int32_t *s);
void lowbit_packed_gemv_ref(const struct lowbit_matrix *m, int64_t r0, int64_t r1,
                            const lowbit_act *a, float *y);
void lowbit_packed_gemm_ref(const struct lowbit_matrix *m, int64_t r0, int64_t r1,
                            const lowbit_act *a, int64_t batch, float *y, int64_t ldy);
/* ref/kquant.c: ggml's Q5_0 / Q4_K / Q6_K codes (weight order) and block decoding */
void lowbit_q5_0_codes(const lowbit_block_q5_0 *b, uint8_t codes[32]);
void lowbit_q4_k_scale_min(const uint8_t scales[12], int k, int *sc, int *m);
void lowbit_q4_k_codes(const lowbit_block_q4_k *b, uint8_t codes[256]);
void lowbit_q6_k_codes(const lowbit_block_q6_k *b, uint8_t codes[256]);
int lowbit_dequantize_kquant(int type, const uint8_t *in, int64_t nb, float *y);
void lowbit_gemm_generic(lowbit_gemv_fn gemv, const void *w, int64_t row_bytes, int64_t r0,
                         int64_t r1, const lowbit_act *a, int64_t batch, float *y, int64_t ldy);

#endif /* LOWBIT_KERNEL_TABLE_H */
