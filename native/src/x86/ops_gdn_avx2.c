/* The Gated-DeltaNet ops' loops (ops_gdn-inl.h) built with AVX2 + FMA flags (FMA contraction stays
 * off: the scalar build's bits). */
#include "../ops_gdn-inl.h"

const gdn_kernels lowbit_gdn_kernels__avx2 = GDN_KERNELS;
