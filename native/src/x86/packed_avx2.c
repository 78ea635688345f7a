/* AVX2 GEMV of the packed layout (every strategy but the group-32 8-row one): packed-inl.h with
 * the AVX2 multiply-accumulate step (vpmaddubsw). */
#include "packed-inl.h"
