/* The public activation quantizer entry points: argument checks, then the active variant's
 * quantizer with the rule of the group (lowbit_quantize_act) or of the weight type (_for). */
#include "internal.h"

int lowbit_quantize_act(const float *x, int64_t n, int64_t group, int8_t *q, float *d, int32_t *s) {
    if (!x || !q || !d || !s || n < 0 || group <= 0) return LOWBIT_EINVAL;
    if (n % group) return LOWBIT_ESIZE;
    lowbit_active_kernels()->quantize_act(x, n, group, lowbit_act_rule_of_group(group), q, d, s);
    return LOWBIT_OK;
}

int lowbit_quantize_act_for(int type, const float *x, int64_t n, int8_t *q, float *d, int32_t *s) {
    if (!x || !q || !d || !s || n < 0) return LOWBIT_EINVAL;
    if (lowbit_kernel_index(type) < 0) return LOWBIT_ETYPE; /* float weights take x itself */
    const int64_t group = lowbit_act_group(type);
    if (n % group) return LOWBIT_ESIZE;
    lowbit_active_kernels()->quantize_act(x, n, group, lowbit_act_rule_of_type(type), q, d, s);
    return LOWBIT_OK;
}
