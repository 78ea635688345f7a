/* liblowbit: ternary and 2-bit LLM kernels with run-time ISA dispatch.
 *
 * Every entry point returns a lowbit_status (0 on success, negative on error) unless it returns a
 * value by nature.  No entry point aborts or prints: bad arguments give LOWBIT_EINVAL & co.
 * Arrays are C-contiguous.  Block data needs only the alignment of its struct (2 bytes).
 */
#ifndef LOWBIT_H
#define LOWBIT_H

#include <stddef.h>
#include <stdint.h>

#include "lowbit/formats.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#if defined(LOWBIT_BUILDING)
#define LOWBIT_API __declspec(dllexport)
#else
#define LOWBIT_API __declspec(dllimport)
#endif
#else
#define LOWBIT_API __attribute__((visibility("default")))
#endif

#define LOWBIT_VERSION_MAJOR 0
#define LOWBIT_VERSION_MINOR 1
#define LOWBIT_VERSION_PATCH 0
/* Bumped whenever a struct in formats.h or a signature here changes incompatibly. */
#define LOWBIT_ABI_VERSION 1

typedef enum lowbit_status {
    LOWBIT_OK = 0,
    LOWBIT_EINVAL = -1, /* bad argument: null pointer, negative size, ... */
    LOWBIT_ETYPE = -2,  /* unknown or unsupported tensor type for this operation */
    LOWBIT_ESIZE = -3,  /* a size is not a multiple of the block / group size */
    LOWBIT_ENOMEM = -4,
    LOWBIT_EISA = -5, /* requested ISA not compiled in or not supported by this CPU */
} lowbit_status;

LOWBIT_API const char *lowbit_version(void);
LOWBIT_API int lowbit_abi_version(void);
LOWBIT_API const char *lowbit_status_str(int status);

/* ---- type traits ---------------------------------------------------------------------------- */

LOWBIT_API int lowbit_type_known(int type);
LOWBIT_API const char *lowbit_type_name(int type); /* "tq2_0", ...; NULL if unknown */
LOWBIT_API int lowbit_type_from_name(const char *name); /* type id, or LOWBIT_ETYPE */
LOWBIT_API int64_t lowbit_type_block_size(int type);  /* weights per block (1 for F32/F16) */
LOWBIT_API int64_t lowbit_type_block_bytes(int type); /* bytes per block */
/* Bytes of one row of n weights, or a negative status if n does not fit the block size.
 * (For I2_S this excludes the per-tensor scale tail.) */
LOWBIT_API int64_t lowbit_row_bytes(int type, int64_t n);
/* Bytes of a whole tensor of nelem weights as stored in GGUF (I2_S: nelem/4 + 32). */
LOWBIT_API int64_t lowbit_tensor_bytes(int type, int64_t nelem);
/* Activation group size used with this weight type: 256 for TQ1_0/TQ2_0/Q4_K/Q6_K (llama.cpp's
 * Q8_K), 128 for PQ2_0/PTQ1_0 (Q8_K's rule per 128 weights: their weight block) and I2_S (with one
 * scale for the whole vector), 32 (Q8_0) for Q1_0/Q2_0/Q5_0/Q8_0.  The rounding rule the library
 * uses for a weight type is lowbit_quantize_act_for's (formats.h). */
LOWBIT_API int64_t lowbit_act_group(int type);
/* The facts of a format in one place (what lowbit_type_block_size & co. and the kernels read). */
typedef struct lowbit_type_facts {
    int type;
    int64_t block_size;  /* weights per block (1 for F32 / F16 / BF16) */
    int64_t block_bytes; /* sizeof its lowbit_block_* struct */
    int scale_offset;    /* offsetof(block, d), its fp16 scale; -1: none (I2_S: one fp32 after the
                          * tensor's codes; float types) */
    int scale2_offset;   /* a second fp16 scale (Q4_K's dmin), -1: none */
    int64_t act_group;   /* lowbit_act_group */
    int act_rule;        /* lowbit_act_rule of its activations (I2_S: as lowbit_set_i2s_act_scale) */
    int code_offset;     /* a weight's value is (code - code_offset) x its scale (Q4_K: - min) */
} lowbit_type_facts;
/* LOWBIT_OK, LOWBIT_ETYPE (unknown type) or LOWBIT_EINVAL (out is NULL). */
LOWBIT_API int lowbit_type_facts_get(int type, lowbit_type_facts *out);
/* The weight types the library multiplies (every type of the facts table but the activation-only
 * Q8_K), in the table's order: writes up to cap of their ids to ids (NULL: none) and returns how
 * many there are.  Bindings build their format tables from it and lowbit_type_facts_get. */
LOWBIT_API int lowbit_weight_types(int *ids, int cap);
/* I2_S's activation scale, process-wide: LOWBIT_I2S_ACT_BITNET (the default: bitnet.cpp's
 * 127 / max|x|, formats.h S8) or LOWBIT_I2S_ACT_POW2 (that step rounded up to a power of two,
 * formats.h P2: up to one bit of activation resolution less).  Returns the previous mode, or
 * LOWBIT_EINVAL.  Not meant to change while another thread multiplies. */
enum { LOWBIT_I2S_ACT_BITNET = 0, LOWBIT_I2S_ACT_POW2 = 1 };
LOWBIT_API int lowbit_set_i2s_act_scale(int mode);

/* ---- codecs (scalar reference; not on the hot path) ----------------------------------------- */

/* Quantize n floats (a whole tensor, row-major) into `out` (lowbit_tensor_bytes(type, n) bytes).
 * Ternary/2-bit types follow their owners' rule: d = max|w| per block (per tensor for I2_S),
 * code = round-half-away(w / d) + 1 clamped to the code range.  NaN inputs give LOWBIT_EINVAL.
 * ggml's Q5_0 / Q4_K / Q6_K are decoded and multiplied but not written: LOWBIT_ETYPE. */
LOWBIT_API int lowbit_quantize(int type, const float *x, int64_t n, void *out);
/* Dequantize a whole tensor of n weights. */
LOWBIT_API int lowbit_dequantize(int type, const void *w, int64_t n, float *out);

/* ---- activations ---------------------------------------------------------------------------- */

/* Quantize x[n] into the A8 layout of formats.h: q[n], d[n/group], s[n/group].  The rounding
 * rule follows the group size: 256 is llama.cpp's Q8_K, 32 its Q8_0, 128 P2, others pylowbit's A8. */
LOWBIT_API int lowbit_quantize_act(const float *x, int64_t n, int64_t group, int8_t *q, float *d,
                                   int32_t *s);
/* Quantize x[n] as the library does for weight type `type` (group lowbit_act_group(type), the
 * type's rule, formats.h): q[n], d[n/group], s[n/group].  Float weight types: LOWBIT_ETYPE.
 * (Added in 0.1: a new function, same ABI version.) */
LOWBIT_API int lowbit_quantize_act_for(int type, const float *x, int64_t n, int8_t *q, float *d,
                                       int32_t *s);

/* ---- matrix-vector / matrix-matrix on the file layout ---------------------------------------- */

/* y[rows] = W[rows, cols] . x[cols], W in `type` (row-major, as stored in GGUF).  x is quantized
 * to A8 internally (F32/F16 weights use x as float).  threads <= 0: the library default. */
LOWBIT_API int lowbit_gemv(int type, const void *w, int64_t rows, int64_t cols, const float *x,
                           float *y, int threads);
/* y[batch, rows] = X[batch, cols] . W^T. */
LOWBIT_API int lowbit_gemm(int type, const void *w, int64_t rows, int64_t cols, const float *x,
                           int64_t batch, float *y, int threads);
/* Same, with activations already quantized (a: `batch` A8 vectors, group lowbit_act_group(type)). */
LOWBIT_API int lowbit_gemm_act(int type, const void *w, int64_t rows, int64_t cols,
                               const lowbit_act *a, int64_t batch, float *y, int threads);

/* ---- packed matrices: repacked once at load for the decode path ------------------------------
 *
 * lowbit_matrix_pack copies a weight matrix (file layout, as above) into a row-interleaved layout
 * whose GEMV reads one sequential run of memory (see native/src/internal.h for the exact layout).
 * TQ1_0, TQ2_0, I2_S, Q2_0, PQ2_0 and PTQ1_0 are repacked (the file buffer may be released
 * afterwards), and Q8_0 where the active variant has a kernel for its packed layout (the same
 * bytes in 16-row sets; lowbit_matrix_is_packed says which); other types (Q1_0, F16, F32, Q8_0
 * elsewhere) are not: the matrix then *borrows* `w`, which must outlive it, and runs the
 * file-layout kernels.  Results equal lowbit_gemv / lowbit_gemm on the
 * file layout.  threads: for the repack itself (<= 0: library default).  On failure returns NULL
 * and sets *status (status may be NULL). */
typedef struct lowbit_matrix lowbit_matrix;
LOWBIT_API lowbit_matrix *lowbit_matrix_pack(int type, const void *w, int64_t rows, int64_t cols,
                                             int threads, int *status);
LOWBIT_API void lowbit_matrix_free(lowbit_matrix *m);
LOWBIT_API int64_t lowbit_matrix_nbytes(const lowbit_matrix *m); /* bytes owned (0 if borrowed) */

/* The packed copy in a caller's buffer (added in 0.1: new functions, same ABI version), so that a
 * runtime holding its own tensors keeps one copy of a weight: the repacked one.
 *
 * lowbit_matrix_packed_nbytes: the bytes lowbit_matrix_pack_into needs for the matrix, in the
 * layout lowbit_matrix_pack would choose now (this CPU's variant, PYLOWBIT_ISA and the layout
 * overrides): a 64-byte header (type, shape, layout), the codes and scales, 64 bytes of slack.
 * 0 for a matrix it does not pack (a type that is not repacked, no rows or no columns); a
 * negative status for an unknown type, negative sizes or rows of part of a block.
 *
 * lowbit_matrix_pack_into: lowbit_matrix_pack's copy (the same layout, the same results), written
 * into dst (dst_bytes >= lowbit_matrix_packed_nbytes; its address a multiple of
 * LOWBIT_PACKED_ALIGN, as the kernels' aligned vector loads need).  The matrix *borrows* dst,
 * which must outlive it: lowbit_matrix_free leaves dst alone, lowbit_matrix_nbytes gives 0.  The
 * file buffer w may be released afterwards.  LOWBIT_EINVAL for a null or misaligned dst,
 * LOWBIT_ESIZE for a dst too small or an empty matrix, LOWBIT_ETYPE for a type that is not
 * repacked (lowbit_matrix_pack borrows those as they are).  lowbit_weights_alloc gives a dst in
 * huge pages where the system grants them, as lowbit_matrix_pack's own copies are.
 *
 * lowbit_matrix_wrap: a matrix over `nbytes` bytes that lowbit_matrix_pack_into wrote in this
 * process (or a copy of them), borrowing them, without packing again: the header says the type,
 * shape and layout.  LOWBIT_EINVAL if the bytes do not start with such a header (or are
 * misaligned), LOWBIT_ESIZE if nbytes is short of what it describes.  Any code and scale bytes
 * are safe to multiply; the bytes are not a file format (the layout depends on the CPU).
 *
 * lowbit_matrix_unpack: writes the file layout of any matrix of lowbit_matrix_pack, _pack_into or
 * _wrap (nbytes == lowbit_tensor_bytes(type, rows * cols), else LOWBIT_ESIZE) to file_bytes, on
 * `threads` threads (<= 0: library default).  The weights come back exactly: every code and
 * fp16 scale, I2_S's 32-byte tail (fp32 tensor scale and padding) byte for byte.  So do the
 * bytes of a canonical file: TQ1_0 / PTQ1_0 bytes as their encoder writes them (a byte holds
 * trits t as ceil(q 256 / 243), q their base-3 number; a qh byte's unused fifth trit 0); a base-3
 * byte that reads as the same trits otherwise comes back canonical.  Every other format's bytes
 * come back as they were.  A type that is not repacked: the borrowed bytes, copied. */
#define LOWBIT_PACKED_ALIGN 64
LOWBIT_API int64_t lowbit_matrix_packed_nbytes(int type, int64_t rows, int64_t cols);
LOWBIT_API lowbit_matrix *lowbit_matrix_pack_into(int type, const void *w, int64_t rows,
                                                  int64_t cols, void *dst, int64_t dst_bytes,
                                                  int threads, int *status);
LOWBIT_API lowbit_matrix *lowbit_matrix_wrap(const void *packed, int64_t nbytes, int *status);
LOWBIT_API int lowbit_matrix_unpack(const lowbit_matrix *m, void *file_bytes, int64_t nbytes,
                                    int threads);
/* lowbit_matrix_unpack_rows: the file layout of the n rows idx[0..n) (each in [0, rows), else
 * LOWBIT_EINVAL) one after another into out (n * lowbit_row_bytes(type, cols) bytes), as
 * lowbit_matrix_unpack writes them: a lookup of a few rows (a tied embedding table) in a matrix
 * kept only packed.  Not for I2_S (its tail is the tensor's, LOWBIT_ETYPE).  (Added in 0.1.) */
LOWBIT_API int lowbit_matrix_unpack_rows(const lowbit_matrix *m, const int64_t *idx, int64_t n,
                                         void *out);
/* Memory for a packed copy the caller owns (lowbit_matrix_pack_into's dst), the allocator of
 * lowbit_matrix_pack's own copies: nbytes (> 0) at a LOWBIT_PACKED_ALIGN-aligned address; on
 * Linux, from 64 KB on, carved out of shared 2 MB-aligned slabs with the transparent-huge-page
 * hint, so that copies packed one after another stream from huge pages (in 4 KB pages a stream
 * takes a TLB miss, and the hardware prefetcher stops, every 4 KB).  NULL when out of memory.
 * Freed with lowbit_weights_free(p, nbytes), given the same nbytes.  (Added in 0.1: new
 * functions, same ABI version.) */
LOWBIT_API void *lowbit_weights_alloc(size_t nbytes);
LOWBIT_API void lowbit_weights_free(void *p, size_t nbytes);
LOWBIT_API int lowbit_matrix_is_packed(const lowbit_matrix *m);
LOWBIT_API int lowbit_matrix_type(const lowbit_matrix *m);
LOWBIT_API int64_t lowbit_matrix_rows(const lowbit_matrix *m);
LOWBIT_API int64_t lowbit_matrix_cols(const lowbit_matrix *m);
/* y[rows] = W . x[cols] */
LOWBIT_API int lowbit_matrix_gemv(const lowbit_matrix *m, const float *x, float *y, int threads);
/* y[batch, rows] = X[batch, cols] . W^T */
LOWBIT_API int lowbit_matrix_gemm(const lowbit_matrix *m, const float *x, int64_t batch, float *y,
                                  int threads);
LOWBIT_API int lowbit_matrix_gemm_act(const lowbit_matrix *m, const lowbit_act *a, int64_t batch,
                                      float *y, int threads);

/* Several matrices on one input in one call (added in 0.1: new functions, same ABI version).
 * A decode step multiplies one vector by q, k and v (then another by gate and up): this quantizes
 * it once per activation group and runs every matrix's rows as one job of the thread pool, instead
 * of one job per matrix.  Results equal lowbit_matrix_gemm on each matrix.
 *   ys[j][batch, ms[j] rows] = X[batch, cols] . ms[j]^T  for j < n (1 <= n <= LOWBIT_MULTI_MAX); all
 *   matrices have `cols` columns (else LOWBIT_ESIZE); no y may overlap x or another y. */
#define LOWBIT_MULTI_MAX 8
LOWBIT_API int lowbit_matrix_gemm_multi(const lowbit_matrix *const *ms, int n, const float *x,
                                        int64_t batch, float *const *ys, int threads);
/* Gated feed-forward input: y = act(X . gate^T) * (X . up^T), act a lowbit_act_kind of
 * lowbit/ops.h (applied exactly as lowbit_act_mul), gate and up of the same shape.  y_up (same
 * size as y, distinct from it) receives X . up^T.  The activation is applied to each row tile as
 * soon as both of its products are done, by the thread that finished the second: it is split over
 * the threads too, and needs no second call. */
LOWBIT_API int lowbit_matrix_gemm_glu(const lowbit_matrix *gate, const lowbit_matrix *up, int act,
                                      const float *x, int64_t batch, float *y, float *y_up,
                                      int threads);

/* Read-ahead hint for the next lowbit_matrix_gemm_multi (act -1) or lowbit_matrix_gemm_glu (act
 * its lowbit_act_kind) of batch 1 on ms[0..n) with `threads`: the pool's idle threads prefetch the
 * first weights each thread will read while the caller does other work (norms, attention), so the
 * call starts on cached weights.  Returns at once; no effect on any result.  Bad arguments give
 * the status the call would give. */
LOWBIT_API int lowbit_matrix_readahead(const lowbit_matrix *const *ms, int n, int act, int threads);

/* ---- benchmark helper ----------------------------------------------------------------------- */

/* Reads nbytes (a multiple of 64) of buf on `threads` threads and returns the sum of its 64-bit
 * words (native order) mod 2^64, so that no read can be skipped: time it for
 * the machine's streaming read bandwidth.  Split over the pool as the GEMV kernels split their
 * rows; the read loop is the fastest one measured (the active ISA variant's). */
LOWBIT_API uint64_t lowbit_stream_read(const void *buf, int64_t nbytes, int threads);

/* ---- Walsh-Hadamard transform --------------------------------------------------------------- */

enum { LOWBIT_FWHT_SIGNS_THEN_ROTATE = 0, LOWBIT_FWHT_ROTATE_THEN_SIGNS = 1 };

/* In place: for each of `rows` vectors of length n (contiguous), for each block-wide slice,
 * apply the Sylvester-order Walsh-Hadamard transform (scaled by 1/sqrt(block) if normalize).
 * block is a power of two >= 2, or m * 2^k with m in {12, 20, 28}; n % block == 0.
 * signs (length n, values +-1, may be NULL) are applied before (order 0) or after (order 1). */
LOWBIT_API int lowbit_fwht_f32(float *x, int64_t rows, int64_t n, int64_t block, int normalize,
                               const float *signs, int order, int threads);
LOWBIT_API int lowbit_fwht_f64(double *x, int64_t rows, int64_t n, int64_t block, int normalize,
                               const double *signs, int order, int threads);
/* Decoder hot path in one pass: x' = H(signs * x) blockwise (normalized), then A8-quantize x'.
 * x is not modified. */
LOWBIT_API int lowbit_fwht_quantize_act(const float *x, int64_t n, int64_t block,
                                        const float *signs, int64_t group, int8_t *q, float *d,
                                        int32_t *s);

/* ---- ISA dispatch --------------------------------------------------------------------------- */

typedef enum lowbit_isa {
    LOWBIT_ISA_SCALAR = 0,
    LOWBIT_ISA_AVX2 = 1,
    LOWBIT_ISA_AVX512VNNI = 2,
    LOWBIT_ISA_NEON = 3,
    LOWBIT_ISA_DOTPROD = 4,
    LOWBIT_ISA_AVXVNNI = 5, /* AVX2 + AVX-VNNI (256-bit VEX vpdpbusd), without AVX-512 */
    /* the avxvnni kernels with vpdpbusd emulated in AVX2: tests only (built with the CMake option
     * LOWBIT_AVXVNNI_EMULATED), never chosen unless forced */
    LOWBIT_ISA_AVXVNNI_EMULATED = 6,
    LOWBIT_ISA_I8MM = 7, /* AArch64 FEAT_I8MM (SMMLA) on top of dotprod */
    LOWBIT_ISA_COUNT = 8,
} lowbit_isa;

LOWBIT_API const char *lowbit_isa_name(int isa);      /* "scalar", "avx2", ... */
LOWBIT_API int lowbit_isa_from_name(const char *name); /* isa id or LOWBIT_EISA */
LOWBIT_API unsigned lowbit_isa_compiled(void);        /* bit i set: variant i built in */
LOWBIT_API unsigned lowbit_isa_supported(void);       /* bit i set: CPU + OS can run variant i */
LOWBIT_API int lowbit_isa_active(void);
/* Force a variant (tests, bug reports).  LOWBIT_EISA if not compiled or not supported.
 * The first call into the library honours the PYLOWBIT_ISA environment variable the same way;
 * if that names an unusable variant, lowbit_isa_env_error() says why and the best one is used. */
LOWBIT_API int lowbit_set_isa(int isa);
LOWBIT_API const char *lowbit_isa_env_error(void); /* NULL if PYLOWBIT_ISA was fine or unset */

/* ---- the kernel list ------------------------------------------------------------------------ */

/* Every kernel the build contains, one entry each, with what it computes.  A variant runs, for
 * each (weight type, layout, role), the first entry of its fallback chain that takes the matrix
 * (avx512vnni -> avx2 -> scalar, avxvnni -> avx2 -> scalar, i8mm -> dotprod -> neon -> scalar;
 * an entry's `when` names the matrices it takes, its `requires` a CPU condition beyond the
 * ISA's own). */
typedef enum lowbit_layout {
    LOWBIT_LAYOUT_NONE = 0,   /* not a weight kernel: quantizer, read probe */
    LOWBIT_LAYOUT_FILE = 1,   /* the weights as stored in GGUF */
    LOWBIT_LAYOUT_PACKED = 2, /* lowbit_matrix_pack's row-interleaved copy, 2-bit codes */
    LOWBIT_LAYOUT_BASE3 = 3,  /* lowbit_matrix_pack's dense base-3 copy (TQ1_0, PTQ1_0) */
    LOWBIT_LAYOUT_ROWS16 = 4, /* 2-bit codes in 16-row sets, a lane a row (Q2_0, PQ2_0) */
    LOWBIT_LAYOUT_BASE3F = 5, /* the dense base-3 copy with file-style bytes (trits as a fraction) */
    LOWBIT_LAYOUT_ROWS64 = 6, /* Q1_0's code bytes in 64-row tiles, a byte lane a row */
    LOWBIT_LAYOUT_Q8ROWS = 7, /* Q8_0 in 16-row sets, a lane a row, codes offset by 128 */
} lowbit_layout;
typedef enum lowbit_role {
    LOWBIT_ROLE_GEMV = 0,
    LOWBIT_ROLE_PAIR_GEMV = 1, /* two row ranges of one packed matrix in one pass */
    LOWBIT_ROLE_GEMM = 2,
    LOWBIT_ROLE_QUANTIZE = 3, /* float activations to A8 codes */
    LOWBIT_ROLE_FLOAT_GEMV = 4,
    LOWBIT_ROLE_READ = 5, /* the bandwidth probe of lowbit_stream_read */
    LOWBIT_ROLE_FWHT = 6, /* the Walsh-Hadamard transform's kernels (one table per variant) */
    LOWBIT_ROLE_OP = 7,   /* a decoder op's loop (lowbit/ops.h): its `type` is the lowbit_op */
    LOWBIT_ROLE_COUNT = 8,
} lowbit_role;
/* The decoder ops with SIMD variants, the `type` of their kernel-list entries. */
typedef enum lowbit_op {
    LOWBIT_OP_ATTENTION = 0, /* lowbit_attention's per-row loop */
    LOWBIT_OP_SILU_MUL = 1,  /* lowbit_act_mul(LOWBIT_ACT_SILU) */
    LOWBIT_OP_GELU_MUL = 2,  /* lowbit_act_mul(LOWBIT_ACT_GELU_TANH) */
    LOWBIT_OP_GDN = 3,       /* the Gated-DeltaNet ops' loops, one table */
    LOWBIT_OP_RMS_NORM = 4,  /* lowbit_rms_norm's row */
    LOWBIT_OP_COUNT = 5,
} lowbit_op;
typedef struct lowbit_kernel_info {
    const char *name;     /* the C function's name: "packed_gemv256_avx2" */
    int isa;              /* lowbit_isa it is compiled for */
    int type;             /* weight type it reads, -1: any; role OP: the lowbit_op */
    int layout;           /* lowbit_layout */
    int role;             /* lowbit_role */
    const char *requires; /* beyond the ISA: "", a tuning ("intel", "amd", "amd,l1-48k",
                           * "not amd,l1-48k", "amd,not l1-48k"), "vbmi", "intel,vbmi", "asked" */
    const char *when;     /* the matrices it takes: "any" or a predicate's name */
} lowbit_kernel_info;
LOWBIT_API int lowbit_kernel_count(void);
/* Entry i (0 <= i < lowbit_kernel_count()) into *info: LOWBIT_OK, or LOWBIT_EINVAL. */
LOWBIT_API int lowbit_kernel_get(int i, lowbit_kernel_info *info);
LOWBIT_API const char *lowbit_role_name(int role);     /* "gemv", "pair_gemv", ...; NULL if unknown */
LOWBIT_API const char *lowbit_op_name(int op); /* "attention", "silu_mul", "gelu_mul", "gdn", "rms_norm"; NULL: unknown */
LOWBIT_API const char *lowbit_layout_name(int layout); /* "none", "file", "packed", "base3", "rows16", "base3f", "rows64", "q8rows"; NULL if unknown */
/* The entry variant `isa` runs for `role` on weights of `type` in `layout`, rows of `cols` weights
 * (packed: the matrix lowbit_matrix_pack would make of them; cols may be 0 where it does not
 * matter); type -1 for the quantizer and the read probe.  -1 if none (no pairing, or a type the
 * layout does not hold), LOWBIT_EISA if the variant is not usable here, LOWBIT_EINVAL for bad
 * arguments. */
LOWBIT_API int lowbit_kernel_selected(int isa, int type, int layout, int role, int64_t cols);
/* Tests: entry i wins wherever it fits (its role, layout and type, its `when`, its variant in
 * the chain, an instruction set it requires), whatever its place in the list and a tuning it
 * requires (a vendor, an L1 size); -1 restores the list's order.
 * Applies to tables at once and to packed matrices packed afterwards.  Not meant to be called
 * while another thread multiplies.  LOWBIT_OK or LOWBIT_EINVAL. */
LOWBIT_API int lowbit_kernel_prefer(int i);

/* ---- threads -------------------------------------------------------------------------------- */

/* Default thread count for calls that pass threads <= 0: lowbit_set_threads' value, else
 * PYLOWBIT_THREADS, else one per physical performance core the process may run on (SMT siblings
 * once, efficiency cores of a hybrid CPU left out, within the CPU affinity mask). */
LOWBIT_API int lowbit_get_threads(void);
LOWBIT_API int lowbit_set_threads(int threads);
/* lowbit_pool_keep_awake(1) keeps the pool's idle threads spinning (and reading ahead, see
 * lowbit_matrix_readahead) instead of sleeping after PYLOWBIT_SPIN_US, until as many
 * lowbit_pool_keep_awake(0) calls: for a host that runs its own work for longer between calls
 * (a Python model's layers).  A spinning thread yields its core to any runnable thread.  Returns
 * the holds left after the call. */
LOWBIT_API int lowbit_pool_keep_awake(int on);
/* How the default was chosen, in words (valid until the next lowbit_set_threads). */
LOWBIT_API const char *lowbit_threads_origin(void);
/* The default the topology rule gives for a Linux sysfs tree at sys_root ("/sys"; NULL: none) and
 * the CPUs in allowed_cpus, a kernel CPU list such as "0-3,8" (NULL: the tree's online CPUs).
 * Writes the reason into why; returns the count, or LOWBIT_EINVAL for a malformed CPU list. */
LOWBIT_API int lowbit_threads_for_topology(const char *sys_root, const char *allowed_cpus, char *why,
                                           size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWBIT_H */
