/* AVX2 kernels of the rows16 layout (GEMVs, GEMM): rows16-inl.h with the AVX2
 * multiply-accumulate step (vpmaddubsw). */
#include "rows16-inl.h"
