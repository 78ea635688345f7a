/* AVX2 GEMV / GEMM of Q5_0, Q4_K and Q6_K: kquant-inl.h with the AVX2 multiply-accumulate steps
 * (vpmaddubsw, vpmaddwd). */
#include "kquant-inl.h"
