/* The BASE3F kernels on baseline Advanced SIMD (base3-inl.h). */
#define LOWBIT_ARM_DOTPROD 0
#include "base3-inl.h"
