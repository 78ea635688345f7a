/* AVX2 GEMM of the packed layout: gemm-inl.h with the AVX2 multiply-accumulate step
 * (vpmaddubsw). */
#include "gemm-inl.h"
