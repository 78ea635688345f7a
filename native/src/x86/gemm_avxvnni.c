/* AVX-VNNI GEMM of the packed layout: gemm-inl.h with vpdpbusd as the multiply-accumulate step
 * (LOWBIT_DOT: the avxvnni_emulated test build sets its own). */
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_VNNI
#endif
#include "gemm-inl.h"
