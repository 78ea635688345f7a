/* Walsh-Hadamard transform: the public entry points (lowbit.h), run by the active variant's
 * kernels (the sizes and the rounding they keep: ref/fwht.c). */
#include <stdlib.h>

#include "fwht_kernels.h"

/* The active variant's table, built by the selector from the kernel list (role FWHT). */
const lowbit_fwht_kernels *lowbit_active_fwht(void) { return &lowbit_active_kernels()->fwht; }

/* ---- public API ------------------------------------------------------------------------------ */

/* Split a block size into m * 2^k; returns m (1 for a power of two >= 2) or 0 if unsupported. */
static int split_block(int64_t block, int64_t *pow2) {
    static const int MS[3] = {12, 20, 28};
    if (block >= 2 && block <= ((int64_t)1 << 40) && (block & (block - 1)) == 0) {
        *pow2 = block;
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        int64_t p = block / MS[i];
        if (block % MS[i] == 0 && p >= 1 && (p & (p - 1)) == 0) {
            *pow2 = p;
            return MS[i];
        }
    }
    return 0;
}

/* Elements per parallel task: large enough that the hand-out cost (~1 us) stays in the noise. */
#define FWHT_TASK_ELEMS ((int64_t)1 << 16)

#define DEFINE_FWHT_API(T, SUF)                                                                    \
    typedef struct {                                                                               \
        const lowbit_fwht_kernels *k;                                                              \
        T *x;                                                                                      \
        const T *pre, *post;                                                                       \
        int64_t n, block, pow2, nblk_row, total_blocks, blocks_per_task;                           \
        int m;                                                                                     \
        T scale;                                                                                   \
    } fwht_job_##SUF;                                                                              \
                                                                                                   \
    /* One block of block = m * pow2 elements, src -> dst (may be equal): the pow2-point transform \
     * of each of the m chunks, then the m-point stage across them (m = 1: a power of two). */    \
    static void fwht_block_##SUF(const lowbit_fwht_kernels *k, const T *src, T *dst, int64_t block, \
                                 int m, int64_t pow2, const T *pre, const T *post, T scale) {      \
        if (m == 1) {                                                                              \
            k->pow2_##SUF(src, dst, block, pre, post, scale);                                      \
            return;                                                                                \
        }                                                                                          \
        for (int a = 0; a < m; a++)                                                                \
            k->pow2_##SUF(src + a * pow2, dst + a * pow2, pow2, pre ? pre + a * pow2 : NULL, NULL, \
                          (T)1);                                                                   \
        k->mstage_##SUF(dst, m, pow2, post, scale);                                                \
    }                                                                                              \
                                                                                                   \
    static void fwht_blocks_##SUF(const fwht_job_##SUF *J, int64_t b0, int64_t b1) {               \
        for (int64_t b = b0; b < b1; b++) {                                                        \
            T *xb = J->x + b * J->block;                                                           \
            const int64_t off = (b % J->nblk_row) * J->block; /* position within its row */        \
            fwht_block_##SUF(J->k, xb, xb, J->block, J->m, J->pow2, J->pre ? J->pre + off : NULL,  \
                             J->post ? J->post + off : NULL, J->scale);                            \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void fwht_task_##SUF(void *ctx, int64_t t) {                                            \
        const fwht_job_##SUF *J = (const fwht_job_##SUF *)ctx;                                     \
        int64_t b0 = t * J->blocks_per_task, b1 = b0 + J->blocks_per_task;                         \
        fwht_blocks_##SUF(J, b0, b1 < J->total_blocks ? b1 : J->total_blocks);                     \
    }                                                                                              \
                                                                                                   \
    int lowbit_fwht_##SUF(T *x, int64_t rows, int64_t n, int64_t block, int normalize,             \
                          const T *signs, int order, int threads) {                                \
        if (!x || rows < 0 || n < 0) return LOWBIT_EINVAL;                                         \
        if (order != LOWBIT_FWHT_SIGNS_THEN_ROTATE && order != LOWBIT_FWHT_ROTATE_THEN_SIGNS)      \
            return LOWBIT_EINVAL;                                                                  \
        if (block <= 0) block = n; /* 0: the whole row is one block */                             \
        int64_t pow2;                                                                              \
        const int m = split_block(block, &pow2);                                                   \
        if (!m) return LOWBIT_ESIZE;                                                               \
        if (n % block) return LOWBIT_ESIZE;                                                        \
        const lowbit_fwht_kernels *k = lowbit_active_fwht();                                       \
        if (signs && !k->signs_ok_##SUF(signs, n)) return LOWBIT_EINVAL;                           \
        if (rows == 0 || n == 0) return LOWBIT_OK;                                                 \
        fwht_job_##SUF J;                                                                          \
        J.k = k;                                                                                   \
        J.x = x;                                                                                   \
        J.pre = order == LOWBIT_FWHT_SIGNS_THEN_ROTATE ? signs : NULL;                             \
        J.post = order == LOWBIT_FWHT_ROTATE_THEN_SIGNS ? signs : NULL;                            \
        J.n = n;                                                                                   \
        J.block = block;                                                                           \
        J.pow2 = pow2;                                                                             \
        J.m = m;                                                                                   \
        J.nblk_row = n / block;                                                                    \
        J.total_blocks = rows * J.nblk_row;                                                        \
        J.scale = normalize ? (T)(1.0 / sqrt((double)block)) : (T)1;                               \
        J.blocks_per_task = FWHT_TASK_ELEMS / block > 0 ? FWHT_TASK_ELEMS / block : 1;             \
        const int64_t ntasks = (J.total_blocks + J.blocks_per_task - 1) / J.blocks_per_task;       \
        if (ntasks <= 1 || threads == 1)                                                           \
            fwht_blocks_##SUF(&J, 0, J.total_blocks);                                              \
        else                                                                                       \
            lowbit_parallel_for(ntasks, fwht_task_##SUF, &J, threads);                             \
        return LOWBIT_OK;                                                                          \
    }
DEFINE_FWHT_API(float, f32)
DEFINE_FWHT_API(double, f64)

/* Fused decoder path.  The row is processed in chunks of c = max(block, group) elements (one divides
 * the other, else c is the whole row): each chunk is transformed into a buffer that stays in L1/L2
 * and quantized from there while hot.  The quantizer is the active dot-kernel table's
 * quantize_act -- the one A8 quantizer of each ISA, not a copy -- so the result is exactly
 * lowbit_quantize_act(lowbit_fwht_f32(x)) whatever its rounding: groups never straddle a chunk,
 * and the transform is bit-exact across variants. */
#define FUSED_STACK 4096

int lowbit_fwht_quantize_act(const float *x, int64_t n, int64_t block, const float *signs,
                             int64_t group, int8_t *q, float *d, int32_t *s) {
    if (!x || !q || !d || !s || n < 0 || group <= 0) return LOWBIT_EINVAL;
    if (block <= 0) block = n;
    int64_t pow2;
    const int m = split_block(block, &pow2);
    if (!m) return LOWBIT_ESIZE;
    if (n % block || n % group) return LOWBIT_ESIZE;
    const lowbit_fwht_kernels *k = lowbit_active_fwht();
    if (signs && !k->signs_ok_f32(signs, n)) return LOWBIT_EINVAL;
    if (n == 0) return LOWBIT_OK;
    const lowbit_quantize_act_fn quant = lowbit_active_kernels()->quantize_act;
    const int rule = lowbit_act_rule_of_group(group); /* lowbit_quantize_act's mapping */
    const float scale = (float)(1.0 / sqrt((double)block));
    int64_t c = n; /* P2 (I2_S): one scale for the whole row, so the whole row at once */
    if (rule == LOWBIT_RULE_P2) c = n;
    else if (block % group == 0) c = block;
    else if (group % block == 0) c = group;
    float stackbuf[FUSED_STACK] __attribute__((aligned(64)));
    float *buf = c <= FUSED_STACK ? stackbuf : (float *)malloc((size_t)c * sizeof(float));
    if (!buf) return LOWBIT_ENOMEM;
    for (int64_t c0 = 0; c0 < n; c0 += c) {
        for (int64_t b0 = c0; b0 < c0 + c; b0 += block)
            fwht_block_f32(k, x + b0, buf + (b0 - c0), block, m, pow2, signs ? signs + b0 : NULL,
                           NULL, scale);
        quant(buf, c, group, rule, q + c0, d + c0 / group, s + c0 / group);
    }
    if (buf != stackbuf) free(buf);
    return LOWBIT_OK;
}
