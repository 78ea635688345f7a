/* AArch64 kernels with the dot-product extension (ARMv8.2 FEAT_DotProd, compiled with
 * -march=armv8.2-a+dotprod for this file only): vdotq_s32 multiplies 16 code/activation byte
 * pairs and adds each 4 into an int32 lane.  Quantizer and float GEMVs come from the neon fill,
 * which the dispatcher runs first. */
#define LOWBIT_ARM_DOTPROD 1
#include "kernels_arm.h"

