# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin wrappers over liblowbit: check arrays, release the GIL, call C, turn status codes into
exceptions.  Friendlier objects (QTensor, format names) live in pylowbit/core.py."""
import os

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uintptr_t
from libc.stdlib cimport malloc, free
from cpython.buffer cimport PyBUF_FORMAT

from pylowbit.lowbit cimport *

cnp.import_array()

ABI_VERSION = LOWBIT_ABI_VERSION


cdef int check(int status, str what) except -1:
    if status == LOWBIT_OK:
        return 0
    msg = f"{what}: {lowbit_status_str(status).decode()}"
    if status == LOWBIT_ENOMEM:
        raise MemoryError(msg)
    if status == LOWBIT_EISA:
        raise RuntimeError(msg)
    raise ValueError(msg)


def version():
    return lowbit_version().decode()


def abi_version():
    return lowbit_abi_version()


include "_lowbit_types.pxi"


cdef int64_t _check_weights(Py_ssize_t got, int type_id, int64_t rows, int64_t cols) except -1:
    """The bytes a rows x cols matrix of type_id takes, checked to be the `got` bytes given."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, rows * cols) if rows >= 0 and cols >= 0 else LOWBIT_EINVAL
    if need < 0:
        check(<int>need, f"matrix {rows}x{cols} of type {type_id}")
    if got != need:
        raise ValueError(f"weights of type {type_id}, shape ({rows}, {cols}) need {need} bytes, got {got}")
    return need


cdef int check_aligned(const void *p, int type_id, str what) except -1:
    # Blocks hold fp16 scales (2-byte aligned structs); F32 needs 4.
    cdef uintptr_t need = 4 if type_id == 0 else 2
    if (<uintptr_t>p) % need:
        raise ValueError(f"{what}: buffer address is not {need}-byte aligned; copy it "
                         f"(np.ascontiguousarray(..., dtype=np.uint8).copy())")
    return 0


# ---- codecs ---------------------------------------------------------------------------------

def quantize(const float[::1] x not None, int type_id):
    """Quantize a flat float32 array (a whole tensor) into a new uint8 array of GGUF bytes."""
    cdef int64_t n = x.shape[0]
    cdef int64_t nbytes = lowbit_tensor_bytes(type_id, n)
    if nbytes < 0:
        check(<int>nbytes, f"quantize {n} values to type {type_id}")
    out = np.empty(nbytes, dtype=np.uint8)
    cdef uint8_t[::1] o = out
    cdef int st
    with nogil:
        st = lowbit_quantize(type_id, &x[0] if n else NULL, n, &o[0] if nbytes else NULL)
    if n == 0:
        return out
    if st == LOWBIT_EINVAL:
        raise ValueError("quantize: input contains NaN or infinity")
    check(st, "quantize")
    return out


def dequantize(const uint8_t[::1] data not None, int type_id, int64_t n):
    """Decode n values of type `type_id` from GGUF bytes into a new float32 array."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, n)
    if need < 0:
        check(<int>need, f"dequantize {n} values of type {type_id}")
    if data.shape[0] != need:
        raise ValueError(f"dequantize: {n} values of type {type_id} need {need} bytes, "
                         f"got {data.shape[0]}")
    out = np.empty(n, dtype=np.float32)
    if n == 0:
        return out
    cdef float[::1] o = out
    check_aligned(&data[0], type_id, "dequantize")
    cdef int st
    with nogil:
        st = lowbit_dequantize(type_id, &data[0], n, &o[0])
    check(st, "dequantize")
    return out


def quantize_act(const float[::1] x not None, int64_t group):
    """A8 activation quantization: returns (codes int8[n], scales float32[n/group], sums int32)."""
    cdef int64_t n = x.shape[0]
    if group <= 0 or n % group:
        raise ValueError(f"quantize_act: length {n} is not a multiple of the group size {group}")
    q = np.empty(n, dtype=np.int8)
    d = np.empty(n // group, dtype=np.float32)
    s = np.empty(n // group, dtype=np.int32)
    if n == 0:
        return q, d, s
    cdef int8_t[::1] qv = q
    cdef float[::1] dv = d
    cdef int32_t[::1] sv = s
    cdef int st
    with nogil:
        st = lowbit_quantize_act(&x[0], n, group, &qv[0], &dv[0], &sv[0])
    check(st, "quantize_act")
    return q, d, s


def quantize_act_for(const float[::1] x not None, int type_id):
    """A8 activation quantization as the library does it for weight type `type_id` (its group
    lowbit_act_group and its rounding rule, formats.h): (codes int8[n], scales float32[n/group],
    sums int32)."""
    cdef int64_t n = x.shape[0]
    cdef int64_t group = act_group(type_id)
    if n % group:
        raise ValueError(f"quantize_act_for: length {n} is not a multiple of the group size {group}")
    q = np.empty(max(n, 1), dtype=np.int8)  # n == 0 still asks C whether the type quantizes
    d = np.empty(max(n // group, 1), dtype=np.float32)
    s = np.empty(max(n // group, 1), dtype=np.int32)
    cdef float x0 = 0
    cdef const float *xp = &x[0] if n else &x0
    cdef int8_t[::1] qv = q
    cdef float[::1] dv = d
    cdef int32_t[::1] sv = s
    cdef int st
    with nogil:
        st = lowbit_quantize_act_for(type_id, xp, n, &qv[0], &dv[0], &sv[0])
    check(st, f"quantize_act_for type {type_id}")
    return q[:n], d[:n // group], s[:n // group]


# ---- matrix products ------------------------------------------------------------------------

def gemm(const uint8_t[::1] w not None, int type_id, int64_t rows, int64_t cols,
         const float[:, ::1] x not None, float[:, ::1] out not None, int threads=0):
    """out[batch, rows] = x[batch, cols] . W^T for W (rows x cols) in GGUF bytes of `type_id`."""
    _check_weights(w.shape[0], type_id, rows, cols)
    if x.shape[1] != cols:
        raise ValueError(f"activations have {x.shape[1]} columns, the matrix has {cols}")
    if out.shape[0] != x.shape[0] or out.shape[1] != rows:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), "
                         f"expected ({x.shape[0]}, {rows})")
    cdef int64_t batch = x.shape[0]
    if batch == 0 or rows == 0:
        return
    if cols == 0:
        out[:, :] = 0
        return
    check_aligned(&w[0], type_id, "gemm")
    cdef int st
    with nogil:
        st = lowbit_gemm(type_id, &w[0], rows, cols, &x[0, 0], batch, &out[0, 0], threads)
    check(st, "gemm")


def gemv_act(const uint8_t[::1] w not None, int type_id, int64_t rows, int64_t cols,
             const int8_t[::1] q not None, const float[::1] d not None,
             const int32_t[::1] s not None, float[::1] out not None, int threads=0):
    """GEMV with activations already in A8 form (for kernel tests)."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, rows * cols)
    if need < 0:
        check(<int>need, f"matrix {rows}x{cols} of type {type_id}")
    cdef int64_t G = lowbit_act_group(type_id)
    if w.shape[0] != need or q.shape[0] != cols or d.shape[0] * G != cols or s.shape[0] * G != cols \
            or out.shape[0] != rows:
        raise ValueError("gemv_act: inconsistent array sizes")
    if rows == 0 or cols == 0:
        return
    check_aligned(&w[0], type_id, "gemv_act")
    cdef lowbit_act a
    a.q = &q[0]
    a.d = &d[0]
    a.s = &s[0]
    a.n = cols
    a.group = G
    cdef int st
    with nogil:
        st = lowbit_gemm_act(type_id, &w[0], rows, cols, &a, 1, &out[0], threads)
    check(st, "gemv_act")


# ---- packed matrices ------------------------------------------------------------------------

# PackedMatrix and the packed copy in a caller's buffer (pack_into, wrap, unpack).
include "_lowbit_packed.pxi"


cdef float *_f32_matrix(object a, int64_t rows, int64_t cols, bint out, str what,
                        Py_ssize_t idx=-1) except NULL:
    """Data pointer of a C-contiguous float32 (rows, cols) array (writeable if out), else raise.
    (The name is `what`, or `what[idx]`, formatted only on error: this runs ~300 times a token.)"""
    if not cnp.PyArray_Check(a):
        raise TypeError(f"{_name(what, idx)} must be a numpy array, not {type(a).__name__}")
    cdef cnp.ndarray arr = <cnp.ndarray>a
    if cnp.PyArray_TYPE(arr) != cnp.NPY_FLOAT32 or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
        raise ValueError(f"{_name(what, idx)} must be a C-contiguous float32 array")
    if cnp.PyArray_NDIM(arr) != 2 or cnp.PyArray_DIM(arr, 0) != rows or cnp.PyArray_DIM(arr, 1) != cols:
        raise ValueError(f"{_name(what, idx)} has shape {a.shape}, expected ({rows}, {cols})")
    if out and not cnp.PyArray_ISWRITEABLE(arr):
        raise ValueError(f"{_name(what, idx)} is read-only")
    return <float *>cnp.PyArray_DATA(arr)


cdef str _name(str what, Py_ssize_t idx):
    return what if idx < 0 else f"{what}[{idx}]"


cdef int64_t _batch(object x, str what) except -1:
    if not cnp.PyArray_Check(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != 2:
        raise ValueError(f"{what}: x must be a 2-D float32 array (batch, cols)")
    return cnp.PyArray_DIM(<cnp.ndarray>x, 0)


cdef const lowbit_matrix *matrix_of(object m) except NULL:
    if not isinstance(m, PackedMatrix):
        raise TypeError(f"expected a PackedMatrix, got {type(m).__name__}")
    return (<PackedMatrix>m)._matrix()


def gemm_multi(tuple mats not None, x, tuple outs not None, int threads=0):
    """outs[j][batch, rows_j] = x[batch, cols] . mats[j]^T for PackedMatrix objects sharing x:
    one activation quantization and one thread-pool job for all of them (a decode step's q, k, v).
    mats and outs are tuples; no output may overlap x or another output."""
    cdef Py_ssize_t n = len(mats), j
    if n < 1 or n > LOWBIT_MULTI_MAX or len(outs) != n:
        raise ValueError(f"gemm_multi: 1 to {LOWBIT_MULTI_MAX} matrices with one output each, "
                         f"got {n} and {len(outs)}")
    cdef const lowbit_matrix *ms[8]  # LOWBIT_MULTI_MAX
    cdef float *ys[8]
    cdef PackedMatrix pm
    cdef int64_t batch = _batch(x, "gemm_multi"), cols = 0
    for j in range(n):
        if not isinstance(mats[j], PackedMatrix):
            raise TypeError(f"gemm_multi: matrix {j} is a {type(mats[j]).__name__}, not a PackedMatrix")
        pm = <PackedMatrix>mats[j]
        if j == 0:
            cols = pm.cols
        elif pm.cols != cols:
            raise ValueError(f"gemm_multi: matrix {j} has {pm.cols} columns, matrix 0 has {cols}")
        ms[j] = pm._matrix()
        ys[j] = _f32_matrix(outs[j], batch, pm.rows, True, "outs", j) if batch else NULL
    if batch == 0:
        return
    cdef const float *xp = _f32_matrix(x, batch, cols, False, "x")
    cdef int st
    with nogil:
        st = lowbit_matrix_gemm_multi(ms, <int>n, xp, batch, ys, threads)
    check(st, "gemm_multi")


def gemm_glu(PackedMatrix gate not None, PackedMatrix up not None, int act, x, out, up_out,
             int threads=0):
    """out = act(x . gate^T) * (x . up^T), act an id of pylowbit._ops.ACTIVATIONS; up_out
    (same shape as out, another array) receives x . up^T.  One job of the thread pool."""
    if gate.rows != up.rows or gate.cols != up.cols:
        raise ValueError(f"gemm_glu: gate is ({gate.rows}, {gate.cols}), up is ({up.rows}, {up.cols})")
    cdef int64_t batch = _batch(x, "gemm_glu")
    if out is up_out:
        raise ValueError("gemm_glu: out and up_out must be different arrays")
    if batch == 0:
        return
    cdef const float *xp = _f32_matrix(x, batch, gate.cols, False, "x")
    cdef float *yp = _f32_matrix(out, batch, gate.rows, True, "out")
    cdef float *up_ = _f32_matrix(up_out, batch, gate.rows, True, "up_out")
    cdef const lowbit_matrix *g = gate._matrix()
    cdef const lowbit_matrix *u = up._matrix()
    cdef int st
    with nogil:
        st = lowbit_matrix_gemm_glu(g, u, act, xp, batch, yp, up_, threads)
    check(st, "gemm_glu")


def stream_read(const uint8_t[::1] buf not None, int threads=0):
    """Read every byte of buf (a trailing part of under 64 bytes is skipped) on `threads` pool
    threads; returns the sum of its 64-bit words mod 2^64.  Time it to measure the machine's
    streaming read bandwidth."""
    cdef int64_t n = buf.shape[0] // 64 * 64
    cdef uint64_t r = 0
    if n:
        with nogil:
            r = lowbit_stream_read(&buf[0], n, threads)
    return r


# The run-time choices (ISA variant, kernels, threads), in a file of their own (one module).
include "_lowbit_dispatch.pxi"

# Raw-address twins of the entry points above, for runtimes holding their own tensors.
include "_lowbit_addr.pxi"
