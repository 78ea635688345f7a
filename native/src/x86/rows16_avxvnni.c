/* AVX-VNNI kernels of the rows16 layout (GEMVs, GEMM): rows16-inl.h with vpdpbusd as the
 * multiply-accumulate step (LOWBIT_DOT: the avxvnni_emulated test build sets its own). */
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_VNNI
#endif
#include "rows16-inl.h"
