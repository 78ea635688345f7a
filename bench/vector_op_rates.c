/* Throughput of the zmm ops a base-3 decode is built from, alone and in pairs (AVX-512 VBMI,
 * VNNI, GFNI), in core cycles per op:
 *
 *     cc -O2 -mavx512f -mavx512bw -mavx512vnni -mavx512vbmi -mgfni -o /tmp/vector_op_rates \
 *         bench/vector_op_rates.c
 *     /tmp/vector_op_rates
 *
 * Each loop runs 8 or 16 independent dependency chains of one op (enough to hide its latency), so
 * its time per op is the op's reciprocal throughput: 0.5 for an op two ports take, 1 for one port,
 * 2 for an op that holds its port two cycles.  A pair "A + B" (8 chains of each) shows whether the
 * two compete for one port: the pair's cycles per op pair equal the larger of the two alone
 * when they do not.  Core cycles come from a chain of dependent 64-bit imul (3 cycles each): the
 * VM has no cycle counters, and a chain of adds runs faster than one a cycle on recent cores. */
#include <immintrin.h>
#include <stdio.h>
#include <x86intrin.h>

#define N 10000000L
#define DP(a) a = _mm512_dpbusd_epi32(a, x, y)
#define PERMB(a) a = _mm512_permutexvar_epi8(x, a)
#define PERMI2B(a) a = _mm512_permutex2var_epi8(x, a, y)
#define AND(a) a = _mm512_and_si512(a, x)
#define SRL(a) a = _mm512_srli_epi16(a, 2)
#define SHUFB(a) a = _mm512_shuffle_epi8(x, a)
#define GF2P8(a) a = _mm512_gf2p8affine_epi64_epi8(a, x, 0)
#define MSHIFT(a) a = _mm512_multishift_epi64_epi8(x, a)
#define ON8(M, a) M(a##0), M(a##1), M(a##2), M(a##3), M(a##4), M(a##5), M(a##6), M(a##7)
/* a loop of OPS over chains a0..a7 and b0..b7, its TSC ticks per iteration */
#define RATE(name, OPS)                                                                            \
    static double name(void) {                                                                     \
        __m512i a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,   \
                a7 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;   \
        __m512i x = _mm512_set1_epi32(0x01020304), y = _mm512_set1_epi32(0x05060708);             \
        const unsigned long t0 = __rdtsc();                                                        \
        for (long i = 0; i < N; i++) {                                                             \
            OPS;                                                                                   \
            __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),     \
                             "+v"(a6), "+v"(a7));                                                  \
            __asm__ volatile("" : "+v"(b0), "+v"(b1), "+v"(b2), "+v"(b3), "+v"(b4), "+v"(b5),     \
                             "+v"(b6), "+v"(b7), "+v"(x), "+v"(y));                                \
        }                                                                                          \
        return (double)(__rdtsc() - t0) / N;                                                       \
    }
RATE(dp16, (ON8(DP, a), ON8(DP, b)))
RATE(permb16, (ON8(PERMB, a), ON8(PERMB, b)))
RATE(permi2b8, ON8(PERMI2B, b))
RATE(and8, ON8(AND, b))
RATE(srl8, ON8(SRL, b))
RATE(shufb8, ON8(SHUFB, b))
RATE(gf2p8_8, ON8(GF2P8, b))
RATE(mshift8, ON8(MSHIFT, b))
RATE(dp_permb, (ON8(DP, a), ON8(PERMB, b)))
RATE(dp_permi2b, (ON8(DP, a), ON8(PERMI2B, b)))
RATE(dp_and, (ON8(DP, a), ON8(AND, b)))
RATE(dp_srl, (ON8(DP, a), ON8(SRL, b)))

/* TSC ticks per core cycle */
static double tsc_per_cycle(void) {
    unsigned long v = 3;
    const unsigned long t0 = __rdtsc();
    for (long i = 0; i < N; i++)
        __asm__ volatile("imul %0,%0\n\timul %0,%0\n\timul %0,%0\n\timul %0,%0" : "+r"(v));
    return (double)(__rdtsc() - t0) / N / 12;
}

int main(void) {
    for (int r = 0; r < 2; r++) {
        const double c = tsc_per_cycle();
        printf("core cycles per op: vpdpbusd %.2f  vpermb %.2f  vpermi2b %.2f  vpandd %.2f  "
               "vpsrlw %.2f  vpshufb %.2f  gf2p8affineqb %.2f  vpmultishiftqb %.2f\n",
               dp16() / c / 16, permb16() / c / 16, permi2b8() / c / 8, and8() / c / 8,
               srl8() / c / 8, shufb8() / c / 8, gf2p8_8() / c / 8, mshift8() / c / 8);
        printf("core cycles per pair: vpdpbusd + vpermb %.2f  + vpermi2b %.2f  + vpandd %.2f  "
               "+ vpsrlw %.2f\n",
               dp_permb() / c / 8, dp_permi2b() / c / 8, dp_and() / c / 8, dp_srl() / c / 8);
    }
    return 0;
}
