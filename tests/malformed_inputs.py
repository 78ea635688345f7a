"""The malformed-input table's building blocks (tests/test_malformed.py): the valid models' shapes,
`load` (what `pylowbit run` does with a file), hand-made and spoilt GGUF bytes, and the table's rows.
The rows themselves are in malformed_file_rows.py and malformed_call_rows.py."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, ValueType, gguf_header, tensor_nbytes, type_id
from pylowbit.model import Model, TextTokenizer

SLACK = 1 << 20  # bytes a load may allocate beyond the file size (dicts, strings, small arrays)
TIMEOUT = 60  # seconds for any one row
# The valid model every file row is derived from: small, one layer, every loading step exercised.
SHAPE = dict(n_layer=1, d_model=64, n_ff=128, n_head=2, n_head_kv=1, head_dim=32, vocab_size=300, ctx=64)
# The qwen35 one: a Gated-DeltaNet layer then a gated attention layer; input widths 64 (d_model), 96
# (ssm_out and attn_output, one sign vector) and 128 (ffn_down); 6 V heads on 2 K heads.
QWEN35_SHAPE = dict(n_layer=2, d_model=64, n_ff=128, n_head=3, n_head_kv=1, head_dim=32, vocab_size=300, ctx=64,
                    rope_dim=8, rope_sections=(2, 1, 1, 0), ssm_state=16, ssm_groups=2, ssm_heads=6,
                    full_attention_interval=2)
A = "llama."
Q = "qwen35."
H = "prism.hadamard."
I32, STR, ARR, U64 = ValueType.INT32, ValueType.STRING, ValueType.ARRAY, ValueType.UINT64


def load(path) -> None:
    """What `pylowbit run` does with a file before generating."""
    m = Model(path, ctx=8, threads=1, notice=None)
    TextTokenizer(m.file)


# ---- building inputs -----------------------------------------------------------------------------

def gguf_bytes(meta: dict, specs: list, alignment: int = 32) -> bytes:
    """A whole GGUF file in memory, through the writer's own header builder."""
    head, spans = gguf_header(meta, specs, alignment)
    out = bytearray(head)
    for s, (off, nb) in zip(specs, spans):
        out += b"\0" * (len(head) + off - len(out)) + bytes(s.data)
    return bytes(out)


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def raw(kvs=(), tensors=(), data=b"", version=3, n_kv=None, n_t=None, align=32) -> bytes:
    """Hand-made GGUF bytes; kvs: (key, value type, payload bytes); tensors: (name, ne, type id, offset)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_t is None else n_t % 2**64,
                                len(kvs) if n_kv is None else n_kv % 2**64)
    for k, t, payload in kvs:
        out += _s(k) + struct.pack("<I", t) + payload
    for name, ne, tid, off in tensors:
        out += _s(name) + struct.pack("<I", len(ne) % 2**32) + b"".join(struct.pack("<Q", d % 2**64) for d in ne)
        out += struct.pack("<IQ", tid % 2**32, off % 2**64)
    out += b"\0" * (-len(out) % align)
    return out + data


F32x4 = np.arange(4, dtype=np.float32).tobytes()


class Base:
    """A valid model (metadata and tensors in memory) and ways to spoil it."""

    @classmethod
    def from_bytes(cls, data: bytes) -> "Base":
        """A Base of a file built in memory (read back through a temporary file)."""
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as t:
            t.write(data)
        try:
            b = cls(Path(t.name))
            b.bytes = data
            return b
        finally:
            os.unlink(t.name)

    def __init__(self, path: Path):
        self.path = path
        self.bytes = path.read_bytes()
        with GGUFFile(path) as f:
            self.meta = {k: MetaValue(*f.metadata_types[k][:1], v, f.metadata_types[k][1])
                         for k, v in f.metadata.items()}
            self.specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)) for t in f.tensors.values()]
            self.data_offset = f.data_offset

    def meta_changed(self, change=None, drop=()) -> bytes:
        meta = {k: v for k, v in self.meta.items() if k not in drop}
        meta.update(change or {})
        return gguf_bytes(meta, self.specs)

    def tensors_changed(self, drop=(), reshape=None, retype=None, copy=None) -> bytes:
        """Drop tensors, give one a new shape (name, shape) or type (name, type name) with zero data of
        the right size for it, or add a copy of one under another name (name, new name)."""
        specs = []
        for s in self.specs:
            if s.name in drop:
                continue
            if reshape and s.name == reshape[0]:
                s = TensorSpec(s.name, s.type_id, reshape[1], np.zeros(tensor_nbytes(s.type_id, reshape[1]), np.uint8))
            if retype and s.name == retype[0]:
                tid = type_id(retype[1])
                s = TensorSpec(s.name, tid, s.shape, np.zeros(tensor_nbytes(tid, s.shape), np.uint8))
            specs.append(s)
            if copy and s.name == copy[0]:
                specs.append(TensorSpec(copy[1], s.type_id, s.shape, s.data))
        return gguf_bytes(self.meta, specs)

    def offset_of(self, key: str) -> int:
        """File offset of the first byte after the name of metadata key / tensor `key`."""
        k = _s(key)
        return self.bytes.index(k) + len(k)


# ---- the table -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    name: str
    how: str  # how the input is built (the doc's second column)
    make: Callable  # file rows: (plain Base, rotated Base) -> bytes; call rows: (Ctx) -> zero-argument callable
    exc: type
    match: str
    kind: str = "file"
    group: str = ""
    base: str = "llama"  # file rows: the architecture of the valid model they spoil (llama or qwen35)


ROWS: list[Row] = []


def rows(group: str, kind: str, *items, base: str = "llama"):
    for name, how, make, exc, match in items:
        ROWS.append(Row(name, how, make, exc, match, kind, group, base))


def plain(f):
    return lambda b, r: f(b)


def rotated(change=None, drop=()):
    return lambda b, r: r.meta_changed(change, drop)


def meta(change=None, drop=()):
    return lambda b, r: b.meta_changed(change, drop)
