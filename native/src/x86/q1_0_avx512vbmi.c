/* AVX-512 VNNI + VBMI GEMV / GEMM of Q1_0 (file layout): q1_0_avx512-inl.h, a quad's codes by
 * one vpermb lookup (listed with needs VBMI). */
#define Q1_VBMI 1
#define KQ(name) name##_avx512vbmi
#include "q1_0_avx512-inl.h"
