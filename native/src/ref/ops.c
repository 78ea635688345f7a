/* The scalar entries of the decoder ops (kernel_list.inc, role OP): the attention loop and the
 * gated activations and the RMS norm's row (ops_attention-inl.h, ops_common.h), the Gated-DeltaNet
 * loops (ops_gdn-inl.h).
 * The selector picks a variant's; the public entry points are ops.c and ops_gdn.c. */
#include "../kernel_table.h"
#include "../ops_gdn-inl.h"

lowbit_attention_sig attention_loop_ref;
lowbit_gate_mul_sig silu_mul_ref, gelu_mul_ref;
lowbit_rms_norm_sig rms_norm_ref;

void attention_loop_ref(const float *q, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                        const float *kc, const float *vc, int64_t ctx, int64_t pos, int64_t window,
                        float scale, float *out, float *p, int64_t r0, int64_t r1) {
    attention_loop(q, H, Hkv, hd, vd, kc, vc, ctx, pos, window, scale, out, p, r0, r1);
}

int64_t silu_mul_ref(const float *gate, const float *up, int64_t n, float *out) {
    return ops_silu_mul(gate, up, n, out);
}

int64_t gelu_mul_ref(const float *gate, const float *up, int64_t n, float *out) {
    return ops_gelu_mul(gate, up, n, out);
}

void rms_norm_ref(const float *x, const float *w, int64_t n, float eps, float *y) {
    ops_rms_row(x, w, n, eps, y);
}

static const gdn_kernels gdn_scalar = GDN_KERNELS;

lowbit_gdn_sig gdn_ref;
const gdn_kernels *gdn_ref(void) { return &gdn_scalar; }
