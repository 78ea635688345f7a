/* AVX-VNNI GEMV / GEMM of Q5_0, Q4_K and Q6_K: kquant-inl.h with vpdpbusd and vpdpwssd as the
 * multiply-accumulate steps (LOWBIT_DOT: the avxvnni_emulated test build sets its own). */
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_VNNI
#endif
#include "kquant-inl.h"
