/* Type traits: one table, every format in one row. */
#include <stddef.h>

#include "internal.h"

typedef struct {
    int type;
    const char *name;
    int kernel; /* LOWBIT_K_* or -1 (float types and activation-only types) */
    lowbit_type_facts facts;
} type_row;

/* A quantized format's row: block struct B, weights per block QK, the fp16 scale field d (or -1:
 * none), a second scale (Q4_K's dmin), activation group and rule, code offset. */
#define FMT(T, name, K, B, QK, SCALE, SCALE2, GROUP, RULE, OFF)                                    \
    {T, name, K,                                                                                   \
     {.type = T, .block_size = QK, .block_bytes = sizeof(B), .scale_offset = SCALE,                \
      .scale2_offset = SCALE2, .act_group = GROUP, .act_rule = RULE, .code_offset = OFF}}
#define AT(B, field) ((int)offsetof(B, field))
/* float weights take float activations: group 128 and its rule are never used */
#define FLOAT(T, name, BYTES)                                                                      \
    {T, name, -1,                                                                                  \
     {.type = T, .block_size = 1, .block_bytes = BYTES, .scale_offset = -1, .scale2_offset = -1,   \
      .act_group = 128, .act_rule = LOWBIT_RULE_P2, .code_offset = 0}}

/* Activation groups and rules are llama.cpp's activation type for the weight type (Q8_K for
 * TQ1_0 / TQ2_0 / Q4_K / Q6_K, Q8_0 for Q1_0 / Q2_0 / Q5_0 / Q8_0), except PQ2_0 / PTQ1_0: Q8_K's
 * rule per 128-group, their weight block (act_rules.h); I2_S 128 with one scale per vector (S8,
 * or P2 after lowbit_set_i2s_act_scale). */
static const type_row TYPES[] = {
    FLOAT(LOWBIT_TYPE_F32, "f32", 4),
    FLOAT(LOWBIT_TYPE_F16, "f16", 2),
    FLOAT(LOWBIT_TYPE_BF16, "bf16", 2),
    FMT(LOWBIT_TYPE_Q8_0, "q8_0", LOWBIT_K_Q8_0, lowbit_block_q8_0, LOWBIT_QK_Q8_0,
        AT(lowbit_block_q8_0, d), -1, 32, LOWBIT_RULE_Q8_0, 0),
    FMT(LOWBIT_TYPE_Q5_0, "q5_0", LOWBIT_K_Q5_0, lowbit_block_q5_0, LOWBIT_QK_Q5_0,
        AT(lowbit_block_q5_0, d), -1, 32, LOWBIT_RULE_Q8_0, 16),
    FMT(LOWBIT_TYPE_Q4_K, "q4_k", LOWBIT_K_Q4_K, lowbit_block_q4_k, LOWBIT_QK_Q4_K,
        AT(lowbit_block_q4_k, d), AT(lowbit_block_q4_k, dmin), 256, LOWBIT_RULE_Q8_K, 0),
    FMT(LOWBIT_TYPE_Q6_K, "q6_k", LOWBIT_K_Q6_K, lowbit_block_q6_k, LOWBIT_QK_Q6_K,
        AT(lowbit_block_q6_k, d), -1, 256, LOWBIT_RULE_Q8_K, 32),
    FMT(LOWBIT_TYPE_Q8_K, "q8_k", -1, lowbit_block_q8_k, LOWBIT_QK_Q8_K, -1, -1, 256,
        LOWBIT_RULE_Q8_K, 0), /* activations only; its scale is fp32 */
    FMT(LOWBIT_TYPE_TQ1_0, "tq1_0", LOWBIT_K_TQ1_0, lowbit_block_tq1_0, LOWBIT_QK_TQ1_0,
        AT(lowbit_block_tq1_0, d), -1, 256, LOWBIT_RULE_Q8_K, 1),
    FMT(LOWBIT_TYPE_TQ2_0, "tq2_0", LOWBIT_K_TQ2_0, lowbit_block_tq2_0, LOWBIT_QK_TQ2_0,
        AT(lowbit_block_tq2_0, d), -1, 256, LOWBIT_RULE_Q8_K, 1),
    FMT(LOWBIT_TYPE_I2_S, "i2_s", LOWBIT_K_I2_S, lowbit_block_i2_s, LOWBIT_QK_I2_S, -1, -1, 128,
        LOWBIT_RULE_S8, 1),
    FMT(LOWBIT_TYPE_Q1_0, "q1_0", LOWBIT_K_Q1_0, lowbit_block_q1_0, LOWBIT_QK_Q1_0,
        AT(lowbit_block_q1_0, d), -1, 32, LOWBIT_RULE_Q8_0, 1),
    FMT(LOWBIT_TYPE_Q2_0, "q2_0", LOWBIT_K_Q2_0, lowbit_block_q2_0, LOWBIT_QK_Q2_0,
        AT(lowbit_block_q2_0, d), -1, 32, LOWBIT_RULE_Q8_0, 1),
    FMT(LOWBIT_TYPE_PQ2_0, "pq2_0", LOWBIT_K_PQ2_0, lowbit_block_pq2_0, LOWBIT_QK_PQ2_0,
        AT(lowbit_block_pq2_0, d), -1, 128, LOWBIT_RULE_Q8_K, 1),
    FMT(LOWBIT_TYPE_PTQ1_0, "ptq1_0", LOWBIT_K_PTQ1_0, lowbit_block_ptq1_0, LOWBIT_QK_PTQ1_0,
        AT(lowbit_block_ptq1_0, d), -1, 128, LOWBIT_RULE_Q8_K, 1),
};
#undef FMT
#undef AT
#undef FLOAT
#define NTYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

static const type_row *find(int type) {
    for (int i = 0; i < NTYPES; i++)
        if (TYPES[i].type == type) return &TYPES[i];
    return NULL;
}

int lowbit_type_known(int type) { return find(type) != NULL; }

const char *lowbit_type_name(int type) {
    const type_row *r = find(type);
    return r ? r->name : NULL;
}

int lowbit_type_from_name(const char *name) {
    if (!name) return LOWBIT_ETYPE;
    for (int i = 0; i < NTYPES; i++)
        if (strcmp(TYPES[i].name, name) == 0) return TYPES[i].type;
    return LOWBIT_ETYPE;
}

int64_t lowbit_type_block_size(int type) {
    const type_row *r = find(type);
    return r ? r->facts.block_size : LOWBIT_ETYPE;
}

int64_t lowbit_type_block_bytes(int type) {
    const type_row *r = find(type);
    return r ? r->facts.block_bytes : LOWBIT_ETYPE;
}

int lowbit_type_packs(int type) {
    switch (type) {
    case LOWBIT_TYPE_TQ1_0:
    case LOWBIT_TYPE_TQ2_0:
    case LOWBIT_TYPE_I2_S:
    case LOWBIT_TYPE_Q2_0:
    case LOWBIT_TYPE_PQ2_0:
    case LOWBIT_TYPE_PTQ1_0:
    case LOWBIT_TYPE_Q1_0: /* Q1_0 only where a variant has a rows64 GEMV (pack.c) */
    case LOWBIT_TYPE_Q8_0: return 1; /* Q8_0 only where a variant has a q8rows GEMV (pack.c) */
    default: return 0;
    }
}

int lowbit_kernel_index(int type) {
    const type_row *r = find(type);
    return r ? r->kernel : -1;
}

int64_t lowbit_row_bytes(int type, int64_t n) {
    const type_row *r = find(type);
    if (!r) return LOWBIT_ETYPE;
    if (n < 0) return LOWBIT_EINVAL;
    if (n % r->facts.block_size) return LOWBIT_ESIZE;
    if (n / r->facts.block_size > INT64_MAX / r->facts.block_bytes) return LOWBIT_ESIZE;
    return n / r->facts.block_size * r->facts.block_bytes;
}

int64_t lowbit_tensor_bytes(int type, int64_t nelem) {
    int64_t b = lowbit_row_bytes(type, nelem);
    if (b < 0) return b;
    return type == LOWBIT_TYPE_I2_S ? b + 32 : b;
}

int64_t lowbit_act_group(int type) {
    const type_row *r = find(type);
    return r ? r->facts.act_group : LOWBIT_ETYPE;
}

int lowbit_type_facts_get(int type, lowbit_type_facts *out) {
    const type_row *r = find(type);
    if (!r) return LOWBIT_ETYPE;
    if (!out) return LOWBIT_EINVAL;
    *out = r->facts;
    if (type == LOWBIT_TYPE_I2_S) out->act_rule = lowbit_act_rule_of_type(type);
    return LOWBIT_OK;
}

int lowbit_weight_types(int *ids, int cap) {
    int n = 0;
    for (int i = 0; i < NTYPES; i++) {
        const type_row *r = &TYPES[i];
        if (r->kernel < 0 && r->facts.block_size != 1) continue; /* activations only */
        if (ids && n < cap) ids[n] = r->type;
        n++;
    }
    return n;
}

static int i2s_act_rule = LOWBIT_RULE_S8;

int lowbit_set_i2s_act_scale(int mode) {
    if (mode != LOWBIT_I2S_ACT_BITNET && mode != LOWBIT_I2S_ACT_POW2) return LOWBIT_EINVAL;
    const int before = i2s_act_rule == LOWBIT_RULE_P2 ? LOWBIT_I2S_ACT_POW2 : LOWBIT_I2S_ACT_BITNET;
    i2s_act_rule = mode == LOWBIT_I2S_ACT_POW2 ? LOWBIT_RULE_P2 : LOWBIT_RULE_S8;
    return before;
}

int lowbit_act_rule_of_type(int type) {
    if (type == LOWBIT_TYPE_I2_S) return i2s_act_rule;
    const type_row *r = find(type);
    return r ? r->facts.act_rule : LOWBIT_RULE_A8;
}

const char *lowbit_status_str(int status) {
    switch (status) {
    case LOWBIT_OK: return "ok";
    case LOWBIT_EINVAL: return "invalid argument";
    case LOWBIT_ETYPE: return "unknown or unsupported tensor type";
    case LOWBIT_ESIZE: return "size is not a multiple of the block or group size";
    case LOWBIT_ENOMEM: return "out of memory";
    case LOWBIT_EISA: return "instruction set not compiled in or not supported by this CPU";
    }
    return "unknown status";
}

#define STR2(x) #x
#define STR(x) STR2(x)
const char *lowbit_version(void) {
    return STR(LOWBIT_VERSION_MAJOR) "." STR(LOWBIT_VERSION_MINOR) "." STR(LOWBIT_VERSION_PATCH);
}
int lowbit_abi_version(void) { return LOWBIT_ABI_VERSION; }
