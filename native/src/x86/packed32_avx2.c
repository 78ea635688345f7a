/* AVX2 GEMV of the packed layout, group 32, 8 rows a lane each: packed32-inl.h with the AVX2
 * multiply-accumulate step (vpmaddubsw). */
#include "packed32-inl.h"
