"""pylowbit's C kernels inside numba's nopython mode (``pip install pylowbit[numba]``).

Two levels, both callable from ``@numba.njit`` code:

- the liblowbit functions themselves as typed ctypes functions (numba binds these as external
  calls): ``lowbit_gemv``, ``lowbit_gemm``, ``lowbit_fwht_f32``, ``lowbit_quantize_act_for``,
  ``lowbit_tensor_bytes``; pass arrays as ``arr.ctypes.data`` (C-contiguous, right dtype: yours to
  check at this level);
- checked wrappers compiled for exact array types (C-contiguous uint8 weights, float32
  activations), so a wrong dtype or a strided view does not match any signature (a TypeError at
  the call, or a typing error when the calling function compiles) and a wrong size raises
  ValueError: ``gemv``, ``gemm``, ``fwht_`` (in place), ``quantize_act_for``.

Weights travel as their GGUF bytes with their format id and shape: ``weights(qtensor)`` gives the
tuple ``(data, type_id, rows, cols)``.

    >>> import numba, pylowbit as lb, pylowbit.numba as lbn
    >>> w, t, rows, cols = lbn.weights(lb.quantize(W, "tq2_0"))
    >>> @numba.njit
    ... def step(x, y):
    ...     lbn.gemv(w, t, rows, cols, x, y)   # the numpy API's result, bit for bit
"""
from __future__ import annotations

from ctypes import c_int, c_int64, c_void_p

import numba

from pylowbit import _native
from pylowbit.core import QTensor

__all__ = ["lowbit_gemv", "lowbit_gemm", "lowbit_fwht_f32", "lowbit_quantize_act_for",
           "lowbit_tensor_bytes", "lowbit_act_group", "weights", "gemv", "gemm", "fwht_", "quantize_act_for"]

_ptr = c_void_p  # numba passes arr.ctypes.data (an integer address) for these
lowbit_tensor_bytes = _native.function("lowbit_tensor_bytes", c_int64, [c_int, c_int64])
lowbit_gemv = _native.function("lowbit_gemv", c_int,
                               [c_int, _ptr, c_int64, c_int64, _ptr, _ptr, c_int])
lowbit_gemm = _native.function("lowbit_gemm", c_int,
                               [c_int, _ptr, c_int64, c_int64, _ptr, c_int64, _ptr, c_int])
lowbit_fwht_f32 = _native.function("lowbit_fwht_f32", c_int,
                                   [_ptr, c_int64, c_int64, c_int64, c_int, _ptr, c_int, c_int])
lowbit_quantize_act_for = _native.function("lowbit_quantize_act_for", c_int,
                                           [c_int, _ptr, c_int64, _ptr, _ptr, _ptr])
lowbit_act_group = _native.function("lowbit_act_group", c_int64, [c_int])


def weights(w: QTensor):
    """(data uint8[::1], type_id, rows, cols) of a 2-D QTensor: the arguments the kernels take."""
    if not isinstance(w, QTensor):
        raise TypeError(f"weights must be a pylowbit.QTensor, not {type(w).__name__}")
    rows, cols = w._matrix_shape()
    if w.data is None:
        raise ValueError("this PackedTensor dropped its file bytes; pass the QTensor (or pack "
                         "with keep_source=True)")
    return w.data, w.type_id, rows, cols


@numba.njit(nogil=True)
def _check_status(st):
    if st == -4:
        raise MemoryError("liblowbit: out of memory")
    if st == -2:
        raise ValueError("liblowbit: the weight format does not support this operation")
    if st == -3:
        raise ValueError("liblowbit: a size is not a multiple of the format's block or group")
    if st != 0:
        raise ValueError("liblowbit: invalid argument")


@numba.njit(nogil=True)
def _check_weights(w, type_id, rows, cols):
    need = lowbit_tensor_bytes(type_id, rows * cols)
    if need < 0:
        _check_status(need)
    if w.size != need:
        raise ValueError("weights: the byte count does not match the format, rows and cols")


def _c(dtype, ndim, readonly=False):
    return numba.types.Array(dtype, ndim, "C", readonly=readonly)


def _sigs(*args):
    """Signatures over the read-only and writeable forms of the inputs (a tuple of array types):
    a global array captured by a jitted function is read-only to numba."""
    out = [()]
    for a in args:
        out = [o + (t,) for o in out for t in (a if isinstance(a, tuple) else (a,))]
    return [numba.void(*o) for o in out]


_U8 = (_c(numba.uint8, 1), _c(numba.uint8, 1, True))
_F32_1 = _c(numba.float32, 1)
_F32_1_IN = (_F32_1, _c(numba.float32, 1, True))
_F32_2 = _c(numba.float32, 2)
_F32_2_IN = (_F32_2, _c(numba.float32, 2, True))
_I = numba.int64


@numba.njit(_sigs(_U8, _I, _I, _I, _F32_1_IN, _F32_1, _I), nogil=True)
def _gemv(w, type_id, rows, cols, x, out, threads):
    _check_weights(w, type_id, rows, cols)
    if x.shape[0] != cols:
        raise ValueError("gemv: x must have `cols` elements")
    if out.shape[0] != rows:
        raise ValueError("gemv: out must have `rows` elements")
    _check_status(lowbit_gemv(type_id, w.ctypes.data, rows, cols, x.ctypes.data, out.ctypes.data,
                              threads))


@numba.njit(nogil=True)
def gemv(w, type_id, rows, cols, x, out, threads=0):
    """out[rows] = W . x[cols] (float32, C-contiguous); threads 0: the library default."""
    _gemv(w, type_id, rows, cols, x, out, threads)
    return out


@numba.njit(_sigs(_U8, _I, _I, _I, _F32_2_IN, _F32_2, _I), nogil=True)
def _gemm(w, type_id, rows, cols, x, out, threads):
    _check_weights(w, type_id, rows, cols)
    if x.shape[1] != cols:
        raise ValueError("gemm: x must have shape (batch, cols)")
    if out.shape[0] != x.shape[0] or out.shape[1] != rows:
        raise ValueError("gemm: out must have shape (batch, rows)")
    _check_status(lowbit_gemm(type_id, w.ctypes.data, rows, cols, x.ctypes.data, x.shape[0],
                              out.ctypes.data, threads))


@numba.njit(nogil=True)
def gemm(w, type_id, rows, cols, x, out, threads=0):
    """out[batch, rows] = x[batch, cols] . W^T (float32, C-contiguous)."""
    _gemm(w, type_id, rows, cols, x, out, threads)
    return out


@numba.njit(_sigs(_F32_1, _I, numba.boolean, _I), nogil=True)
def _fwht(x, block, normalize, threads):
    _check_status(lowbit_fwht_f32(x.ctypes.data, 1, x.shape[0], block, 1 if normalize else 0, 0,
                                  0, threads))


@numba.njit(nogil=True)
def fwht_(x, block, normalize=True, threads=0):
    """The Walsh-Hadamard transform of x (float32[n], C-contiguous) in place, block by block."""
    _fwht(x, block, normalize, threads)
    return x


@numba.njit(_sigs(_I, _F32_1_IN, _c(numba.int8, 1), _F32_1, _c(numba.int32, 1)), nogil=True)
def _quantize_act_for(type_id, x, q, d, s):
    if q.shape[0] != x.shape[0]:
        raise ValueError("quantize_act_for: q must have the length of x")
    g = lowbit_act_group(type_id)
    if g < 0:
        _check_status(g)
    if x.shape[0] % g:
        raise ValueError("quantize_act_for: x's length is not a multiple of the activation group")
    if d.shape[0] != x.shape[0] // g or s.shape[0] != x.shape[0] // g:
        raise ValueError("quantize_act_for: d and s need one value per activation group")
    _check_status(lowbit_quantize_act_for(type_id, x.ctypes.data, x.shape[0], q.ctypes.data,
                                          d.ctypes.data, s.ctypes.data))


@numba.njit(nogil=True)
def quantize_act_for(type_id, x, q, d, s):
    """The activations as the kernels quantize them for weight format type_id, into q (int8[n]),
    d (float32[n / group]) and s (int32[n / group]): pylowbit.quantize_act_for's result."""
    _quantize_act_for(type_id, x, q, d, s)
    return q, d, s

