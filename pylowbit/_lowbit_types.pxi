# The format facts table (lowbit_type_facts), part of the _lowbit module: included by _lowbit.pyx.
# pylowbit builds its format tables from these at import (core.FORMATS, gguf.TYPES, ...).

# ---- types ----------------------------------------------------------------------------------

def type_info(int type_id):
    """(name, type_id, block_size, block_bytes) of a GGUF type id known to liblowbit."""
    if not lowbit_type_known(type_id):
        raise ValueError(f"unknown tensor type id {type_id}")
    return (lowbit_type_name(type_id).decode(), type_id, lowbit_type_block_size(type_id),
            lowbit_type_block_bytes(type_id))


def type_known(int type_id):
    return bool(lowbit_type_known(type_id))


def known_types():
    """Every type id of liblowbit's facts table (ggml's type ids are below 1024)."""
    return [t for t in range(1024) if lowbit_type_known(t)]


def weight_types():
    """The type ids of the weight formats liblowbit multiplies, in its facts table's order."""
    cdef int ids[64]
    cdef int n = lowbit_weight_types(ids, 64)
    if n > 64:
        raise RuntimeError(f"liblowbit lists {n} weight types, more than this binding reads")
    return [ids[i] for i in range(n)]


def type_from_name(str name):
    cdef int t = lowbit_type_from_name(name.encode())
    if t < 0:
        raise ValueError(f"unknown format name {name!r}")
    return t


def tensor_nbytes(int type_id, int64_t nelem):
    cdef int64_t b = lowbit_tensor_bytes(type_id, nelem)
    if b < 0:
        check(<int>b, f"{nelem} elements of type {type_id}")
    return b


def act_group(int type_id):
    cdef int64_t g = lowbit_act_group(type_id)
    if g < 0:
        check(<int>g, f"type {type_id}")
    return g


_RULE_NAMES = {LOWBIT_RULE_A8: "a8", LOWBIT_RULE_Q8_0: "q8_0", LOWBIT_RULE_Q8_K: "q8_k",
               LOWBIT_RULE_P2: "p2", LOWBIT_RULE_S8: "s8"}


def type_facts(int type_id):
    """The format facts table's row (lowbit_type_facts_get): block size and bytes, the byte offset
    of the fp16 scale in a block (-1: none), of a second scale (-1: none), activation group and
    rule name, code offset."""
    cdef lowbit_type_facts f
    check(lowbit_type_facts_get(type_id, &f), f"type {type_id}")
    return {"block_size": f.block_size, "block_bytes": f.block_bytes,
            "scale_offset": f.scale_offset, "scale2_offset": f.scale2_offset,
            "act_group": f.act_group, "act_rule": _RULE_NAMES[f.act_rule],
            "code_offset": f.code_offset}
