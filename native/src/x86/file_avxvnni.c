/* AVX-VNNI GEMV / GEMM of every weight format on the file layout: file-inl.h with vpdpbusd as the
 * multiply-accumulate step (LOWBIT_DOT: the avxvnni_emulated test build sets its own). */
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_VNNI
#endif
#include "file-inl.h"
