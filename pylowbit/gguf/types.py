"""GGUF's fixed vocabulary: the file constants and limits, the metadata value types and their
encodings, and the tensor type table (weights and bytes per block of every GGML type id)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

import numpy as np

from .. import _lowbit

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
MAX_ARRAY_NESTING = 4
# Names and strings longer than this are refused: no real key, token or tensor name comes close, and
# it keeps a corrupt length from turning into a multi-gigabyte decode.
MAX_STRING_BYTES = 1 << 24
# String arrays longer than this (tokenizer vocabularies: 262k entries for Gemma 3, ~30 MB as a list)
# are read as a `StringArray` that decodes entries when asked; shorter ones are plain lists.
LAZY_STRING_ARRAY = 4096


class GGUFError(ValueError):
    """A GGUF file (or data given to the writer) is malformed; the message names the problem."""


class ValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# Scalar value types -> little-endian numpy dtype.
_SCALAR_DTYPES = {
    ValueType.UINT8: np.dtype("<u1"),
    ValueType.INT8: np.dtype("<i1"),
    ValueType.UINT16: np.dtype("<u2"),
    ValueType.INT16: np.dtype("<i2"),
    ValueType.UINT32: np.dtype("<u4"),
    ValueType.INT32: np.dtype("<i4"),
    ValueType.FLOAT32: np.dtype("<f4"),
    ValueType.BOOL: np.dtype("<u1"),
    ValueType.UINT64: np.dtype("<u8"),
    ValueType.INT64: np.dtype("<i8"),
    ValueType.FLOAT64: np.dtype("<f8"),
}
# struct codes with standard sizes ("<" + numpy's char would make uint64 'L', only 4 bytes)
_STRUCT = {ValueType.UINT8: "B", ValueType.INT8: "b", ValueType.UINT16: "H", ValueType.INT16: "h",
           ValueType.UINT32: "I", ValueType.INT32: "i", ValueType.FLOAT32: "f", ValueType.BOOL: "B",
           ValueType.UINT64: "Q", ValueType.INT64: "q", ValueType.FLOAT64: "d"}
_INT_TYPES = {ValueType.UINT8, ValueType.INT8, ValueType.UINT16, ValueType.INT16, ValueType.UINT32,
              ValueType.INT32, ValueType.UINT64, ValueType.INT64}
_FLOAT_TYPES = {ValueType.FLOAT32, ValueType.FLOAT64}


@dataclass(frozen=True)
class TypeInfo:
    type_id: int
    name: str  # lower case, as pylowbit's kernels spell it ("tq2_0")
    block_size: int  # weights per block
    type_size: int  # bytes per block


def _build_type_table() -> dict[int, TypeInfo]:
    # The types liblowbit knows come from its format facts table (lowbit_type_facts: what the
    # kernels read).  The other ggml types, which pylowbit only names and sizes (a file may hold
    # them), are written out: (type id, name, weights per block, bytes per block), facts from
    # ggml.h / gguf-py's GGML_QUANT_SIZES (tests/test_memory.py checks both against it), not
    # imported: importing the gguf package costs ~4 MB resident (yaml, its writer...) in every
    # `run`, for types most files never use.
    foreign = [
        (2, "q4_0", 32, 18), (3, "q4_1", 32, 20), (7, "q5_1", 32, 24), (9, "q8_1", 32, 40),
        (10, "q2_k", 256, 84), (11, "q3_k", 256, 110), (13, "q5_k", 256, 176),
        (16, "iq2_xxs", 256, 66), (17, "iq2_xs", 256, 74), (18, "iq3_xxs", 256, 98),
        (19, "iq1_s", 256, 50), (20, "iq4_nl", 32, 18), (21, "iq3_s", 256, 110),
        (22, "iq2_s", 256, 82), (23, "iq4_xs", 256, 136), (24, "i8", 1, 1), (25, "i16", 1, 2),
        (26, "i32", 1, 4), (27, "i64", 1, 8), (28, "f64", 1, 8), (29, "iq1_m", 256, 56),
        (39, "mxfp4", 32, 17), (40, "nvfp4", 64, 36),
    ]
    table = {tid: TypeInfo(tid, name, bs, ts) for tid, name, bs, ts in foreign}
    # I2_S: 2-bit codes for the whole tensor, then a tail holding the fp32 scale; its "block" is
    # the 128-weight group of the x86 layout, the tail is added by tensor_nbytes (liblowbit's).
    for tid in _lowbit.known_types():
        name, _, bs, ts = _lowbit.type_info(tid)
        table[tid] = TypeInfo(tid, name, bs, ts)
    return dict(sorted(table.items()))


TYPES: dict[int, TypeInfo] = _build_type_table()
_TYPES_BY_NAME = {t.name: t for t in TYPES.values()}


def type_id(name_or_id: str | int) -> int:
    if isinstance(name_or_id, (int, np.integer)):
        if int(name_or_id) not in TYPES:
            raise GGUFError(f"unknown GGML type id {int(name_or_id)}")
        return int(name_or_id)
    t = _TYPES_BY_NAME.get(str(name_or_id).lower())
    if t is None:
        raise GGUFError(f"unknown GGML type name {name_or_id!r}")
    return t.type_id


def type_name(tid: int) -> str:
    return TYPES[type_id(tid)].name


def tensor_nbytes(tid: int, shape: Iterable[int]) -> int:
    """Bytes of a tensor of this type and shape (numpy order: the last axis is the row)."""
    t = TYPES[type_id(tid)]
    shape = [int(s) for s in shape]
    if not shape or any(s <= 0 for s in shape):
        raise GGUFError(f"tensor shape {tuple(shape)} must have 1..{MAX_DIMS} positive dims")
    if shape[-1] % t.block_size:
        raise GGUFError(f"row length {shape[-1]} is not a multiple of the {t.name} block size {t.block_size}")
    n = 1
    for s in shape:
        n *= s
    if _lowbit.type_known(t.type_id):  # its own rule (I2_S's scale tail)
        return _lowbit.tensor_nbytes(t.type_id, n)
    return n // t.block_size * t.type_size


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a
