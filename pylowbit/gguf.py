"""GGUF v2/v3 reading (mmap, zero-copy numpy views) and writing (atomic), validated against hostile input.

Every count, length, offset and span read from a file is checked against the file size before it is
used, so a malformed file gives a `GGUFError` naming the problem instead of a crash or a giant
allocation.  The type table covers what gguf-py 0.19.0 knows plus the low-bit ids it does not
(36 I2_S, 42 Q2_0, 142 PQ2_0, 143 PTQ1_0).
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import struct
import tempfile
import weakref
from array import array
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from pylowbit import _platform

__all__ = [
    "GGUFError",
    "GGUFFile",
    "TensorInfo",
    "TensorSpec",
    "MetaValue",
    "ValueType",
    "TYPES",
    "type_id",
    "type_name",
    "tensor_nbytes",
    "write_gguf",
    "check_disk_space",
    "DiskSpaceError",
    "gguf_header",
    "atomic_file",
    "open_gguf",
    "StringArray",
]

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


class DiskSpaceError(OSError):
    """Not enough free disk space for a file about to be written (nothing was written)."""


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
    # (type id, name, weights per block, bytes per block): ggml's type table (facts from ggml.h /
    # gguf-py's GGML_QUANT_SIZES, which tests/test_memory.py checks this against), written out
    # rather than imported: importing the gguf package costs ~4 MB resident (yaml, its writer...)
    # in every `run`, for types most files never use.
    table = [
        (0, "f32", 1, 4), (1, "f16", 1, 2), (2, "q4_0", 32, 18), (3, "q4_1", 32, 20),
        (6, "q5_0", 32, 22), (7, "q5_1", 32, 24), (8, "q8_0", 32, 34), (9, "q8_1", 32, 40),
        (10, "q2_k", 256, 84), (11, "q3_k", 256, 110), (12, "q4_k", 256, 144), (13, "q5_k", 256, 176),
        (14, "q6_k", 256, 210), (15, "q8_k", 256, 292), (16, "iq2_xxs", 256, 66), (17, "iq2_xs", 256, 74),
        (18, "iq3_xxs", 256, 98), (19, "iq1_s", 256, 50), (20, "iq4_nl", 32, 18), (21, "iq3_s", 256, 110),
        (22, "iq2_s", 256, 82), (23, "iq4_xs", 256, 136), (24, "i8", 1, 1), (25, "i16", 1, 2),
        (26, "i32", 1, 4), (27, "i64", 1, 8), (28, "f64", 1, 8), (29, "iq1_m", 256, 56),
        (30, "bf16", 1, 2), (34, "tq1_0", 256, 54), (35, "tq2_0", 256, 66), (39, "mxfp4", 32, 17),
        (40, "nvfp4", 64, 36), (41, "q1_0", 128, 18),
        # pylowbit's own: I2_S is 2-bit codes for the whole tensor then a 32-byte tail holding the
        # fp32 scale; its "block" here is the 128-weight group of the x86 layout (32 bytes), the
        # tail is added by tensor_nbytes.
        (36, "i2_s", 128, 32),
        (42, "q2_0", 64, 18), (142, "pq2_0", 128, 34), (143, "ptq1_0", 128, 28),
    ]
    return {tid: TypeInfo(tid, name, bs, ts) for tid, name, bs, ts in table}


TYPES: dict[int, TypeInfo] = _build_type_table()
_TYPES_BY_NAME = {t.name: t for t in TYPES.values()}
I2_S_TAIL = 32


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
    nbytes = n // t.block_size * t.type_size
    if t.type_id == 36:
        nbytes += I2_S_TAIL
    return nbytes


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


# ------------------------------------------------------------------------------------------------
# reading


@dataclass
class TensorInfo:
    name: str
    type_id: int  # as resolved (a legacy group-128 tensor under id 42 reads as 142)
    file_type_id: int  # as stored in the file
    shape: tuple[int, ...]  # numpy order (rows, cols): GGUF ne reversed
    offset: int  # absolute file offset of the data
    nbytes: int
    data: np.ndarray = field(repr=False)  # uint8 view into the mapped file (read-only)

    @property
    def fmt(self) -> str:
        return TYPES[self.type_id].name

    @property
    def ne(self) -> tuple[int, ...]:
        return tuple(reversed(self.shape))

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


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
        et = self.u32(f"{what} element type")
        try:
            et = ValueType(et)
        except ValueError:
            raise GGUFError(f"{what}: unknown array element type {et}") from None
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

    def value(self, vt: ValueType, what: str):
        if vt == ValueType.STRING:
            return None, self.string(what)
        if vt == ValueType.ARRAY:
            return self.array(what)
        return None, self.scalar(vt, what)


def _file_key(path: str | os.PathLike) -> str:
    """One name per file for the mapping registry (links resolved; case folded on Windows)."""
    return os.path.normcase(os.path.realpath(path))


# Files mapped by this process: key -> weak references to their mmap objects.  A mapping outlives
# GGUFFile.close while numpy views of it are alive, so the registry follows the mmap objects
# themselves; Windows cannot replace a mapped file (atomic_file refuses it first).
_mapped: dict[str, list[weakref.ref]] = {}


def _register_mapping(key: str, mm: mmap.mmap) -> None:
    refs = [r for r in _mapped.get(key, []) if _alive(r)]
    refs.append(weakref.ref(mm))
    _mapped[key] = refs


def _alive(ref: weakref.ref) -> bool:
    mm = ref()
    return mm is not None and not mm.closed


def is_mapped(path: str | os.PathLike) -> bool:
    """Whether this process holds a mapping of the file at `path` (a GGUFFile not closed, or the
    numpy views of a closed one still alive)."""
    key = _file_key(path)
    refs = [r for r in _mapped.get(key, []) if _alive(r)]
    if refs:
        _mapped[key] = refs
    else:
        _mapped.pop(key, None)
    return bool(refs)


class GGUFFile:
    """A GGUF file mapped read-only.  `metadata` holds python values (numeric arrays as numpy);
    `tensors` maps names to `TensorInfo` whose `.data` is a zero-copy uint8 view of the mapping.
    The file is closed once mapped (the mapping keeps its own handle): close() releases the mapping
    and that handle, or, while views of it are alive, leaves them to go with the last view."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            fd = open(self.path, "rb")
        except OSError as e:
            raise GGUFError(f"cannot open {self.path}: {e.strerror}") from e
        with fd:
            size = os.fstat(fd.fileno()).st_size
            if size < 24:
                raise GGUFError(f"{self.path}: truncated header ({size} bytes; a GGUF header needs at least 24)")
            self._mm = mmap.mmap(fd.fileno(), 0, access=mmap.ACCESS_READ)
        _register_mapping(_file_key(self.path), self._mm)
        self.size = size
        self._buf = np.frombuffer(self._mm, dtype=np.uint8)
        try:
            self._parse()
        except GGUFError as e:
            self.close()
            raise GGUFError(f"{self.path}: {e}") from None
        except BaseException:  # (MemoryError, KeyboardInterrupt...): no mapping left behind either
            self.close()
            raise

    # -- parsing --------------------------------------------------------------------------------
    def _parse(self) -> None:
        c = _Cursor(memoryview(self._mm), self.size)
        c.need(4, "magic")
        magic = bytes(self._mm[0:4])
        if magic != GGUF_MAGIC:
            raise GGUFError(f"not a GGUF file (magic {magic!r}, expected b'GGUF')")
        c.pos = 4
        self.version = c.u32("version")
        if self.version not in (2, 3):
            if self.version & 0xFFFF == 0 and self.version:
                raise GGUFError(f"big-endian GGUF (version field {self.version:#x}) is not supported")
            raise GGUFError(f"unsupported GGUF version {self.version} (2 and 3 are)")
        n_tensors = c.u64("tensor count")
        n_kv = c.u64("metadata count")
        # Each key/value needs >= 13 bytes (8 length + 1 char + 4 type + >=0 value), each tensor
        # info >= 8+1+4+8+4+8 bytes: a count beyond that cannot be honest.
        if n_kv > (self.size - c.pos) // 13:
            raise GGUFError(f"metadata count {n_kv} is absurd: that many cannot fit in a {self.size}-byte file "
                            f"(truncated or corrupt)")
        if n_tensors > (self.size - c.pos) // 33:
            raise GGUFError(f"tensor count {n_tensors} is absurd: that many cannot fit in a {self.size}-byte file "
                            f"(truncated or corrupt)")

        self.metadata: dict[str, Any] = {}
        self.metadata_types: dict[str, tuple[ValueType, ValueType | None]] = {}
        for i in range(n_kv):
            key = c.string(f"metadata key #{i}")
            if key in self.metadata:
                raise GGUFError(f"duplicate metadata key {key!r}")
            vt = c.u32(f"type of metadata {key!r}")
            try:
                vt = ValueType(vt)
            except ValueError:
                raise GGUFError(f"metadata {key!r} has unknown value type {vt}") from None
            et, value = c.value(vt, f"metadata {key!r}")
            self.metadata[key] = value
            self.metadata_types[key] = (vt, et)

        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.metadata:
            a = self.get("general.alignment", int)
            if self.metadata_types["general.alignment"][0] != ValueType.UINT32:
                raise GGUFError("general.alignment must be a uint32")
            if a <= 0 or a & (a - 1):
                raise GGUFError(f"general.alignment {a} is not a positive power of two")
            self.alignment = a

        raw = []
        for i in range(n_tensors):
            name = c.string(f"tensor name #{i}")
            n_dims = c.u32(f"dims of tensor {name!r}")
            if not 1 <= n_dims <= MAX_DIMS:
                raise GGUFError(f"tensor {name!r} has {n_dims} dims (1..{MAX_DIMS} allowed)")
            ne = [c.u64(f"dim {d} of tensor {name!r}") for d in range(n_dims)]
            tid = c.u32(f"type of tensor {name!r}")
            off = c.u64(f"offset of tensor {name!r}")
            raw.append((name, ne, tid, off))
        self.data_offset = _align(c.pos, self.alignment)
        if self.data_offset > self.size and n_tensors:
            raise GGUFError(f"truncated file: tensor data would start at {self.data_offset}, file has {self.size} bytes")

        self.tensors: dict[str, TensorInfo] = {}
        spans = sorted((off for _, _, _, off in raw))
        next_off = {}
        for a, b in zip(spans, spans[1:] + [None]):
            next_off.setdefault(a, b)
        for name, ne, tid, off in raw:
            if name in self.tensors:
                raise GGUFError(f"duplicate tensor name {name!r}")
            if any(d == 0 for d in ne):
                raise GGUFError(f"tensor {name!r} has a zero dimension {ne}")
            n = 1
            for d in ne:
                n *= d
                if n > self.size * 8:  # no type stores more than 8 weights per byte (and 2^63 is far)
                    raise GGUFError(f"tensor {name!r}: dims {ne} overflow / exceed what the file can hold")
            if tid not in TYPES:
                raise GGUFError(f"tensor {name!r} has unknown type id {tid}")
            if off % self.alignment:
                raise GGUFError(f"tensor {name!r}: offset {off} is not a multiple of the alignment {self.alignment}")
            start = self.data_offset + off
            end_limit = self.data_offset + next_off[off] if next_off[off] is not None else self.size
            shape = tuple(reversed(ne))
            rid = tid
            if tid == 42:
                rid = self._resolve_q2_0(name, shape, end_limit - start)
            try:
                nbytes = tensor_nbytes(rid, shape)
            except GGUFError as e:
                raise GGUFError(f"tensor {name!r}: {e}") from None
            if start + nbytes > self.size:
                raise GGUFError(f"tensor {name!r} runs past the end of the file "
                                f"(data {start}..{start + nbytes}, file has {self.size} bytes)")
            if start + nbytes > end_limit:
                raise GGUFError(f"tensor {name!r} overlaps the next tensor's data")
            view = self._buf[start:start + nbytes]
            self.tensors[name] = TensorInfo(name, rid, tid, shape, start, nbytes, view)
        # The header (a large vocabulary: megabytes) has been read; lazy string arrays fault back in
        # only what they are asked for.
        self._drop_pages(0, c.pos)

    def _resolve_q2_0(self, name: str, shape: tuple[int, ...], span: int) -> int:
        """Type id 42 holds group-64 Q2_0, or legacy group-128 data (PQ2_0 layout) in older Bonsai
        files: the byte span up to the next tensor (or EOF) tells them apart."""
        n = int(np.prod(shape, dtype=object))
        cands = []
        for rid, g, bsz in ((42, 64, 18), (142, 128, 34)):
            if shape[-1] % g:
                continue
            need = n // g * bsz
            if need <= span < need + self.alignment:  # exact size plus at most the padding
                cands.append(rid)
        if not cands:
            raise GGUFError(f"tensor {name!r} (type 42, shape {shape}) spans {span} bytes: fits neither "
                            f"group-64 Q2_0 ({n // 64 * 18} bytes) nor legacy group-128 ({n // 128 * 34} bytes)")
        return cands[0]  # both fit only for tiny tensors: prefer the upstream group-64 type

    # -- access ---------------------------------------------------------------------------------
    _PYTYPE_CHECK = {
        int: lambda vt, et: vt in _INT_TYPES,
        float: lambda vt, et: vt in _FLOAT_TYPES or vt in _INT_TYPES,
        bool: lambda vt, et: vt == ValueType.BOOL,
        str: lambda vt, et: vt == ValueType.STRING,
        list: lambda vt, et: vt == ValueType.ARRAY,
    }

    def get(self, key: str, kind: type | None = None, default: Any = ..., of: type | None = None):
        """Metadata value; `kind` (int, float, bool, str, list) checks its type, and for lists `of`
        (int, float, bool, str) the element type.  A missing key returns `default` or raises GGUFError."""
        if key not in self.metadata:
            if default is ...:
                raise GGUFError(f"missing metadata key {key!r}")
            return default
        v = self.metadata[key]
        if kind is not None:
            vt, et = self.metadata_types[key]
            ok = self._PYTYPE_CHECK[kind](vt, et)
            if ok and of is not None:
                ok = et is not None and self._PYTYPE_CHECK[of](et, None)
            if not ok:
                want = kind.__name__ + (f"[{of.__name__}]" if of is not None else "")
                raise GGUFError(f"metadata {key!r} has type {vt.name.lower()}"
                                f"{'[' + et.name.lower() + ']' if et is not None else ''}, expected {want}")
            if kind is float:
                v = float(v)
            elif kind is int:
                v = int(v)
        return v

    def tensor(self, name: str) -> TensorInfo:
        try:
            return self.tensors[name]
        except KeyError:
            raise GGUFError(f"{self.path}: missing tensor {name!r}") from None

    def release(self, t: TensorInfo) -> None:
        """Drop the tensor's mapped pages from memory (they reload from the file if touched again):
        called after a tensor is converted at load, so peak memory stays near the file size."""
        page = mmap.PAGESIZE
        self._drop_pages(-(-t.offset // page) * page, t.offset + t.nbytes)  # whole pages inside the tensor only

    def release_header(self) -> None:
        """Drop the header's mapped pages, after something read it whole (a tokenizer build reads
        every vocabulary string: megabytes); lazy string arrays fault back in only what they read."""
        self._drop_pages(0, self.data_offset)

    def _drop_pages(self, start: int, end: int) -> None:
        """MADV_DONTNEED on [start (page-aligned), end rounded down to a page): the mapping is read-only,
        so this only frees memory; touched again, the pages reload from the file."""
        end = end // mmap.PAGESIZE * mmap.PAGESIZE
        if end > start and self._mm is not None and hasattr(mmap, "MADV_DONTNEED"):
            try:
                self._mm.madvise(mmap.MADV_DONTNEED, start, end - start)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        if self._mm is None:
            return
        self.tensors = {}
        self._buf = None
        try:
            self._mm.close()
        except BufferError:  # views still alive (tensor data, a StringArray): the mapping goes when they do
            self._drop_pages(0, self.size)
        self._mm = None  # the views hold the mmap object now, and only they

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_gguf(path: str | os.PathLike) -> GGUFFile:
    return GGUFFile(path)


# ------------------------------------------------------------------------------------------------
# writing


@dataclass
class MetaValue:
    """A metadata value with an explicit GGUF type (arrays: `type=ARRAY`, `elem=` element type)."""

    type: ValueType
    value: Any
    elem: ValueType | None = None


@dataclass
class TensorSpec:
    """A tensor to write: raw bytes (or a zero-argument callable returning them, or an iterable of
    byte chunks, called once when the tensor's turn comes so that generation can stream) in GGML
    type `type_id`, numpy-order shape."""

    name: str
    type_id: int
    shape: tuple[int, ...]
    data: Any


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


def gguf_header(metadata: Mapping[str, Any], tensors: Iterable[TensorSpec], alignment: int = DEFAULT_ALIGNMENT,
                version: int = 3) -> tuple[bytes, list[tuple[int, int]]]:
    """The header of a GGUF file (magic .. tensor infos, zero-padded to `alignment`) and each tensor's
    (offset from the data start, nbytes).  metadata values: python scalars/str/lists/numpy arrays
    (int -> uint32 when it fits) or `MetaValue` for an explicit type."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise GGUFError(f"alignment {alignment} is not a positive power of two")
    if version not in (2, 3):
        raise GGUFError(f"cannot write GGUF version {version} (2 and 3 are)")
    tensors = list(tensors)
    meta = dict(metadata)
    if alignment != DEFAULT_ALIGNMENT or "general.alignment" in meta:
        meta["general.alignment"] = MetaValue(ValueType.UINT32, alignment)
    header = bytearray(GGUF_MAGIC + struct.pack("<IQQ", version, len(tensors), len(meta)))
    for k, v in meta.items():
        mv = _infer(v)
        header += _pack_string(k) + struct.pack("<I", mv.type) + _pack_value(mv)
    spans, off, seen = [], 0, set()
    for t in tensors:
        if t.name in seen:
            raise GGUFError(f"duplicate tensor name {t.name!r}")
        seen.add(t.name)
        nb = tensor_nbytes(t.type_id, t.shape)
        spans.append((off, nb))
        header += _pack_string(t.name) + struct.pack("<I", len(t.shape))
        header += struct.pack(f"<{len(t.shape)}Q", *reversed([int(s) for s in t.shape]))
        header += struct.pack("<IQ", type_id(t.type_id), off)
        off = _align(off + nb, alignment)
    header += b"\0" * (_align(len(header), alignment) - len(header))
    return bytes(header), spans


def _link_fd(fd: int, path: str) -> None:
    """Give an O_TMPFILE file a name (fails if `path` exists): linkat through /proc (ordinary users),
    or AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH; the only way on some sandboxed kernels)."""
    try:
        os.link(f"/proc/self/fd/{fd}", path, follow_symlinks=True)
        return
    except FileExistsError:
        raise
    except OSError as e:
        first = e
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, at_empty_path = -100, 0x1000
    if libc.linkat(fd, b"", at_fdcwd, os.fsencode(path), at_empty_path) != 0:
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(err, os.strerror(err), path)
        raise first


def _open_anonymous(directory: Path) -> tuple[int, str | None]:
    """(fd, None) for an unnamed file in `directory` (Linux O_TMPFILE: it vanishes with the process),
    after checking that such a file can be linked in there; else (fd, path) of a named temp file."""
    flag = 0 if _platform.WINDOWS else getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            probe = os.open(directory, flag | os.O_WRONLY, 0o600)
            try:
                name = tempfile.mktemp(prefix=".pylowbit-probe-", dir=directory)
                _link_fd(probe, name)
                os.unlink(name)
            finally:
                os.close(probe)
            return os.open(directory, flag | os.O_WRONLY, 0o666), None
        except (OSError, AttributeError):
            pass  # no O_TMPFILE here (or no way to link it): a named temporary file
    return tempfile.mkstemp(prefix=".pylowbit-", suffix=".tmp", dir=directory)


@contextmanager
def atomic_file(path: str | os.PathLike):
    """Open `path` for writing so that it appears only complete: the body writes to the yielded
    binary file; on success it is fsynced and put in place in one step, on any exception (or a
    SIGKILL) nothing is left - not the output, not a temporary file (O_TMPFILE + linkat where the
    kernel has it; elsewhere mkstemp + rename, which a SIGKILL can leave behind as .pylowbit-*.tmp).
    Windows cannot replace a file that is mapped or open: a file this process has mapped is refused
    before anything is written, one open elsewhere when the rename fails (GGUFError either way)."""
    path = Path(path)
    directory = path.parent
    if _platform.WINDOWS and path.exists() and is_mapped(path):
        raise GGUFError(f"cannot replace {path}: this process has it mapped (an open GGUFFile or a model "
                        "loaded from it, or arrays still viewing one closed); Windows does not replace a "
                        "mapped file: close it first")
    fd, tmp = _open_anonymous(directory)
    try:
        with os.fdopen(fd, "wb", closefd=False) as fh:
            yield fh
            fh.flush()
        if not _platform.WINDOWS:  # (Windows has no modes: mkstemp's file is an ordinary one)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # ordinary permissions (mkstemp makes 0600)
        os.fsync(fd)
        if tmp is None:
            try:
                _link_fd(fd, str(path))  # a new file: linked straight into place
            except FileExistsError:
                # linkat cannot replace: link under a temporary name, then rename over the old file
                tmp = tempfile.mktemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
                _link_fd(fd, tmp)
        if tmp is not None:
            os.close(fd)  # Windows renames no open file
            fd = -1
            _replace(tmp, path)
            tmp = None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _replace(tmp: str, path: Path) -> None:
    """os.replace, with Windows' refusal to replace a file in use said as such."""
    try:
        os.replace(tmp, path)
    except PermissionError as e:
        if not _platform.WINDOWS:
            raise
        raise GGUFError(f"cannot replace {path}: {e.strerror} (on Windows, a file open or mapped by "
                        "a program - this one or another - cannot be replaced: close it and retry)") from None


def check_disk_space(directory: str | os.PathLike, nbytes: int, what: str) -> None:
    """DiskSpaceError naming the need and what is free unless `directory`'s file system has nbytes
    free (a full disk found mid-write would cost the time of writing and leave the disk full)."""
    free = shutil.disk_usage(directory).free
    if free < nbytes:
        raise DiskSpaceError(f"not enough disk space for {what}: it needs {nbytes / 1e9:.2f} GB, "
                             f"{free / 1e9:.2f} GB are free in {directory}")


def write_gguf(path: str | os.PathLike, metadata: Mapping[str, Any], tensors: Iterable[TensorSpec],
               alignment: int = DEFAULT_ALIGNMENT, version: int = 3,
               progress: Callable[[int, int, str], None] | None = None) -> Path:
    """Write a GGUF file atomically (`atomic_file`): the header from `gguf_header`, then each tensor's
    data, produced only when its turn comes (callables and generators stream).  A tensor whose data
    is not exactly the size its type and shape need is refused and nothing is written, as when the
    file system has less free space than the file's size (DiskSpaceError, checked before writing).
    progress(file bytes written, file size, tensor name) is called after each chunk of a tensor."""
    path = Path(path)
    tensors = list(tensors)
    header, spans = gguf_header(metadata, tensors, alignment, version)
    total = len(header) + (_align(spans[-1][0] + spans[-1][1], alignment) if spans else 0)
    check_disk_space(path.parent, total, path.name)
    with atomic_file(path) as f:
        f.write(header)
        for t, (o, nb) in zip(tensors, spans):
            data = t.data() if callable(t.data) else t.data
            chunks = [data] if isinstance(data, (bytes, bytearray, memoryview, np.ndarray)) else data
            written = 0
            for chunk in chunks:  # a generator may yield the tensor in pieces (row blocks)
                mv = memoryview(np.ascontiguousarray(chunk) if isinstance(chunk, np.ndarray) else chunk).cast("B")
                written += mv.nbytes
                if written > nb:
                    break
                f.write(mv)
                del mv, chunk
                if progress is not None and written < nb:
                    progress(len(header) + o + written, total, t.name)
            if written != nb:
                raise GGUFError(f"tensor {t.name!r}: got {'more than ' if written > nb else ''}{written} bytes, "
                                f"type {type_name(t.type_id)} shape {tuple(t.shape)} needs {nb}")
            del data, chunks
            f.write(b"\0" * (_align(nb, alignment) - nb))
            if progress is not None:
                progress(len(header) + _align(o + nb, alignment), total, t.name)
    return path
