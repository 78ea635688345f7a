/* The rows16 layout of 2-bit matrices (packed.h, above struct lowbit_matrix): its scalar
 * references (the 2-bit layout's own, which read either placement). */
#include "../internal.h"

void lowbit_rows16_gemv_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            float *y) {
    lowbit_packed_gemv_ref(m, r0, r1, a, y);
}

void lowbit_rows16_gemm_ref(const lowbit_matrix *m, int64_t r0, int64_t r1, const lowbit_act *a,
                            int64_t batch, float *y, int64_t ldy) {
    lowbit_packed_gemm_ref(m, r0, r1, a, batch, y, ldy);
}
