/* The BASE3F kernels with the dot-product extension (base3-inl.h; compiled with the dotprod flags). */
#define LOWBIT_ARM_DOTPROD 1
#include "base3-inl.h"
