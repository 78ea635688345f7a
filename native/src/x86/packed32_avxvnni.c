/* AVX-VNNI GEMV of the packed layout, group 32, 8 rows a lane each: packed32-inl.h with vpdpbusd
 * as the multiply-accumulate step (LOWBIT_DOT: the avxvnni_emulated test build sets its own). */
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_VNNI
#endif
#include "packed32-inl.h"
