/* AArch64 GEMMs with the int8 matrix multiply extension (FEAT_I8MM, compiled with
 * -march=armv8.2-a+dotprod+i8mm for this file only): vmmlaq_s32 (SMMLA) multiplies a 2x8 block
 * of codes by an 8x2 block of activations, so the prompt path's GEMMs take two rows and two
 * activations per instruction pair (arm-inl.h, mmla16); ggml's formats' GEMMs are in
 * kquant_i8mm.c.  Everything else -- the GEMVs of the decode step, the quantizer, the float
 * GEMVs -- is dotprod's and neon's (i8mm falls back to dotprod: dispatch.c, FALLBACK). */
#define LOWBIT_ARM_DOTPROD 1
#define LOWBIT_ARM_I8MM 1
#include "arm-inl.h"
#include "file_arm-inl.h"
#include "packed_arm-inl.h"
