"""Tensors of a GGUF model as arrays: types without a pylowbit kernel decoded (to Q8_0, F16 or F32
for the kernels), float32 copies of any type, BF16 rounding, and anonymous-mapping buffers."""

from __future__ import annotations

import mmap

import numpy as np

from .. import _lowbit
from .. import core as lb
from ..gguf import TYPES, TensorInfo, type_id
from .config import ModelError

# Types liblowbit has GEMV/GEMM kernels for (its weight types): used straight from the mapped file.
KERNEL_FORMATS = frozenset(_lowbit.type_info(t)[0] for t in _lowbit.weight_types())
FOREIGN_POLICIES = ("q8_0", "f16", "f32")


def _gguf_dequantize(data: np.ndarray, tid: int, shape) -> np.ndarray:
    """Decode a type pylowbit has no kernel for through gguf-py's numpy dequantizers."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    try:
        qt = GGMLQuantizationType(tid)
    except ValueError:
        raise ModelError(f"no decoder for GGML type {TYPES[tid].name}") from None
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    out = dequantize(np.asarray(data).reshape(rows, -1), qt)
    return np.ascontiguousarray(out, dtype=np.float32).reshape(shape)


def anon_array(shape, dtype=np.uint8) -> np.ndarray:
    """Zeroed memory in its own anonymous mapping: pages are paid for once written and go back to
    the system as a whole when freed.  (Long-lived buffers from malloc's heap pin the freed
    temporaries below them, and np.zeros asks for transparent huge pages on large arrays, committing
    2 MB at the first write: docs/PERFORMANCE.md#decoder-memory.)"""
    n = int(np.prod(shape, dtype=np.int64))
    nbytes = n * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype, count=n).reshape(shape)


# Legacy 32-weight blocks whose codes fit Q8_0's int8 with the same fp16 scale:
# Q4_0 (d, qs[16]): value d * (nibble - 8);  Q5_0 (d, qh u32, qs[16]): value d * (5-bit code - 16).
# Weight j < 16 is the low nibble of qs[j], weight j + 16 the high one; Q5_0's fifth bit of weight
# j is bit j of qh.  (Facts from ggml's block_q4_0 / block_q5_0.)
_LOSSLESS_TO_Q8_0 = {"q4_0": 8, "q5_0": 16}  # code offset
_Q5_SHIFTS = np.arange(32, dtype=np.uint32)


def _legacy_to_q8_0(src: np.ndarray, fmt: str, dst: np.ndarray) -> None:
    """Q4_0 / Q5_0 blocks src (nb, 18 or 22) -> Q8_0 blocks dst (nb, 34), exactly."""
    dst[:, :2] = src[:, :2]  # the fp16 scale, unchanged
    qs = src[:, -16:]
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1)  # (nb, 32) codes 0..15
    if fmt == "q5_0":
        qh = np.ascontiguousarray(src[:, 2:6]).view("<u4")  # (nb, 1)
        q |= (((qh >> _Q5_SHIFTS) & 1) << 4).astype(np.uint8)
    dst[:, 2:] = q - np.uint8(_LOSSLESS_TO_Q8_0[fmt])  # wraps to the int8 bytes of code - offset


def convert_foreign(t: TensorInfo, fmt: str, chunk_bytes: int = 1 << 20) -> np.ndarray:
    """A tensor of a type without kernels as `fmt` (q8_0, f16 or f32) bytes, converted a chunk of
    rows at a time (temporaries stay ~chunk_bytes of float32) into an anon_array.  Q4_0 / Q5_0 go
    to Q8_0 without loss; other types through gguf-py's dequantizer and pylowbit's quantizer."""
    ti = TYPES[t.type_id]
    cols = t.shape[-1]
    rows = t.n_elements // cols if cols else 0
    to = TYPES[type_id(fmt)]
    src_row = cols // ti.block_size * ti.type_size
    dst_row = cols // to.block_size * to.type_size
    out = anon_array((rows, dst_row))
    src = np.asarray(t.data).reshape(rows, src_row)
    step = max(1, chunk_bytes // (4 * max(cols, 1)))
    for r in range(0, rows, step):
        s = src[r:r + step]
        if fmt == "q8_0" and t.fmt in _LOSSLESS_TO_Q8_0:
            nb = s.shape[0] * cols // to.block_size
            _legacy_to_q8_0(s.reshape(nb, -1), t.fmt, out[r:r + step].reshape(nb, to.type_size))
            continue
        x = _gguf_dequantize(s, t.type_id, (s.shape[0], cols))
        if fmt == "q8_0":
            out[r:r + step] = np.asarray(lb.quantize(x, "q8_0").data).reshape(s.shape[0], dst_row)
        else:
            out[r:r + step] = x.astype(np.float16 if fmt == "f16" else np.float32).view(np.uint8)
    return out.reshape(-1)


def bf16_to_f32(data) -> np.ndarray:
    """The bytes of the float32 values of a BF16 tensor (exact: BF16 is float32's upper 16 bits)."""
    b = np.frombuffer(data, dtype="<u2")
    out = anon_array((b.size,), np.uint32)
    np.left_shift(b, 16, out=out, dtype=np.uint32)
    return out.view(np.uint8)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to BF16 (nearest even; NaN stays a quiet NaN), as float32: what llama.cpp's BF16
    dot product multiplies a BF16 matrix with.  The matrix itself is exact in F32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) & np.uint32(0xFFFF0000)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        r = np.where(nan, (u & np.uint32(0xFFFF0000)) | np.uint32(0x00400000), r)
    return r.view(np.float32)


def dequantize_info(t: TensorInfo) -> np.ndarray:
    """float32 copy of any tensor (reference paths and small vectors)."""
    if t.fmt == "f32":
        return np.frombuffer(t.data, dtype="<f4").reshape(t.shape).astype(np.float32)
    if t.fmt == "f16":
        return np.frombuffer(t.data, dtype="<f2").reshape(t.shape).astype(np.float32)
    if t.fmt == "bf16":
        return bf16_to_f32(t.data).view(np.float32).reshape(t.shape)
    if t.fmt in KERNEL_FORMATS:
        return np.asarray(lb.dequantize(t.data, t.fmt, t.shape), dtype=np.float32).reshape(t.shape)
    return _gguf_dequantize(t.data, t.type_id, t.shape)
