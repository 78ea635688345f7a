/* AVX2 kernels of the rows16 layout (group-32 GEMV, GEMM): rows16-inl.h with the AVX2
 * multiply-accumulate step (vpmaddubsw). */
#include "rows16-inl.h"
