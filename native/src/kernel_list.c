/* The kernel list (kernel_list.inc) as data, and the predicates its packed entries are chosen by.
 * Compiled without ISA flags: it only takes the kernels' addresses. */
#include "internal.h"

/* A build lists only its own architecture's kernels, so some predicates go unused in it. */
#if defined(__GNUC__) || defined(__clang__)
#define PREDICATE static __attribute__((unused)) int
#else
#define PREDICATE static int
#endif

/* ---- which packed matrices an entry takes ----------------------------------------------------- */

PREDICATE when_any(const lowbit_matrix *m) { return (void)m, 1; }
PREDICATE when_group32(const lowbit_matrix *m) { return m->group == 32; }
PREDICATE when_group32_qk64(const lowbit_matrix *m) { return m->group == 32 && m->qk == 64; }
PREDICATE when_group32_qk64_or_128(const lowbit_matrix *m) {
    return m->group == 32 && (m->qk == 64 || m->qk == 128);
}
PREDICATE when_group128(const lowbit_matrix *m) { return m->group == 128; }
PREDICATE when_group128_qk128(const lowbit_matrix *m) { return m->group == 128 && m->qk == 128; }
PREDICATE when_group256(const lowbit_matrix *m) { return m->group == 256; }
PREDICATE when_group256_whole(const lowbit_matrix *m) {
    return m->group == 256 && m->cols % 256 == 0;
}
/* I2_S in whole 128-weight chunks: the row-sum path may apply (lowbit_i2s_row_sums_ok, per call) */
PREDICATE when_i2s_whole_chunks(const lowbit_matrix *m) {
    return m->type == LOWBIT_TYPE_I2_S && m->cols % 128 == 0;
}
PREDICATE when_pair_rows(const lowbit_matrix *m) { return lowbit_pair_rows_ok(m); }
/* groups of one scale block each, 256 or 128 weights (lowbit_pair_rows_ok without I2_S) */
PREDICATE when_one_block_groups(const lowbit_matrix *m) {
    return m->type != LOWBIT_TYPE_I2_S && lowbit_pair_rows_ok(m);
}

/* ---- the list ---------------------------------------------------------------------------------- */

#define ANY (-1)

#define KERNEL(name, isa, type, layout, role, sig, when, needs) lowbit_##sig##_sig name;
#include "kernel_list.inc"
#undef KERNEL

#define KERNEL(NAME, ISA, TYPE, LAYOUT, ROLE, SIG, WHEN, NEEDS)                                   \
    {.name = #NAME,                                                                                \
     .isa = LOWBIT_ISA_##ISA,                                                                      \
     .type = TYPE,                                                                                 \
     .layout = LOWBIT_LAYOUT_##LAYOUT,                                                             \
     .role = LOWBIT_ROLE_##ROLE,                                                                   \
     .needs = LOWBIT_NEEDS_##NEEDS,                                                                \
     .accepts = when_##WHEN,                                                                       \
     .when = #WHEN,                                                                                \
     .fn.SIG = NAME},
const lowbit_kernel_entry lowbit_kernel_list[] = {
#include "kernel_list.inc"
};
#undef KERNEL

const int lowbit_kernel_list_count = (int)(sizeof lowbit_kernel_list / sizeof lowbit_kernel_list[0]);
