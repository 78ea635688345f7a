/* AVX2 kernels of Q1_0's rows64 layout (GEMV, GEMM): rows64_q1_0-inl.h with the AVX2
 * multiply-accumulate step (vpmaddubsw). */
#include "rows64_q1_0-inl.h"
