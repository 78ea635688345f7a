"""GGUF metadata values: bounds-checked reads from a mapped header (`_Cursor`, the lazy
`StringArray`) and their encoding for the writer (`MetaValue`, `_infer`, `_pack_value`)."""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pylowbit.gguf.types import (_SCALAR_DTYPES, _STRUCT, LAZY_STRING_ARRAY, MAX_ARRAY_NESTING, MAX_STRING_BYTES,
                                 GGUFError, ValueType)

def _decode(raw: bytes) -> str:
    # Tokenizer vocabularies occasionally hold invalid UTF-8; keep the bytes recoverable (valid
    # UTF-8 decodes exactly as with errors="strict").
    return raw.decode("utf-8", errors="surrogateescape")


class StringArray(Sequence):
    """A read-only sequence of the strings of a GGUF string array, decoded from the mapped file on
    access (`list(a)` materializes it).  Its byte spans were checked against the file at open.
    Stored as n + 1 offsets: string i is buf[starts[i]:starts[i + 1] - 8] (the next one's 8-byte
    length sits between), 32-bit when the buffer allows: 1 MB for a 262k vocabulary, not 4."""

    def __init__(self, buf: memoryview, starts: array):
        self._buf, self._starts = buf, starts

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # negative indices, IndexError
        return _decode(bytes(self._buf[self._starts[i]:self._starts[i + 1] - 8]))

    def __iter__(self):
        buf, starts = self._buf, self._starts
        for k in range(len(starts) - 1):
            yield _decode(bytes(buf[starts[k]:starts[k + 1] - 8]))

    def __eq__(self, other):
        if isinstance(other, (StringArray, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"StringArray({len(self)} strings)"


class _Cursor:
    """Bounds-checked little-endian reads from a buffer."""

    def __init__(self, buf: memoryview, size: int):
        self.buf = buf
        self.size = size
        self.pos = 0

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(f"truncated file: {what} needs {n} bytes at offset {self.pos}, file has {self.size}")

    def scalar(self, vt: ValueType, what: str):
        dt = _SCALAR_DTYPES[vt]
        self.need(dt.itemsize, what)
        (v,) = struct.unpack_from("<" + _STRUCT[vt], self.buf, self.pos)
        self.pos += dt.itemsize
        if vt == ValueType.BOOL:
            if v not in (0, 1):
                raise GGUFError(f"{what}: bool value {v} is neither 0 nor 1")
            return bool(v)
        return v

    def u32(self, what: str) -> int:
        return self.scalar(ValueType.UINT32, what)

    def u64(self, what: str) -> int:
        return self.scalar(ValueType.UINT64, what)

    def string(self, what: str) -> str:
        n = self.u64(f"{what} length")
        if n > MAX_STRING_BYTES:
            raise GGUFError(f"{what}: string length {n} is absurd (limit {MAX_STRING_BYTES})")
        self.need(n, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return _decode(raw)

    def string_spans(self, what: str, n: int) -> StringArray:
        """n strings, checked exactly as `string` checks them, kept as spans into the buffer."""
        starts = array("I" if self.size + 8 < 1 << 32 else "q")
        unpack, buf, size, pos = struct.Struct("<Q").unpack_from, self.buf, self.size, self.pos
        for i in range(n):
            if pos + 8 > size:
                self.pos = pos
                self.need(8, f"{what}[{i}] length")
            (ln,) = unpack(buf, pos)
            pos += 8
            if ln > MAX_STRING_BYTES:
                raise GGUFError(f"{what}[{i}]: string length {ln} is absurd (limit {MAX_STRING_BYTES})")
            if pos + ln > size:
                self.pos = pos
                self.need(ln, f"{what}[{i}]")
            starts.append(pos)
            pos += ln
        starts.append(pos + 8)  # where a next string would start: string i ends 8 bytes before starts[i + 1]
        self.pos = pos
        return StringArray(buf, starts)

    def array(self, what: str, depth: int = 0):
        if depth >= MAX_ARRAY_NESTING:
            raise GGUFError(f"{what}: arrays nested deeper than {MAX_ARRAY_NESTING}")
        et = self.value_type(f"{what} element type", f"{what}: unknown array element type")
        n = self.u64(f"{what} array length")
        # Every element takes at least this many bytes, so the count is checked before anything
        # is allocated for it.
        min_size = {ValueType.STRING: 8, ValueType.ARRAY: 12}.get(et) or _SCALAR_DTYPES[et].itemsize
        if n > (self.size - self.pos) // min_size:
            raise GGUFError(f"{what}: array length {n} is absurd: that many cannot fit in the {self.size - self.pos} "
                            f"bytes left in the file (truncated or corrupt)")
        if et in _SCALAR_DTYPES:
            dt = _SCALAR_DTYPES[et]
            arr = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
            # large ones (a vocabulary's scores and types: 1 MB each at 262k) stay read-only views of
            # the mapping, like StringArray: their pages come and go with use, no copy for the process' life
            arr = arr.copy() if n <= LAZY_STRING_ARRAY else arr
            self.pos += n * dt.itemsize
            if et == ValueType.BOOL:
                if arr.size and arr.max() > 1:
                    raise GGUFError(f"{what}: bool array holds a value that is neither 0 nor 1")
                arr = arr.astype(bool)
            return et, arr
        if et == ValueType.STRING:
            if n > LAZY_STRING_ARRAY:
                return et, self.string_spans(what, n)
            return et, [self.string(f"{what}[{i}]") for i in range(n)]
        return et, [self.array(f"{what}[{i}]", depth + 1)[1] for i in range(n)]

    def value_type(self, what: str, unknown: str) -> ValueType:
        """A value type code; a code that names none is the error "`unknown` <code>"."""
        code = self.u32(what)
        try:
            return ValueType(code)
        except ValueError:
            raise GGUFError(f"{unknown} {code}") from None

    def value(self, vt: ValueType, what: str):
        if vt == ValueType.STRING:
            return None, self.string(what)
        if vt == ValueType.ARRAY:
            return self.array(what)
        return None, self.scalar(vt, what)


# ---- encoding ----------------------------------------------------------------------------------

@dataclass
class MetaValue:
    """A metadata value with an explicit GGUF type (arrays: `type=ARRAY`, `elem=` element type)."""

    type: ValueType
    value: Any
    elem: ValueType | None = None


_NP_TO_VT = {np.dtype(v): k for k, v in _SCALAR_DTYPES.items() if k != ValueType.BOOL}
_NP_TO_VT[np.dtype(bool)] = ValueType.BOOL


def _infer(value) -> MetaValue:
    if isinstance(value, MetaValue):
        return value
    if isinstance(value, (bool, np.bool_)):
        return MetaValue(ValueType.BOOL, bool(value))
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if 0 <= v < 2**32:
            return MetaValue(ValueType.UINT32, v)
        if -(2**31) <= v < 0:
            return MetaValue(ValueType.INT32, v)
        return MetaValue(ValueType.INT64 if v < 0 else ValueType.UINT64, v)
    if isinstance(value, (float, np.floating)):
        return MetaValue(ValueType.FLOAT32, float(value))
    if isinstance(value, str):
        return MetaValue(ValueType.STRING, value)
    if isinstance(value, np.ndarray):
        dt = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
        if np.dtype(dt) not in _NP_TO_VT:
            raise GGUFError(f"no GGUF array type for numpy dtype {value.dtype}")
        return MetaValue(ValueType.ARRAY, value, _NP_TO_VT[np.dtype(dt)])
    if isinstance(value, StringArray):
        value = list(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return MetaValue(ValueType.ARRAY, [], ValueType.INT32)
        first = _infer(value[0])
        return MetaValue(ValueType.ARRAY, list(value), first.type)
    raise GGUFError(f"cannot store {type(value).__name__} as GGUF metadata")


def _pack_string(s: str) -> bytes:
    b = s.encode("utf-8", errors="surrogateescape")
    return struct.pack("<Q", len(b)) + b


def _pack_value(mv: MetaValue) -> bytes:
    vt = ValueType(mv.type)
    if vt == ValueType.STRING:
        return _pack_string(mv.value)
    if vt == ValueType.ARRAY:
        et = ValueType(mv.elem)
        items = mv.value
        head = struct.pack("<IQ", et, len(items))
        if et in _SCALAR_DTYPES:
            arr = np.asarray(items)
            if et == ValueType.BOOL:
                arr = arr.astype(bool)
            return head + arr.astype(_SCALAR_DTYPES[et]).tobytes()
        if et == ValueType.STRING:
            return head + b"".join(_pack_string(s) for s in items)
        # a nested array element is element type + count + data, exactly a top-level array value
        return head + b"".join(_pack_value(_infer(x)) for x in items)
    dt = _SCALAR_DTYPES[vt]
    return np.array(mv.value).astype(dt).tobytes()
