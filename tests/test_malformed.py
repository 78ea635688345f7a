"""The malformed-input table: each row is an input pylowbit must refuse, the exception it must raise
and a regular expression its message must match.  The parametrization below IS the table;
docs/MALFORMED.md is rendered from it (`python tests/test_malformed.py > docs/MALFORMED.md`) and
test_doc_is_in_sync keeps the two equal.

File rows are loaded the way `pylowbit run` loads a model: GGUFFile -> Config -> rotation ->
weights -> tokenizer (`load`).  Each must also allocate no more than the file size + SLACK
(tracemalloc, which sees Python and numpy allocations) and finish within TIMEOUT seconds
(faulthandler kills the run otherwise); test_file_rows_under_an_address_space_limit loads them all
again in one subprocess under RLIMIT_AS, which also sees allocations made in C.
"""
from __future__ import annotations

import faulthandler
import json
import os
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import pylowbit as lb
from pylowbit.gguf import (GGUFError, GGUFFile, MetaValue, TensorSpec, ValueType, gguf_header, tensor_nbytes,
                           type_id)
from pylowbit.model import HadamardError, Model, ModelError, TextTokenizer

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


rows("Header and counts", "file",
     ("empty file", "0 bytes", lambda b, r: b"", GGUFError, r"truncated header \(0 bytes"),
     ("truncated: inside the fixed header", "first 20 bytes of a valid model", plain(lambda b: b.bytes[:20]),
      GGUFError, r"truncated header \(20 bytes"),
     ("truncated: just after the counts", "first 40 bytes", plain(lambda b: b.bytes[:40]),
      GGUFError, r"metadata count \d+ is absurd: .* 40-byte file \(truncated or corrupt\)"),
     ("truncated: inside a key", "1 key of a 40-character name, cut after 20",
      lambda b, r: raw([("k" * 40, 8, _s("x"))], align=1)[:52], GGUFError,
      r"truncated file: metadata key #0 needs 40 bytes at offset 32, file has 52"),
     ("truncated: inside a string array", "cut 2500 bytes into tokenizer.ggml.tokens (300 strings)",
      plain(lambda b: b.bytes[:b.offset_of("tokenizer.ggml.tokens") + 2500]),
      GGUFError, r"truncated file: metadata 'tokenizer.ggml.tokens'\[\d+\]"),
     ("truncated: inside the tensor infos", "cut 3 bytes after the last tensor's name",
      plain(lambda b: b.bytes[:b.offset_of(b.specs[-1].name) + 3]),
      GGUFError, r"truncated file: dims of tensor 'blk\.0\.ffn_norm\.weight'"),
     ("truncated: inside tensor data", "the last 100 bytes cut off", plain(lambda b: b.bytes[:-100]),
      GGUFError, r"tensor 'blk\.0\.ffn_norm\.weight' runs past the end of the file"),
     ("bad magic", "GGML instead of GGUF", lambda b, r: b"GGML" + raw()[4:], GGUFError, r"not a GGUF file"),
     ("unknown version", "version 7", lambda b, r: raw(version=7), GGUFError, r"unsupported GGUF version 7"),
     ("big-endian file", "version field 3 byte-swapped", lambda b, r: raw(version=3 << 24), GGUFError,
      r"big-endian GGUF"),
     ("absurd tensor count", "tensor count 2^62", lambda b, r: raw(n_t=2**62), GGUFError,
      r"tensor count 4611686018427387904 is absurd"),
     ("negative tensor count", "tensor count -1 (as int64)", lambda b, r: raw(n_t=-1), GGUFError,
      r"tensor count 18446744073709551615 is absurd"),
     ("absurd metadata count", "kv count 2^40", lambda b, r: raw(n_kv=2**40), GGUFError,
      r"metadata count 1099511627776 is absurd"),
     ("negative metadata count", "kv count -1", lambda b, r: raw(n_kv=-1), GGUFError,
      r"metadata count 18446744073709551615 is absurd"),
     ("metadata count above the real one", "kv count 3, 1 key present",
      lambda b, r: raw([("k", 4, struct.pack("<I", 1))], n_kv=3, align=1), GGUFError, r"metadata count 3 is absurd"),
     )

rows("Metadata encoding", "file",
     ("absurd key length", "key length 2^60", lambda b, r: raw(n_kv=1, align=1) + struct.pack("<Q", 2**60) + bytes(32),
      GGUFError, r"metadata key #0: string length 1152921504606846976 is absurd"),
     ("negative string length", "string value length -1",
      lambda b, r: raw([("k", 8, struct.pack("<q", -1))]), GGUFError,
      r"metadata 'k': string length 18446744073709551615 is absurd"),
     ("string past end of file", "string value length 1000 in a 100-byte file",
      lambda b, r: raw([("k", 8, struct.pack("<Q", 1000))]), GGUFError, r"truncated file: metadata 'k' needs 1000"),
     ("absurd array length", "uint32 array of 2^50 elements",
      lambda b, r: raw([("k", 9, struct.pack("<IQ", 4, 2**50))]), GGUFError,
      r"metadata 'k': array length 1125899906842624 is absurd"),
     ("negative array length", "string array of -1 elements",
      lambda b, r: raw([("k", 9, struct.pack("<Iq", 8, -1))]), GGUFError,
      r"metadata 'k': array length 18446744073709551615 is absurd"),
     ("array of unknown type", "array element type 77",
      lambda b, r: raw([("k", 9, struct.pack("<IQ", 77, 1))]), GGUFError,
      r"metadata 'k': unknown array element type 77"),
     ("arrays nested too deep", "6 nested arrays",
      lambda b, r: raw([("k", 9, struct.pack("<IQ", 9, 1) * 6 + struct.pack("<IQ", 4, 0))]), GGUFError,
      r"metadata 'k'(\[0\])+: arrays nested deeper than 4"),
     ("unknown value type", "value type 42", lambda b, r: raw([("k", 42, b"")]), GGUFError,
      r"metadata 'k' has unknown value type 42"),
     ("bool that is neither 0 nor 1", "bool value 5", lambda b, r: raw([("k", 7, b"\x05")]), GGUFError,
      r"metadata 'k': bool value 5"),
     ("duplicate metadata key", "key 'k' twice", lambda b, r: raw([("k", 4, struct.pack("<I", 1))] * 2),
      GGUFError, r"duplicate metadata key 'k'"),
     )

rows("Alignment and tensor infos", "file",
     ("alignment not a power of two", "general.alignment = 48",
      lambda b, r: raw([("general.alignment", 4, struct.pack("<I", 48))]), GGUFError,
      r"general.alignment 48 is not a positive power of two"),
     ("alignment zero", "general.alignment = 0",
      lambda b, r: raw([("general.alignment", 4, struct.pack("<I", 0))]), GGUFError,
      r"general.alignment 0 is not a positive power of two"),
     ("alignment absurd", "general.alignment = 2^31 with one tensor",
      lambda b, r: raw([("general.alignment", 4, struct.pack("<I", 2**31))], [("w", [4], 0, 0)], F32x4),
      GGUFError, r"truncated file: tensor data would start at 2147483648"),
     ("alignment of the wrong type", "general.alignment as a string",
      lambda b, r: raw([("general.alignment", 8, _s("32"))]), GGUFError,
      r"metadata 'general.alignment' has type string, expected int"),
     ("alignment of the wrong int type", "general.alignment as uint64",
      lambda b, r: raw([("general.alignment", 10, struct.pack("<Q", 32))]), GGUFError,
      r"general.alignment must be a uint32"),
     ("zero dims", "n_dims = 0", lambda b, r: raw(tensors=[("w", [], 0, 0)], data=F32x4), GGUFError,
      r"tensor 'w' has 0 dims"),
     ("too many dims", "n_dims = 5", lambda b, r: raw(tensors=[("w", [1, 1, 1, 1, 4], 0, 0)], data=F32x4),
      GGUFError, r"tensor 'w' has 5 dims"),
     ("absurd dims count", "n_dims = 2^32 - 1 (-1)",
      lambda b, r: raw(n_t=1, align=1) + _s("w") + struct.pack("<i", -1) + bytes(64), GGUFError,
      r"tensor 'w' has 4294967295 dims"),
     ("zero dimension", "ne = [4, 0]", lambda b, r: raw(tensors=[("w", [4, 0], 0, 0)], data=F32x4), GGUFError,
      r"tensor 'w' has a zero dimension"),
     ("overflowing dimension product", "ne = [2^32, 2^32, 2^32]",
      lambda b, r: raw(tensors=[("w", [2**32] * 3, 0, 0)], data=F32x4), GGUFError, r"tensor 'w': dims .* overflow"),
     ("negative dimension", "ne = [-1] (2^64 - 1)", lambda b, r: raw(tensors=[("w", [-1], 0, 0)], data=F32x4),
      GGUFError, r"tensor 'w': dims \[18446744073709551615\] overflow"),
     ("unknown tensor type", "type id 99", lambda b, r: raw(tensors=[("w", [4], 99, 0)], data=F32x4), GGUFError,
      r"tensor 'w' has unknown type id 99"),
     ("negative tensor type", "type id -1 (2^32 - 1)", lambda b, r: raw(tensors=[("w", [4], -1, 0)], data=F32x4),
      GGUFError, r"tensor 'w' has unknown type id 4294967295"),
     ("row not a block multiple", "q8_0 tensor of 48 weights",
      lambda b, r: raw(tensors=[("w", [48], 8, 0)], data=bytes(64)), GGUFError,
      r"tensor 'w': row length 48 is not a multiple of the q8_0 block size 32"),
     ("misaligned data offset", "offset 4 with alignment 32",
      lambda b, r: raw(tensors=[("w", [1], 0, 4)], data=F32x4 * 2), GGUFError,
      r"tensor 'w': offset 4 is not a multiple of the alignment 32"),
     ("tensor data past end of file", "8 floats declared, 4 present",
      lambda b, r: raw(tensors=[("w", [8], 0, 0)], data=F32x4), GGUFError, r"tensor 'w' runs past the end of the file"),
     ("offset past end of file", "offset 2^40",
      lambda b, r: raw(tensors=[("w", [4], 0, 2**40)], data=F32x4), GGUFError,
      r"tensor 'w' runs past the end of the file"),
     ("offset near 2^64", "offset 2^64 - 32",
      lambda b, r: raw(tensors=[("w", [4], 0, 2**64 - 32)], data=F32x4), GGUFError,
      r"tensor 'w' runs past the end of the file"),
     ("overlapping tensors", "a's 64 bytes overlap b at offset 32",
      lambda b, r: raw(tensors=[("a", [16], 0, 0), ("b", [4], 0, 32)], data=bytes(64)), GGUFError,
      r"tensor 'a' overlaps the next tensor's data"),
     ("duplicate tensor names", "two tensors named 'w'",
      lambda b, r: raw(tensors=[("w", [4], 0, 0), ("w", [4], 0, 32)], data=F32x4 + bytes(16) + F32x4), GGUFError,
      r"duplicate tensor name 'w'"),
     )

rows("Model metadata", "file",
     ("unknown architecture", "general.architecture = 'mamba'", meta({"general.architecture": "mamba"}),
      ModelError, r"unsupported architecture 'mamba'"),
     ("architecture missing", "general.architecture dropped", meta(drop=["general.architecture"]),
      ModelError, r"missing metadata key 'general.architecture'"),
     ("architecture of the wrong type", "general.architecture as uint32", meta({"general.architecture": 7}),
      ModelError, r"metadata 'general.architecture' has type uint32, expected str"),
     ("required key missing", "llama.embedding_length dropped", meta(drop=[A + "embedding_length"]),
      ModelError, r"missing metadata key 'llama.embedding_length'"),
     ("int key of the wrong type", "llama.block_count as float32", meta({A + "block_count": 1.0}),
      ModelError, r"metadata 'llama.block_count' has type float32, expected int"),
     ("int key as a string", "llama.embedding_length = 'wide'", meta({A + "embedding_length": "wide"}),
      ModelError, r"metadata 'llama.embedding_length' has type string, expected int"),
     ("float key of the wrong type", "llama.attention.layer_norm_rms_epsilon as a string",
      meta({A + "attention.layer_norm_rms_epsilon": "1e-5"}), ModelError,
      r"metadata 'llama.attention.layer_norm_rms_epsilon' has type string, expected float"),
     ("rope base of the wrong type", "llama.rope.freq_base as an array",
      meta({A + "rope.freq_base": np.ones(2, np.float32)}), ModelError,
      r"metadata 'llama.rope.freq_base' has type array\[float32\], expected float"),
     ("negative count", "llama.block_count = -1 (int32)", meta({A + "block_count": MetaValue(I32, -1)}),
      ModelError, r"llama.block_count = -1 is out of range"),
     ("zero heads", "llama.attention.head_count = 0", meta({A + "attention.head_count": 0}),
      ModelError, r"llama.attention.head_count = 0 is out of range"),
     ("absurd heads", "llama.attention.head_count = 2^30", meta({A + "attention.head_count": 2**30}),
      ModelError, r"llama.attention.head_count = 1073741824 is out of range"),
     ("absurd layer count", "llama.block_count = 2^40 (uint64)", meta({A + "block_count": MetaValue(U64, 2**40)}),
      ModelError, r"llama.block_count = 1099511627776 is out of range"),
     ("heads not grouping", "head_count 3, head_count_kv 2",
      meta({A + "attention.head_count": 3, A + "attention.head_count_kv": 2}),
      ModelError, r"head_count 3 is not a multiple of head_count_kv 2"),
     ("epsilon not positive", "layer_norm_rms_epsilon = NaN",
      meta({A + "attention.layer_norm_rms_epsilon": float("nan")}), ModelError, r"epsilon.* must be positive"),
     ("rope dims odd", "llama.rope.dimension_count = 31", meta({A + "rope.dimension_count": 31}),
      ModelError, r"rope dimension 31 must be even and <= head dim 32"),
     ("unknown rope scaling", "llama.rope.scaling.type = 'yarn'", meta({A + "rope.scaling.type": "yarn"}),
      ModelError, r"llama.rope.scaling.type 'yarn' is not supported"),
     )

rows("Model tensors", "file",
     ("missing required tensor", "blk.0.ffn_up.weight dropped",
      plain(lambda b: b.tensors_changed(drop=["blk.0.ffn_up.weight"])), GGUFError,
      r"missing tensor 'blk\.0\.ffn_up\.weight'"),
     ("missing embedding", "token_embd.weight dropped",
      plain(lambda b: b.tensors_changed(drop=["token_embd.weight"])), ModelError,
      r"missing tensor 'token_embd\.weight'"),
     ("missing norm", "output_norm.weight dropped",
      plain(lambda b: b.tensors_changed(drop=["output_norm.weight"])), GGUFError,
      r"missing tensor 'output_norm\.weight'"),
     ("matrix shape not matching the config", "blk.0.ffn_up.weight as (64, 64)",
      plain(lambda b: b.tensors_changed(reshape=("blk.0.ffn_up.weight", (64, 64)))), ModelError,
      r"blk\.0\.ffn_up\.weight has shape \(64, 64\), expected \(128, 64\)"),
     ("norm shape not matching the config", "blk.0.attn_norm.weight of 32",
      plain(lambda b: b.tensors_changed(reshape=("blk.0.attn_norm.weight", (32,)))), ModelError,
      r"blk\.0\.attn_norm\.weight has shape \(32,\), expected \(64,\)"),
     ("width not matching the config", "llama.embedding_length = 128", meta({A + "embedding_length": 128}),
      ModelError, r"token_embd\.weight has width 64, model width is 128"),
     )

rows("qwen35 (Gated-DeltaNet hybrid) metadata and tensors", "file",
     ("qwen35: truncated", "the last 100 bytes cut off", plain(lambda b: b.bytes[:-100]), GGUFError,
      r"runs past the end of the file"),
     *[(f"qwen35: {key} missing", f"{Q}{key} dropped", meta(drop=[Q + key]), ModelError,
        rf"{Q}{key}: missing \(required for qwen35\)")
       for key in ("ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank", "ssm.group_count",
                   "rope.dimension_sections", "attention.layer_norm_rms_epsilon")],
     ("qwen35: inner size not state x V heads", "ssm.inner_size = 80 (16 x 6 = 96)", meta({Q + "ssm.inner_size": 80}),
      ModelError, r"qwen35.ssm.inner_size 80 is not ssm.state_size 16 x ssm.time_step_rank 6"),
     ("qwen35: V heads not a multiple of K heads", "ssm.group_count = 4 (6 V heads)",
      meta({Q + "ssm.group_count": 4}), ModelError,
      r"qwen35.ssm.time_step_rank 6 \(V heads\) is not a multiple of ssm.group_count 4"),
     ("qwen35: conv kernel of one tap", "ssm.conv_kernel = 1", meta({Q + "ssm.conv_kernel": 1}), ModelError,
      r"qwen35.ssm.conv_kernel 1 must be >= 2"),
     ("qwen35: conv kernel of the wrong type", "ssm.conv_kernel as a string", meta({Q + "ssm.conv_kernel": "4"}),
      ModelError, r"metadata 'qwen35.ssm.conv_kernel' has type string, expected int"),
     ("qwen35: rope sections of 3 entries", "rope.dimension_sections = [2, 1, 1]",
      meta({Q + "rope.dimension_sections": np.array([2, 1, 1], np.int32)}), ModelError,
      r"qwen35.rope.dimension_sections: expected 4 non-negative integers"),
     ("qwen35: rope sections all zero", "rope.dimension_sections = [0, 0, 0, 4]",
      meta({Q + "rope.dimension_sections": np.array([0, 0, 0, 4], np.int32)}), ModelError,
      r"qwen35.rope.dimension_sections: the first three sections are all zero"),
     ("qwen35: rope sections as strings", "rope.dimension_sections = ['2', ...]",
      meta({Q + "rope.dimension_sections": ["2", "1", "1", "0"]}), ModelError,
      r"qwen35.rope.dimension_sections: expected 4 non-negative integers"),
     ("qwen35: recurrent layer flags of the wrong length", "attention.recurrent_layers = [true] (2 layers)",
      meta({Q + "attention.recurrent_layers": np.array([True])}), ModelError,
      r"qwen35.attention.recurrent_layers: expected 2 booleans, got 1"),
     ("qwen35: no recurrent layer", "full_attention_interval = 1", meta({Q + "full_attention_interval": 1}),
      ModelError, r"qwen35: no recurrent layer"),
     ("qwen35: key and value head dims differ", "attention.value_length = 16",
      meta({Q + "attention.value_length": 16}), ModelError, r"qwen35: attention.key_length 32 != value_length 16"),
     ("qwen35: conv taps as F16", "blk.0.ssm_conv1d.weight stored as f16",
      plain(lambda b: b.tensors_changed(retype=("blk.0.ssm_conv1d.weight", "f16"))), ModelError,
      r"blk\.0\.ssm_conv1d\.weight has type f16, expected f32"),
     ("qwen35: ssm_a of the wrong length", "blk.0.ssm_a with 32 values",
      plain(lambda b: b.tensors_changed(reshape=("blk.0.ssm_a", (32,)))), ModelError,
      r"blk\.0\.ssm_a has shape \(32,\), expected \(6,\)"),
     ("qwen35: ssm_a as F16", "blk.0.ssm_a stored as f16",
      plain(lambda b: b.tensors_changed(retype=("blk.0.ssm_a", "f16"))), ModelError,
      r"blk\.0\.ssm_a has type f16, expected f32"),
     ("qwen35: conv taps of the wrong shape", "blk.0.ssm_conv1d.weight as (160, 3)",
      plain(lambda b: b.tensors_changed(reshape=("blk.0.ssm_conv1d.weight", (160, 3)))), ModelError,
      r"blk\.0\.ssm_conv1d\.weight has shape \(160, 3\), expected \(160, 4\)"),
     ("qwen35: attn_qkv of the wrong shape", "blk.0.attn_qkv.weight as (128, 64)",
      plain(lambda b: b.tensors_changed(reshape=("blk.0.attn_qkv.weight", (128, 64)))), ModelError,
      r"blk\.0\.attn_qkv\.weight has shape \(128, 64\), expected \(160, 64\)"),
     ("qwen35: missing delta-rule decay", "blk.0.ssm_a dropped",
      plain(lambda b: b.tensors_changed(drop=["blk.0.ssm_a"])), GGUFError, r"missing tensor 'blk\.0\.ssm_a'"),
     ("qwen35: gated query of the plain width", "blk.1.attn_q.weight as (96, 64)",
      plain(lambda b: b.tensors_changed(reshape=("blk.1.attn_q.weight", (96, 64)))), ModelError,
      r"blk\.1\.attn_q\.weight has shape \(96, 64\), expected \(192, 64\)"),
     base="qwen35")

rows("qwen35 rotation metadata (prism.hadamard.*)", "file",
     ("qwen35 rotation: gdn_v_grouped of the wrong type", "gdn_v_grouped = 'true'",
      rotated({H + "gdn_v_grouped": "true"}), HadamardError,
      r"prism.hadamard.gdn_v_grouped: metadata 'prism.hadamard.gdn_v_grouped' has type string, expected bool"),
     ("qwen35 rotation: a gate weight listed as folded", "weight_names += blk.0.ssm_alpha.weight",
      lambda b, r: r.meta_changed({H + "weight_names": [*r.meta[H + "weight_names"].value, "blk.0.ssm_alpha.weight"]}),
      HadamardError, r"prism.hadamard.weight_names: 'blk\.0\.ssm_alpha\.weight' is not a foldable weight"),
     ("qwen35 rotation: a GDN weight in an attention layer", "a copy of blk.0.attn_gate as blk.1.attn_gate, listed",
      lambda b, r: Base.from_bytes(r.tensors_changed(copy=("blk.0.attn_gate.weight", "blk.1.attn_gate.weight"))
                                   ).meta_changed({H + "weight_names": [*r.meta[H + "weight_names"].value,
                                                                        "blk.1.attn_gate.weight"]}),
      HadamardError, r"'blk\.1\.attn_gate\.weight' is a Gated-DeltaNet weight in attention layer 1"),
     ("qwen35 rotation: no sign vector for ssm_out's width", "sign_widths [64, 128] (96 dropped)",
      lambda b, r: r.meta_changed({H + "sign_widths": MetaValue(ARR, [64, 128], I32),
                                   H + "sign_values": np.ones(192, np.float32)}), HadamardError,
      r"prism.hadamard.sign_widths: no sign vector for width 96"),
     ("qwen35 rotation: unknown version", "version = 2", rotated({H + "version": 2}), HadamardError,
      r"prism.hadamard.version: unsupported version 2"),
     base="qwen35")

rows("Rotation metadata on a model without Gated-DeltaNet layers", "file",
     ("rotation: gdn_v_grouped on a llama model", "gdn_v_grouped = true",
      rotated({H + "gdn_v_grouped": True}), HadamardError,
      r"prism.hadamard.gdn_v_grouped: set, but the model has no Gated-DeltaNet layers"),
     )

rows("Tokenizer metadata", "file",
     ("tokenizer missing", "tokenizer.ggml.model dropped", meta(drop=["tokenizer.ggml.model"]), ModelError,
      r"no tokenizer \(tokenizer.ggml.model missing\)"),
     ("unknown tokenizer", "tokenizer.ggml.model = 'rwkv'", meta({"tokenizer.ggml.model": "rwkv"}), ModelError,
      r"tokenizer.ggml.model 'rwkv' is not supported"),
     ("unknown pre-tokenizer", "tokenizer.ggml.pre = 'nope'", meta({"tokenizer.ggml.pre": "nope"}), ModelError,
      r"tokenizer.ggml.pre 'nope' is not supported"),
     ("tokens of the wrong type", "tokenizer.ggml.tokens as an int32 array",
      meta({"tokenizer.ggml.tokens": np.arange(300, dtype=np.int32)}), GGUFError,
      r"metadata 'tokenizer.ggml.tokens' has type array\[int32\], expected list\[str\]"),
     ("token types of the wrong type", "tokenizer.ggml.token_type as strings",
      meta({"tokenizer.ggml.token_type": ["1"] * 300}), GGUFError,
      r"metadata 'tokenizer.ggml.token_type' has type array\[string\], expected list\[int\]"),
     ("token types of the wrong length", "tokenizer.ggml.token_type of 3 entries",
      meta({"tokenizer.ggml.token_type": np.ones(3, np.int32)}), ModelError,
      r"tokenizer.ggml.token_type has 3 entries for 300 tokens"),
     ("merges of the wrong type", "tokenizer.ggml.merges as float32",
      meta({"tokenizer.ggml.merges": np.ones(3, np.float32)}), GGUFError,
      r"metadata 'tokenizer.ggml.merges' has type array\[float32\], expected list\[str\]"),
     ("merge naming an unknown token", "tokenizer.ggml.merges = ['zzz qqq']",
      meta({"tokenizer.ggml.merges": ["zzz qqq"]}), ModelError,
      r"tokenizer.ggml.merges: .*Token `zzz` out of vocabulary"),
     ("flag of the wrong type", "tokenizer.ggml.add_bos_token = 'yes'",
      meta({"tokenizer.ggml.add_bos_token": "yes"}), GGUFError,
      r"metadata 'tokenizer.ggml.add_bos_token' has type string, expected bool"),
     ("merge without a space", "tokenizer.ggml.merges = ['ab']", meta({"tokenizer.ggml.merges": ["ab"]}),
      ModelError, r"tokenizer.ggml.merges entry 'ab' is not 'left right'"),
     ("special token id out of range", "tokenizer.ggml.bos_token_id = 300",
      meta({"tokenizer.ggml.bos_token_id": 300}), ModelError,
      r"tokenizer.ggml.bos_token_id = 300 is outside the vocabulary \(0..299\)"),
     )

rows("Rotation metadata (prism.hadamard.*)", "file",
     ("rotation: unknown version", "version = 2", rotated({H + "version": 2}), HadamardError,
      r"prism.hadamard.version: unsupported version 2"),
     ("rotation: version of the wrong type", "version as a string", rotated({H + "version": "1"}), HadamardError,
      r"prism.hadamard.version: metadata 'prism.hadamard.version' has type string, expected int"),
     ("rotation: key missing", "transform dropped", rotated(drop=[H + "transform"]), HadamardError,
      r"prism.hadamard.transform: missing"),
     ("rotation: block size missing", "block_size dropped", rotated(drop=[H + "block_size"]), HadamardError,
      r"prism.hadamard.block_size: missing"),
     ("rotation: block not a power of two", "block_size = 48", rotated({H + "block_size": 48}), HadamardError,
      r"prism.hadamard.block_size: 48 is not a power of two"),
     ("rotation: block size 0", "block_size = 0", rotated({H + "block_size": 0}), HadamardError,
      r"prism.hadamard.block_size: 0 is not a power of two >= 2"),
     ("rotation: negative block size", "block_size = -32 (int32)", rotated({H + "block_size": MetaValue(I32, -32)}),
      HadamardError, r"prism.hadamard.block_size: -32 is not a power of two"),
     ("rotation: block of the wrong type", "block_size = '32'", rotated({H + "block_size": "32"}), HadamardError,
      r"prism.hadamard.block_size: .*expected int"),
     ("rotation: block wider than a weight", "block_size = 128 (widths 64, 128)",
      rotated({H + "block_size": 128}), HadamardError,
      r"prism.hadamard.sign_widths: width 64 is not a positive multiple of block_size 128"),
     ("rotation: unknown transform", "transform = 'hadamard'", rotated({H + "transform": "hadamard"}), HadamardError,
      r"prism.hadamard.transform: 'hadamard' is not"),
     ("rotation: unknown axis", "axis = 'output'", rotated({H + "axis": "output"}), HadamardError,
      r"prism.hadamard.axis: 'output' is not"),
     ("rotation: unknown sign mode", "sign_mode = 'random'", rotated({H + "sign_mode": "random"}), HadamardError,
      r"prism.hadamard.sign_mode: 'random' is neither"),
     ("rotation: empty weight list", "weight_names = []", rotated({H + "weight_names": MetaValue(ARR, [], STR)}),
      HadamardError, r"prism.hadamard.weight_names: empty list"),
     ("rotation: weight names of the wrong type", "weight_names as int32",
      rotated({H + "weight_names": np.arange(3, dtype=np.int32)}), HadamardError,
      r"prism.hadamard.weight_names: must be an array of strings"),
     ("rotation: weight listed twice", "weight_names = [attn_q, attn_q]",
      rotated({H + "weight_names": ["blk.0.attn_q.weight"] * 2}), HadamardError,
      r"prism.hadamard.weight_names: lists a name twice"),
     ("rotation: weight not foldable", "weight_names = [blk.0.attn_norm.weight]",
      rotated({H + "weight_names": ["blk.0.attn_norm.weight"]}), HadamardError,
      r"prism.hadamard.weight_names: 'blk\.0\.attn_norm\.weight' is not a foldable weight"),
     ("rotation: weight not in the file", "weight_names = [blk.7.attn_q.weight]",
      rotated({H + "weight_names": ["blk.7.attn_q.weight"]}), HadamardError,
      r"prism.hadamard.weight_names: 'blk\.7\.attn_q\.weight' is not a tensor of this file"),
     ("rotation: inverse name not allowed", "inverse_weight_names = [output.weight]",
      rotated({H + "inverse_weight_names": ["output.weight"]}), HadamardError,
      r"prism.hadamard.inverse_weight_names: 'output\.weight' is not allowed"),
     ("rotation: sign widths empty", "sign_widths = []", rotated({H + "sign_widths": MetaValue(ARR, [], I32)}),
      HadamardError, r"prism.hadamard.sign_widths: must be a non-empty integer array"),
     ("rotation: sign widths of the wrong type", "sign_widths as float32",
      rotated({H + "sign_widths": np.array([64, 128], np.float32)}), HadamardError,
      r"prism.hadamard.sign_widths: must be a non-empty integer array"),
     ("rotation: sign width listed twice", "sign_widths = [64, 64]",
      rotated({H + "sign_widths": MetaValue(ARR, [64, 64], I32)}), HadamardError,
      r"prism.hadamard.sign_widths: a width is listed twice"),
     ("rotation: sign width not a block multiple", "sign_widths = [64, 100]",
      rotated({H + "sign_widths": MetaValue(ARR, [64, 100], I32)}), HadamardError,
      r"prism.hadamard.sign_widths: width 100 is not a positive multiple of block_size 32"),
     ("rotation: negative sign width", "sign_widths = [64, -128]",
      rotated({H + "sign_widths": MetaValue(ARR, [64, -128], I32)}), HadamardError,
      r"prism.hadamard.sign_widths: width -128 is not a positive multiple"),
     ("rotation: sign widths summing past 2^64", "sign_widths = [64, 128, 2^63, 3*2^61, 2^61] (uint64), 192 values",
      rotated({H + "sign_widths": np.array([64, 128, 2**63, 3 * 2**61, 2**61], np.uint64)}), HadamardError,
      r"prism.hadamard.sign_values: 192 values, but sign_widths sum to 18446744073709551808"),
     ("rotation: width without signs", "sign_widths = [64], 64 values",
      rotated({H + "sign_widths": MetaValue(ARR, [64], I32), H + "sign_values": np.ones(64, np.float32)}),
      HadamardError, r"prism.hadamard.sign_widths: no sign vector for width 128"),
     ("rotation: sign values of the wrong length", "sign_values of 10",
      rotated({H + "sign_values": np.ones(10, np.float32)}), HadamardError,
      r"prism.hadamard.sign_values: 10 values, but sign_widths sum to 192"),
     ("rotation: sign values not +-1", "sign_values all 0.5",
      rotated({H + "sign_values": np.full(192, 0.5, np.float32)}), HadamardError,
      r"prism.hadamard.sign_values: values must all be \+1 or -1"),
     ("rotation: sign values of the wrong type", "sign_values as strings",
      rotated({H + "sign_values": ["1"] * 192}), HadamardError, r"prism.hadamard.sign_values: must be a numeric array"),
     )


# ---- call rows: (Ctx) -> zero-argument callable -------------------------------------------------

class Ctx:
    """What call rows need: the valid model's path, a loaded model, a small weight matrix."""

    def __init__(self, base: Base, tmp: Path):
        self.base, self.path, self.tmp = base, base.path, tmp
        self._model = None

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = Model(self.path, ctx=8, threads=1, notice=None)
        self._model.reset()
        return self._model

    def cli(self, cmd: str, *argv: str):
        import argparse

        from pylowbit.commands import perplexity, run

        mod = {"run": run, "perplexity": perplexity}[cmd]
        ap = argparse.ArgumentParser()
        mod.add_parser(ap.add_subparsers())
        text = self.tmp / "text.txt"
        text.write_text("the capital of France is Paris. " * 8)
        base = ["-m", str(self.path)] + (["-f", str(text)] if cmd == "perplexity" else [])
        args = ap.parse_args([cmd, *base, *argv])
        return lambda: mod.main(args)


    def chat(self, template: str, seconds: float = 0.5):
        """--chat with this tokenizer.chat_template (rendering limited to `seconds`)."""
        from pylowbit.model import tokenizer

        p = self.tmp / "chat.gguf"
        p.write_bytes(self.base.meta_changed({"tokenizer.chat_template": template}))

        def call():
            old, tokenizer.CHAT_TEMPLATE_SECONDS = tokenizer.CHAT_TEMPLATE_SECONDS, seconds
            try:
                with GGUFFile(p) as f:
                    TextTokenizer(f).apply_chat_template([{"role": "user", "content": "hi"}])
            finally:
                tokenizer.CHAT_TEMPLATE_SECONDS = old
        return call


def _w(fmt="tq2_0", rows=4, cols=256):
    return lb.quantize(np.ones((rows, cols), np.float32), fmt)


X256 = np.ones(256, np.float32)

rows("Model inputs", "call",
     ("token id out of range", "forward([300]) with 300 tokens", lambda c: lambda: c.model.forward([300]),
      ModelError, r"token id 300 out of range 0..299"),
     ("negative token id", "forward([-1])", lambda c: lambda: c.model.forward([-1]), ModelError,
      r"token id -1 out of range 0..299"),
     ("prompt longer than the context", "9 tokens, ctx 8", lambda c: lambda: c.model.forward(np.ones(9, np.int64)),
      ModelError, r"context full: 0 \+ 9 tokens exceed the context length 8"),
     ("prompt longer than the context (CLI)", "run -n 500 -c 32",
      lambda c: c.cli("run", "-p", "x", "-n", "500", "-c", "32"),
      ValueError, r"prompt \(\d+ tokens\) \+ -n 500 exceed the context 32"),
     ("no tokens", "forward([])", lambda c: lambda: c.model.forward([]), ModelError,
      r"forward\(\) needs at least one token"),
     ("zero context", "Model(ctx=-1)", lambda c: lambda: Model(c.path, ctx=-1, notice=None), ModelError,
      r"context length must be positive, got -1"),
     ("zero context (0 is not the default)", "Model(ctx=0)", lambda c: lambda: Model(c.path, ctx=0, notice=None),
      ModelError, r"context length must be positive, got 0"),
     ("zero context (CLI)", "run -c 0", lambda c: c.cli("run", "-c", "0"), ValueError,
      r"-c/--ctx-size must be >= 1, got 0"),
     ("zero threads", "Model(threads=0)", lambda c: lambda: Model(c.path, threads=0, notice=None),
      ValueError, r"threads must be >= 1, got 0"),
     ("zero threads (CLI run)", "run -t 0", lambda c: c.cli("run", "-t", "0"), ValueError,
      r"-t/--threads must be >= 1, got 0"),
     ("negative threads (CLI perplexity)", "perplexity -t -2", lambda c: c.cli("perplexity", "-t", "-2"),
      ValueError, r"-t/--threads must be >= 1, got -2"),
     ("zero threads (kernel)", "gemv(x, threads=0)", lambda c: lambda: _w().gemv(X256, threads=0), ValueError,
      r"threads must be >= 1, got 0"),
     ("negative threads (global)", "set_threads(-1)", lambda c: lambda: lb.set_threads(-1), ValueError, r"threads"),
     ("negative generation length", "run -n -1", lambda c: c.cli("run", "-n", "-1"), ValueError,
      r"-n must be >= 0, got -1"),
     )

rows("Chat template (tokenizer.chat_template, used by run --chat)", "call",
     ("template that never ends", "two nested range(100000) loops",
      lambda c: c.chat("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"),
      ModelError, r"chat template: rendering took longer than 0.5 s"),
     ("template output too large", "'a' * 10**9", lambda c: c.chat("{{ 'a' * 10**9 }}"), ModelError,
      r"chat template: repetition of 1 x 1000000000 is too large"),
     ("template power too large", "2 ** 10**8", lambda c: c.chat("{% set n = 10**8 %}{{ 2 ** n }}"), ModelError,
      r"chat template: power 100000000 is too large"),
     ("template that fails", "1/0", lambda c: c.chat("{{ 1/0 }}"), ModelError,
      r"chat template failed to render: ZeroDivisionError"),
     ("template that recurses", "a macro calling itself",
      lambda c: c.chat("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), ModelError,
      r"chat template failed to render: RecursionError"),
     ("template that does not parse", "'{% for %}'", lambda c: c.chat("{% for %}"), ModelError,
      r"chat template failed to render: Expected an expression"),
     )

rows("Arrays", "call",
     ("weights of the wrong dtype", "quantize(float64)", lambda c: lambda: lb.quantize(np.ones(256), "tq2_0"),
      TypeError, r"float32"),
     ("activations of the wrong dtype", "gemv(float16 x)", lambda c: lambda: _w().gemv(X256.astype(np.float16)),
      TypeError, r"float32"),
     ("activations of an int dtype", "gemv(int32 x)", lambda c: lambda: _w().gemv(X256.astype(np.int32)),
      TypeError, r"float32"),
     ("object array", "quantize([None] * 256)", lambda c: lambda: lb.quantize(np.array([None] * 256), "tq2_0"),
      TypeError, r"dtype object"),
     ("bytes of the wrong dtype", "QTensor(uint16 data)",
      lambda c: lambda: lb.QTensor(np.zeros(33, np.uint16), "tq2_0", (1, 256)), TypeError, r"uint8"),
     ("activations of the wrong shape", "gemv(x of 128) on 256 columns",
      lambda c: lambda: _w().gemv(np.ones(128, np.float32)), ValueError, r"x must have shape \(256,\)"),
     ("batch of the wrong shape", "gemm(x (2, 128)) on 256 columns",
      lambda c: lambda: _w().gemm(np.ones((2, 128), np.float32)), ValueError, r"x must have shape \(batch, 256\)"),
     ("output of the wrong shape", "gemv(out of 5) for 4 rows",
      lambda c: lambda: _w().gemv(X256, out=np.empty(5, np.float32)), ValueError, r"out must have shape"),
     ("output of the wrong dtype", "gemv(out float64)",
      lambda c: lambda: _w().gemv(X256, out=np.empty(4, np.float64)), TypeError, r"out must be a float32"),
     ("1-D weight as a matrix", "gemv on a quantized vector",
      lambda c: lambda: lb.quantize(X256, "tq2_0").gemv(X256), ValueError, r"2-D weight"),
     ("array row not a block multiple", "quantize((2, 200)) to tq2_0",
      lambda c: lambda: lb.quantize(np.ones((2, 200), np.float32), "tq2_0"), ValueError,
      r"row length 200 is not a multiple of the block size 256"),
     ("shape not a block multiple", "QTensor q2_0 of 60 columns",
      lambda c: lambda: lb.QTensor(np.zeros(18, np.uint8), "q2_0", (1, 60)), ValueError,
      r"not a multiple of the block size 64"),
     ("bytes one short", "QTensor of 263 bytes for (4, 256) tq2_0",
      lambda c: lambda: lb.QTensor(_w().data[:-1], "tq2_0", (4, 256)), ValueError, r"needs 264 bytes, got 263"),
     ("bytes short of a block", "dequantize 65 bytes as 256 tq2_0 weights",
      lambda c: lambda: lb.dequantize(np.zeros(65, np.uint8), "tq2_0", (256,)), ValueError, r"needs 66 bytes"),
     ("non-contiguous bytes", "QTensor(data[::2])",
      lambda c: lambda: lb.QTensor(np.zeros(2 * 66 * 2, np.uint8)[::2], "tq2_0", (2, 256)), ValueError,
      r"C-contiguous"),
     ("misaligned bytes", "dequantize(data[1:]) of tq2_0",
      lambda c: lambda: lb.dequantize(np.zeros(2 * 66 + 1, np.uint8)[1:], "tq2_0", (2, 256)), ValueError,
      r"aligned"),
     ("transform length not a block multiple", "fwht(x of 96, block=64)",
      lambda c: lambda: lb.fwht(np.ones(96, np.float32), block=64), ValueError,
      r"last dimension 96 is not a multiple of block=64"),
     ("transform signs of the wrong shape", "fwht(x of 64, signs of 32)",
      lambda c: lambda: lb.fwht(np.ones(64, np.float32), block=64, signs=np.ones(32, np.float32)), ValueError,
      r"signs must be a 1-D vector of length 64"),
     )

FILE_ROWS = [r for r in ROWS if r.kind == "file"]
CALL_ROWS = [r for r in ROWS if r.kind == "call"]


# ---- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    from pylowbit.convert import convert
    from pylowbit.model.synthetic import write_synthetic_model

    d = tmp_path_factory.mktemp("malformed")
    p = write_synthetic_model(d / "base.gguf", arch="llama", fmt="q8_0", embed_fmt="f16", **SHAPE)
    f32 = write_synthetic_model(d / "f32.gguf", arch="llama", fmt="f32", **SHAPE)
    convert(f32, d / "rotated.gguf", "q8_0", rotate=32)  # widths 64 and 128, signs for both
    q = write_synthetic_model(d / "qwen35.gguf", arch="qwen35", fmt="q8_0", embed_fmt="f16", **QWEN35_SHAPE)
    qr = write_synthetic_model(d / "qwen35-rotated.gguf", arch="qwen35", fmt="q8_0", embed_fmt="f16",
                               rotation_block=32, **QWEN35_SHAPE)
    paths = (p, d / "rotated.gguf", q, qr)
    for path in paths:
        load(path)  # all are valid (and every lazy import is done before anything is measured)
    return tuple(Base(path) for path in paths)


def base_pair(bases, row: Row):
    """(plain, rotated) valid models of the row's architecture."""
    return bases[2:] if row.base == "qwen35" else bases[:2]


@pytest.fixture(scope="module")
def built(bases, tmp_path_factory):
    """name -> path of every file row's input."""
    d = tmp_path_factory.mktemp("rows")
    out = {}
    for i, r in enumerate(FILE_ROWS):
        out[r.name] = d / f"row{i:03d}.gguf"
        out[r.name].write_bytes(r.make(*base_pair(bases, r)))
    return out


def _peak_bytes(fn) -> tuple[int, BaseException | None]:
    """Peak traced allocation while fn runs, and what it raised."""
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    err = None
    faulthandler.dump_traceback_later(TIMEOUT, exit=True)  # a hang ends the run with a traceback
    try:
        fn()
    except Exception as e:  # returned to the caller, which checks its class
        err = e
    finally:
        faulthandler.cancel_dump_traceback_later()
        peak = tracemalloc.get_traced_memory()[1] - base
        if not was_tracing:
            tracemalloc.stop()
    return peak, err


# ---- the tests ----------------------------------------------------------------------------------------

def test_table_has_unique_names_and_valid_patterns():
    import re

    names = [r.name for r in ROWS]
    assert len(set(names)) == len(names), [n for n in names if names.count(n) > 1]
    for r in ROWS:
        re.compile(r.match)
        assert issubclass(r.exc, Exception) and r.kind in ("file", "call")


@pytest.mark.parametrize("row", FILE_ROWS, ids=[r.name for r in FILE_ROWS])
def test_malformed_file(built, row):
    path = built[row.name]
    size = path.stat().st_size
    peak, err = _peak_bytes(lambda: load(path))
    assert err is not None, f"{row.name}: loaded without an error"
    assert type(err) is row.exc, f"{row.name}: {type(err).__name__}: {err}"
    with pytest.raises(row.exc, match=row.match):
        raise err
    assert peak <= size + SLACK, f"{row.name}: allocated {peak} bytes for a {size}-byte file"


@pytest.mark.parametrize("row", CALL_ROWS, ids=[r.name for r in CALL_ROWS])
def test_malformed_call(bases, tmp_path, row):
    fn = row.make(Ctx(bases[0], tmp_path))
    with pytest.raises(row.exc, match=row.match):
        fn()


def test_the_measurements_can_fail(bases, tmp_path):
    """The allocation check sees numpy allocations, and the valid models load within the bound."""
    peak, _ = _peak_bytes(lambda: np.ones(SLACK * 4, np.uint8))
    assert peak >= SLACK * 4
    for b in bases:
        peak, err = _peak_bytes(lambda: load(b.path))
        assert err is None and peak <= len(b.bytes) + SLACK, (peak, len(b.bytes))


_WORKER = textwrap.dedent("""
    import gc, json, resource, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_malformed import load
    rows, base, limit = json.loads(sys.stdin.read())
    load(base)  # warm: imports, thread pool, allocator arenas
    np.ones(1 << 20).sum()
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + limit, vm + limit))
    try:  # the limit really binds (or this test could not fail)
        np.ones(limit // 8 + (1 << 20))
        out = {"__control__": ["allocated"]}
    except MemoryError:
        out = {"__control__": ["MemoryError"]}
    for name, path in rows:
        try:
            load(path)
            out[name] = ["loaded"]
        except BaseException as e:
            out[name] = [c.__name__ for c in type(e).__mro__] + [str(e)[:200]]
        gc.collect()  # a failed load's mappings sit in reference cycles (traceback -> frames) until collected
    print(json.dumps(out))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux")
@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""), reason="ASan reserves terabytes of address space")
def test_file_rows_under_an_address_space_limit(bases, built):
    """Every file row again, in one subprocess whose address space may grow only by the largest
    file + 256 MiB past a warmed-up load: an allocation in C sized from a corrupt field fails there
    (MemoryError, or a crash) instead of passing unseen; a hang hits the timeout."""
    limit = max(p.stat().st_size for p in built.values()) + (256 << 20)  # (64 MiB flaked once in ~10 runs)
    job = json.dumps([[[n, str(p)] for n, p in built.items()], str(bases[0].path), limit])
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
    r = subprocess.run([sys.executable, "-c", _WORKER, str(Path(__file__).parent)], input=job,
                       capture_output=True, text=True, timeout=TIMEOUT * 2, env=env, cwd=bases[0].path.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got.pop("__control__") == ["MemoryError"]
    wrong = {row.name: got.get(row.name) for row in FILE_ROWS
             if row.exc.__name__ not in (got.get(row.name) or [])}
    assert not wrong, wrong


# ---- the document -----------------------------------------------------------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "MALFORMED.md"


def render() -> str:
    out = ["# Malformed inputs and the exceptions they raise", "",
           "Generated from `tests/test_malformed.py` (the table is that test's parametrization; regenerate",
           "with `python tests/test_malformed.py > docs/MALFORMED.md`).  File rows are loaded as `pylowbit run`",
           "loads a model and must also allocate at most the file size + 1 MiB and finish in time.",
           "`GGUFError`, `ModelError` and `HadamardError` are `ValueError`s; messages are matched as",
           "regular expressions."]
    group = None
    for r in ROWS:
        if r.group != group:
            group = r.group
            out += ["", f"## {group}", "", "| Input | Built as | Raises | Message matches |", "|---|---|---|---|"]
        match = r.match.replace("|", "\\|")
        out.append(f"| {r.name} | {r.how} | `{r.exc.__name__}` | `{match}` |")
    return "\n".join(out) + "\n"


def test_doc_is_in_sync():
    if not (DOC.parent.parent / "pyproject.toml").exists():
        pytest.skip("tests/ copied out of the source tree (the installed-package run): no docs/ here")
    assert DOC.read_text() == render(), "docs/MALFORMED.md is stale: python tests/test_malformed.py > docs/MALFORMED.md"


if __name__ == "__main__":
    sys.stdout.write(render())
