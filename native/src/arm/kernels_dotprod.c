/* AArch64 kernels with the dot-product extension (ARMv8.2 FEAT_DotProd, compiled with
 * -march=armv8.2-a+dotprod for this file only): vdotq_s32 multiplies 16 code/activation byte
 * pairs and adds each 4 into an int32 lane.  The quantizer, the float GEMVs and ggml's formats
 * are the neon entries' (dotprod falls back to neon: dispatch.c, FALLBACK). */
#define LOWBIT_ARM_DOTPROD 1
#include "arm-inl.h"
#include "file_arm-inl.h"
#include "packed_arm-inl.h"

