/* AVX2 GEMV / GEMM of every weight format on the file layout: file-inl.h with the AVX2
 * multiply-accumulate step (vpmaddubsw). */
#include "file-inl.h"
