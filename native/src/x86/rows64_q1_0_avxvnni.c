/* AVX-VNNI kernels of Q1_0's rows64 layout (GEMV, GEMM): rows64_q1_0-inl.h with vpdpbusd as the
 * multiply-accumulate step (LOWBIT_DOT: the avxvnni_emulated test build sets its own). */
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_VNNI
#endif
#include "rows64_q1_0-inl.h"
