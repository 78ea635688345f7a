/* AVX-512 VNNI GEMV / GEMM of Q1_0 (file layout): q1_0_avx512-inl.h, a quad's codes by a mask
 * test and a masked move. */
#define Q1_VBMI 0
#define KQ(name) name##_avx512vnni
#include "q1_0_avx512-inl.h"
