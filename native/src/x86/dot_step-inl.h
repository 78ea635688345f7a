/* The multiply-accumulate step of the 256-bit int8 kernels: the one place where the avx2 and
 * avxvnni variants differ.  The kernel bodies (file-inl.h, packed-inl.h, packed32-inl.h,
 * gemm-inl.h, kquant-inl.h) are written once against the functions below; each variant's file
 * defines LOWBIT_DOT before including its body (none: the AVX2 step):
 *
 *   LOWBIT_DOT_MADDUBS        AVX2: vpmaddubsw gives int16 pair sums, vpmaddwd widens them
 *   LOWBIT_DOT_VNNI           AVX-VNNI: vpdpbusd / vpdpwssd (VEX, 256-bit), int32 quad sums
 *   LOWBIT_DOT_VNNI_EMULATED  the AVX-VNNI bodies with vpdpbusd / vpdpwssd emulated exactly in
 *                             AVX2 (the test-only avxvnni_emulated variant: a CPU without
 *                             AVX-VNNI runs every other instruction of the avxvnni kernels)
 *
 *   dot_t                 the accumulator of u8 x s8 products: int16 lanes (pair sums) under
 *                         MADDUBS, int32 lanes (quad sums) otherwise; DOT_INT16 says which, and
 *                         callers keep an int16 accumulator's sums below 2^15 (no saturation)
 *   dot_mul(u, s)         the products of unsigned bytes u and signed bytes s, summed as above
 *   dot_acc(acc, u, s)    acc + dot_mul(u, s) (one vpdpbusd)
 *   dot_add, dot_slli     in the accumulator's lane width
 *   dot_wide(acc)         int32 lanes: lane i the sum of the products of bytes 4i .. 4i + 3
 *   dot16_acc(acc, a, b)  acc + (int32 lanes) the sums of the int16 pair products of a and b
 *   KN(name)              the kernel's name in this variant: name_avx2, name_avxvnni, ...
 *   KN_AMDPF(name)        its AMD twin's (kernel_list.inc): name_avx2_amdpf, ...
 *   DOT_ISA               its LOWBIT_ISA_*
 *
 * Every sum is exact in every variant (integer, no saturation), so the int32 results and the
 * float steps after them are bit for bit the same: each variant equals the scalar reference. */
#ifndef LOWBIT_DOT_STEP_INL_H
#define LOWBIT_DOT_STEP_INL_H

#include <immintrin.h>

#define LOWBIT_DOT_MADDUBS 1
#define LOWBIT_DOT_VNNI 2
#define LOWBIT_DOT_VNNI_EMULATED 3
#ifndef LOWBIT_DOT
#define LOWBIT_DOT LOWBIT_DOT_MADDUBS
#endif

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

typedef __m256i dot_t;

#if LOWBIT_DOT == LOWBIT_DOT_MADDUBS
#define KN(name) name##_avx2
#define DOT_ISA LOWBIT_ISA_AVX2
#define DOT_INT16 1
AI dot_t dot_mul(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }
AI dot_t dot_add(dot_t a, dot_t b) { return _mm256_add_epi16(a, b); }
AI dot_t dot_acc(dot_t acc, __m256i u, __m256i s) { return dot_add(acc, dot_mul(u, s)); }
#define dot_slli _mm256_slli_epi16
AI __m256i dot_wide(dot_t acc) { return _mm256_madd_epi16(acc, _mm256_set1_epi16(1)); }
AI __m256i dot16_acc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#else
#define DOT_INT16 0
#if LOWBIT_DOT == LOWBIT_DOT_VNNI
#define KN(name) name##_avxvnni
#define DOT_ISA LOWBIT_ISA_AVXVNNI
AI dot_t dot_acc(dot_t acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
AI __m256i dot16_acc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_avx_epi32(acc, a, b);
}
#else
#define KN(name) name##_avxvnni_emulated
#define DOT_ISA LOWBIT_ISA_AVXVNNI_EMULATED
/* vpdpbusd: the bytes widened to int16 (even and odd bytes apart: unsigned u, sign-extended s),
 * two vpmaddwd of products < 2^15 in magnitude, added in int32: exact, never saturating (where
 * vpmaddubsw would saturate its pair sums). */
AI dot_t dot_acc(dot_t acc, __m256i u, __m256i s) {
    const __m256i ue = _mm256_and_si256(u, _mm256_set1_epi16(0xff)), uo = _mm256_srli_epi16(u, 8);
    const __m256i se = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), so = _mm256_srai_epi16(s, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ue, se),
                                                  _mm256_madd_epi16(uo, so)));
}
/* vpdpwssd: vpmaddwd, then the add (both wrap modulo 2^32 alike) */
AI __m256i dot16_acc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#endif
AI dot_t dot_mul(__m256i u, __m256i s) { return dot_acc(_mm256_setzero_si256(), u, s); }
AI dot_t dot_add(dot_t a, dot_t b) { return _mm256_add_epi32(a, b); }
#define dot_slli _mm256_slli_epi32
AI __m256i dot_wide(dot_t acc) { return acc; }
#endif
#define KN_CAT_(a, b) a##b
#define KN_CAT(a, b) KN_CAT_(a, b)
#define KN_AMDPF(name) KN_CAT(KN(name), _amdpf)

#endif /* LOWBIT_DOT_STEP_INL_H */
