/* The rows64 GEMM of Q1_0 for AVX-512 VNNI without VBMI: tiles decoded back to the file layout
 * (rows64_decode-inl.h), the file layout's GEMM of this variant on them.  (The GEMV there is
 * avx2's, through the fallback chain; with VBMI both are rows64_q1_0_avx512vbmi.c's.) */
#include "rows64_decode-inl.h"

/* the file layout's GEMM (q1_0_avx512vnni.c) */
lowbit_gemm_sig gemm_q1_0_avx512vnni;

void rows64_gemm_q1_0_avx512vnni(const lowbit_matrix *m, int64_t r0, int64_t r1,
                                 const lowbit_act *a, int64_t batch, float *y, int64_t ldy) {
    rows64_gemm_decoded(m, r0, r1, a, batch, y, ldy, gemm_q1_0_avx512vnni);
}
