"""GGUF reading: a file mapped read-only, its metadata parsed and every tensor a zero-copy numpy view,
each count, length, offset and span checked against the file size before it is used; and the
registry of the files this process has mapped."""

from __future__ import annotations

import mmap
import os
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pylowbit.gguf.types import (_FLOAT_TYPES, _INT_TYPES, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_DIMS, TYPES,
                                 GGUFError, ValueType, _align, tensor_nbytes)
from pylowbit.gguf.values import _Cursor

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
            vt = c.value_type(f"type of metadata {key!r}", f"metadata {key!r} has unknown value type")
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
