"""GGUF writing: the header of a file from metadata and tensor specs, and the file itself, its
tensors' data streamed in when their turn comes, written atomically."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from pylowbit.gguf.files import atomic_file, check_disk_space
from pylowbit.gguf.types import (DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFError, ValueType, _align, tensor_nbytes, type_id,
                                 type_name)
from pylowbit.gguf.values import MetaValue, _infer, _pack_string, _pack_value

@dataclass
class TensorSpec:
    """A tensor to write: raw bytes (or a zero-argument callable returning them, or an iterable of
    byte chunks, called once when the tensor's turn comes so that generation can stream) in GGML
    type `type_id`, numpy-order shape."""

    name: str
    type_id: int
    shape: tuple[int, ...]
    data: Any



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
