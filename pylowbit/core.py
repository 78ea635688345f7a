"""The numpy-facing API: formats, QTensor, quantize / dequantize / gemv / gemm.

Arrays are checked here (dtype, shape, contiguity, sizes) so that errors name the problem in
pylowbit's terms; pylowbit._lowbit then releases the GIL and calls liblowbit without copies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pylowbit import _fwht, _lowbit
from pylowbit._arrays import as_array, check_out, float32_array, is_foreign

__all__ = [
    "FormatInfo", "FORMATS", "format_info", "QTensor", "quantize", "dequantize", "gemv", "gemm",
    "quantize_act", "quantize_act_for", "tensor_nbytes", "PackedTensor", "pack", "as_array", "fwht",
    "fwht_quantize_act",
]


@dataclass(frozen=True)
class FormatInfo:
    name: str
    type_id: int  # GGUF tensor type id
    block_size: int  # weights per block
    type_size: int  # bytes per block (I2_S: per 128-weight group; the tensor adds a 32-byte tail)

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size


# The weight formats of liblowbit's facts table (lowbit_weight_types) by type id; ggml's Q5_0,
# Q4_K, Q6_K among them (decoded and multiplied in place; quantize refuses them)
FORMATS: dict[str, FormatInfo] = {
    info.name: info for info in (FormatInfo(*_lowbit.type_info(t)) for t in sorted(_lowbit.weight_types()))
}
_BY_ID = {f.type_id: f for f in FORMATS.values()}
# llama.cpp's formats that pylowbit decodes and multiplies in place but does not write
DECODE_ONLY = frozenset({"q5_0", "q4_k", "q6_k"})


def format_info(fmt) -> FormatInfo:
    """FormatInfo for a format name ("tq2_0"), a GGUF type id (35) or a FormatInfo."""
    if isinstance(fmt, FormatInfo):
        return fmt
    if isinstance(fmt, (int, np.integer)) and not isinstance(fmt, bool):
        try:
            return _BY_ID[int(fmt)]
        except KeyError:
            raise ValueError(f"unknown tensor type id {int(fmt)}; pylowbit knows "
                             f"{sorted(_BY_ID)}") from None
    if isinstance(fmt, str):
        try:
            return FORMATS[fmt.lower()]
        except KeyError:
            raise ValueError(f"unknown format {fmt!r}; known formats: "
                             f"{', '.join(FORMATS)}") from None
    raise TypeError(f"format must be a name, a GGUF type id or FormatInfo, not {type(fmt).__name__}")


def tensor_nbytes(fmt, n: int) -> int:
    """Bytes of a tensor of n weights in this format as stored in GGUF (I2_S adds its 32-byte tail)."""
    info = format_info(fmt)
    if n % info.block_size:
        raise ValueError(f"{info.name}: {n} weights is not a multiple of the block size "
                         f"{info.block_size}")
    return _lowbit.tensor_nbytes(info.type_id, n)


def _byte_view(data, what: str) -> np.ndarray:
    """A flat uint8 view of `data` without copying; refuses what cannot be viewed as such."""
    if isinstance(data, QTensor):
        return data.data
    arr = as_array(data, what) if not isinstance(data, (bytes, bytearray, memoryview)) else \
        np.frombuffer(data, dtype=np.uint8)
    if arr.dtype != np.uint8:
        raise TypeError(f"{what} must be uint8 bytes, got dtype {arr.dtype}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    return arr.reshape(-1)


class QTensor:
    """A weight matrix (or vector) in a GGUF format: raw bytes + format + shape (numpy order).

    Wraps the bytes without copying (e.g. a view of a memory-mapped GGUF file).
    """

    __slots__ = ("data", "info", "shape")

    def __init__(self, data, fmt, shape):
        self.info = format_info(fmt)
        self.shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if any(s < 0 for s in self.shape):
            raise ValueError(f"negative dimension in shape {self.shape}")
        self.data = _byte_view(data, "QTensor data")
        n = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        row = self.shape[-1] if self.shape else 1
        if row % self.info.block_size:
            raise ValueError(f"{self.info.name}: row length {row} is not a multiple of the block "
                             f"size {self.info.block_size}")
        need = tensor_nbytes(self.info, n)
        if self.data.nbytes != need:
            raise ValueError(f"{self.info.name} tensor of shape {self.shape} needs {need} bytes, "
                             f"got {self.data.nbytes}")

    fmt = property(lambda self: self.info.name)
    type_id = property(lambda self: self.info.type_id)
    nbytes = property(lambda self: self.data.nbytes)

    def __repr__(self):
        return f"QTensor({self.fmt}, shape={self.shape}, {self.nbytes} bytes)"

    def dequantize(self) -> np.ndarray:
        n = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        return _lowbit.dequantize(self.data, self.type_id, n).reshape(self.shape)

    def _matrix_shape(self):
        if len(self.shape) != 2:
            raise ValueError(f"a matrix product needs a 2-D weight, this one has shape {self.shape}")
        return self.shape

    def gemv(self, x, out=None, threads: int | None = None) -> np.ndarray:
        """W @ x for x of shape (cols,): returns (rows,)."""
        rows, cols = self._matrix_shape()
        x = float32_array(x, "x")
        if x.ndim != 1 or x.shape[0] != cols:
            raise ValueError(f"x must have shape ({cols},), got {x.shape}")
        res = check_out(out, (rows,)) if out is not None else np.empty(rows, dtype=np.float32)
        self._gemm(x.reshape(1, cols), res.reshape(1, rows), threads)
        return res if out is None else out

    def gemm(self, x, out=None, threads: int | None = None) -> np.ndarray:
        """x @ W.T for x of shape (batch, cols): returns (batch, rows)."""
        rows, cols = self._matrix_shape()
        x = float32_array(x, "x")
        if x.ndim != 2 or x.shape[1] != cols:
            raise ValueError(f"x must have shape (batch, {cols}), got {x.shape}")
        res = check_out(out, (x.shape[0], rows)) if out is not None else \
            np.empty((x.shape[0], rows), dtype=np.float32)
        self._gemm(x, res, threads)
        return res if out is None else out

    def gemm_into(self, x: np.ndarray, out: np.ndarray, threads: int | None = None) -> np.ndarray:
        """out[T, rows] = x[T, cols] . W^T with no Python-side checks (the C side checks dtype, shape
        and contiguity and raises): the decoder's per-call path, ~200 calls a token."""
        rows, cols = self._matrix_shape()
        _lowbit.gemm(self.data, self.type_id, rows, cols, x, out, threads or 0)
        return out

    def _gemm(self, x, out, threads):
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.gemm_into(np.ascontiguousarray(x), out, threads)

    def pack(self, threads: int | None = None, keep_source: bool = False) -> "PackedTensor":
        """Repack once into the row-interleaved layout the decode path streams fastest.

        Ternary / 2-bit formats (and Q1_0 where the variant has a GEMV for its 64-row tiles:
        AVX2, AVX-VNNI, AVX-512 with VBMI; Q8_0 where it has one for its 16-row sets: AVX-512
        VNNI) are copied
        (PackedTensor.packed_nbytes) and the result drops its reference to these bytes unless
        keep_source; F16 and F32 (Q1_0, Q8_0 elsewhere) are not repacked and the result
        references (and computes on) these bytes.  threads: for the repack.
        """
        return PackedTensor(self, threads, keep_source)


class PackedTensor(QTensor):
    """A QTensor's matrix repacked for fast GEMV / GEMM: the same .gemv / .gemm, same results.

    Built by QTensor.pack().  For the repacked formats (TQ1_0, TQ2_0, I2_S, Q2_0, PQ2_0, PTQ1_0;
    Q1_0 and Q8_0 where `is_packed` says so) it holds only the packed copy (`packed_nbytes`), so
    the file bytes (e.g. a memory-mapped GGUF tensor) can be released: `.data` is None and
    `.dequantize()` is not available unless keep_source=True (`.unpack_rows` gives rows' file bytes
    back).  F16 and F32 are not repacked: the tensor keeps (and computes on) the original bytes."""

    __slots__ = ("_m",)

    def __init__(self, src: QTensor, threads: int | None = None, keep_source: bool = False):
        rows, cols = src._matrix_shape()
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.info, self.shape = src.info, src.shape
        self._m = _lowbit.PackedMatrix(src.data, src.type_id, rows, cols, threads or 0)
        self.data = src.data if (keep_source or not self._m.is_packed) else None

    packed_nbytes = property(lambda self: self._m.nbytes)
    is_packed = property(lambda self: self._m.is_packed)
    nbytes = property(lambda self: self._m.nbytes if self._m.is_packed else self.data.nbytes)

    def __repr__(self):
        return f"PackedTensor({self.fmt}, shape={self.shape}, {self.nbytes} bytes)"

    def dequantize(self) -> np.ndarray:
        if self.data is None:
            raise ValueError("this PackedTensor dropped its file bytes; pack with keep_source=True "
                             "to dequantize it")
        return super().dequantize()

    def pack(self, threads: int | None = None, keep_source: bool = False) -> "PackedTensor":
        return self

    def unpack_rows(self, idx) -> np.ndarray:
        """The file bytes of rows idx, shape (len(idx), row bytes), from the packed copy (or the
        borrowed bytes): a row lookup that needs no file bytes (not for I2_S)."""
        return self._m.unpack_rows(idx)

    def gemm_into(self, x: np.ndarray, out: np.ndarray, threads: int | None = None) -> np.ndarray:
        self._m.gemm(x, out, threads or 0)
        return out


def quantize(x, fmt) -> QTensor:
    """Quantize a float32 array whose last axis is a multiple of the format's block size.

    Ternary and 2-bit formats use their owners' rule (scale = max|w| per block, per tensor for
    I2_S; codes round-half-away(w / scale) + 1).  NaN or infinity raises ValueError.
    """
    info = format_info(fmt)
    if info.name in DECODE_ONLY:
        raise ValueError(f"{info.name}: pylowbit reads and multiplies this llama.cpp format but does "
                         f"not quantize to it")
    x = float32_array(x, "x")
    if x.ndim == 0:
        raise ValueError("quantize needs at least a 1-D array")
    if x.shape[-1] % info.block_size:
        raise ValueError(f"{info.name}: row length {x.shape[-1]} is not a multiple of the block "
                         f"size {info.block_size}")
    flat = np.ascontiguousarray(x).reshape(-1)
    return QTensor(_lowbit.quantize(flat, info.type_id), info, x.shape)


def dequantize(data, fmt=None, shape=None) -> np.ndarray:
    """Decode a QTensor, or raw GGUF bytes given with their format and shape, to float32."""
    if isinstance(data, QTensor):
        return data.dequantize()
    if fmt is None or shape is None:
        raise TypeError("dequantize(bytes, fmt, shape): format and shape are required for raw bytes")
    return QTensor(data, fmt, shape).dequantize()


def _as_qtensor(w) -> QTensor:
    if not isinstance(w, QTensor):
        raise TypeError(f"weights must be a pylowbit.QTensor, not {type(w).__name__}")
    return w


def gemv(w: QTensor, x, out=None, threads: int | None = None) -> np.ndarray:
    """y = W @ x with W a QTensor (rows, cols) and x float32 (cols,)."""
    return _as_qtensor(w).gemv(x, out=out, threads=threads)


def gemm(w: QTensor, x, out=None, threads: int | None = None) -> np.ndarray:
    """Y = X @ W.T with W a QTensor (rows, cols) and X float32 (batch, cols)."""
    return _as_qtensor(w).gemm(x, out=out, threads=threads)


def quantize_act(x, group: int):
    """The A8 activation quantizer: (codes int8, per-group scales float32, per-group sums int32)."""
    x = float32_array(x, "x")
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    return _lowbit.quantize_act(np.ascontiguousarray(x), int(group))


def quantize_act_for(x, fmt):
    """The activations as the library quantizes them for weight format `fmt` (name, type id or
    FormatInfo): its group (256 TQ1_0 / TQ2_0, 128 PQ2_0 / PTQ1_0 / I2_S, 32 the rest) and its
    rounding rule; (codes int8, per-group scales float32, per-group sums int32)."""
    info = format_info(fmt)
    x = float32_array(x, "x")
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    return _lowbit.quantize_act_for(np.ascontiguousarray(x), info.type_id)


def packing_pays_off() -> bool:
    """Whether the active ISA variant has SIMD kernels for the packed layout (QTensor.pack); the
    scalar variant runs the packed layout's plain reference, slower than the file layout's."""
    return _lowbit.isa_active() != "scalar"


def pack(w: QTensor, threads: int | None = None, keep_source: bool = False) -> PackedTensor:
    """Repack a 2-D QTensor once for fast products (see QTensor.pack)."""
    return _as_qtensor(w).pack(threads, keep_source)


def fwht(x, *, block=None, normalize=True, signs=None, order="signs-then-rotate", out=None,
         threads=None):
    """Walsh-Hadamard transform along the last axis of a float32/float64 array (any array: see
    as_array); `out` may be the caller's array (torch tensor, numpy array, x itself) and is returned.
    The transform itself and its options: pylowbit._fwht.fwht."""
    if is_foreign(x) or is_foreign(out):
        xa = as_array(x, "x") if is_foreign(x) else x
        if out is not None:
            oa = xa if out is x else as_array(out, "out", writeable=True)
            _fwht.fwht(xa, block=block, normalize=normalize, signs=signs, order=order, out=oa,
                       threads=threads)
            return out
        x = xa
    return _fwht.fwht(x, block=block, normalize=normalize, signs=signs, order=order, out=out,
                      threads=threads)


def fwht_quantize_act(x, block, signs, group, *, out=None):
    """y = H(signs * x) blockwise (normalized), then A8-quantized: (q int8, d float32, s int32);
    any array in (see as_array), `out` an optional (q, d, s) of the caller's arrays, returned as
    given.  The operation itself: pylowbit._fwht.fwht_quantize_act."""
    if is_foreign(x):
        x = as_array(x, "x")
    if out is not None and isinstance(out, tuple) and any(is_foreign(o) for o in out):
        _fwht.fwht_quantize_act(x, block, signs, group, out=tuple(
            as_array(o, f"out {n}", writeable=True) for o, n in zip(out, "qds")))
        return out
    return _fwht.fwht_quantize_act(x, block, signs, group, out=out)
