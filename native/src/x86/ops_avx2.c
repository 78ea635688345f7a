/* lowbit_attention's loop built with AVX2 + FMA (this file's flags); see ops_attention.h. */
#include "../ops_attention.h"

void lowbit_attention_loop__avx2(const float *q, int64_t T, int64_t H, int64_t Hkv, int64_t hd,
                                 int64_t vd, const float *kc, const float *vc, int64_t ctx,
                                 int64_t pos, int64_t window, float scale, float *out, float *p) {
    attention_loop(q, T, H, Hkv, hd, vd, kc, vc, ctx, pos, window, scale, out, p);
}
