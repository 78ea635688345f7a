# cython: language_level=3, boundscheck=False, wraparound=False
"""Walsh-Hadamard transform over liblowbit (native/src/ref/fwht.c and the SIMD variants).

Sizes: any power of two n >= 2, and m * 2^k for m in {12, 20, 28} (H_m (x) H_{2^k}, with the order-12,
20 and 28 matrices of Sloane's library -- the same matrices and Kronecker order as MLX's
``mx.hadamard_transform``).  Sylvester (natural) order: H[r][c] = (-1)^popcount(r & c).
Normalized (1/sqrt(n)) the transform is orthogonal; it is its own inverse for powers of two and for
m = 12, but H_20 and H_28 are not symmetric: there the inverse is the transpose (not offered here).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t
from libc.string cimport memmove

from pylowbit.lowbit cimport *
from pylowbit._lowbit cimport check

cnp.import_array()


cpdef bint is_supported_size(int64_t n):
    """True if n is a transform size: a power of two >= 2, or m * 2^k with m in {12, 20, 28}."""
    cdef int64_t p
    cdef int m
    if n >= 2 and (n & (n - 1)) == 0:
        return True
    for m in (12, 20, 28):
        if n % m == 0:
            p = n // m
            if p >= 1 and (p & (p - 1)) == 0:
                return True
    return False


cdef str _size_msg(int64_t n, str what):
    return (f"{what}={n} is not a supported Hadamard size (a power of two >= 2, or m * 2^k "
            f"with m in {{12, 20, 28}})")


cdef inline int _check_float_array(object a, str what) except -1:
    if not cnp.PyArray_Check(a):
        raise TypeError(f"{what} must be a numpy array of float32 or float64, got {type(a).__name__}")
    t = cnp.PyArray_TYPE(<cnp.ndarray>a)
    if t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64:
        raise TypeError(f"{what} must be float32 or float64, got {(<cnp.ndarray>a).dtype}")
    return 0


cdef cnp.ndarray _signs_array(object signs, int64_t n, int typenum):
    cdef cnp.ndarray s
    if (cnp.PyArray_Check(signs) and cnp.PyArray_TYPE(<cnp.ndarray>signs) == typenum
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>signs)):
        s = <cnp.ndarray>signs  # the usual case (a vector kept from the model file): no copy
    else:
        s = np.ascontiguousarray(signs, dtype=np.float32 if typenum == cnp.NPY_FLOAT32 else np.float64)
    if cnp.PyArray_NDIM(s) != 1 or cnp.PyArray_DIM(s, 0) != n:
        raise ValueError(f"signs must be a 1-D vector of length {n} (the last dimension), "
                         f"got shape {np.shape(signs)}")
    return s


cdef int64_t _NOGIL_MIN = 4096


cdef inline int _run(void *p, bint f32, int64_t rows, int64_t n, int64_t blk, int norm,
                     const void *sp, int ordv, int nthreads) noexcept nogil:
    if f32:
        return lowbit_fwht_f32(<float *>p, rows, n, blk, norm, <const float *>sp, ordv, nthreads)
    return lowbit_fwht_f64(<double *>p, rows, n, blk, norm, <const double *>sp, ordv, nthreads)


def fwht(x, *, block=None, bint normalize=True, signs=None, order="signs-then-rotate", out=None,
         threads=None):
    """Walsh-Hadamard transform along the last axis of a float32/float64 array.

    x       array (..., n).  Not modified unless ``out is x`` (in place).
    block   transform each block-wide slice of the last axis (n must be a multiple); default n.
            A power of two >= 2 or m * 2^k with m in {12, 20, 28}.
    normalize  scale by 1/sqrt(block), which makes the transform orthogonal (its own inverse for
            powers of two and m = 12).
    signs   optional +-1 vector of length n, fused with the transform.
    order   "signs-then-rotate": y = H(s * x) (before a Hadamard-folded matmul);
            "rotate-then-signs": y = s * H(x) (its inverse for symmetric H, after an embedding
            lookup).
    out     output array (same shape and dtype, C-contiguous); may be x itself.
    threads worker threads for batches (default: pylowbit.get_threads()).
    """
    cdef cnp.ndarray xa, oa, sa
    cdef int64_t n, rows, blk
    cdef int st, ordv, nthreads = 0, norm = normalize
    cdef const void *sp = NULL
    _check_float_array(x, "x")
    xa = <cnp.ndarray>x
    if cnp.PyArray_NDIM(xa) == 0:
        raise ValueError("x must have at least one dimension")
    n = cnp.PyArray_DIM(xa, cnp.PyArray_NDIM(xa) - 1)
    rows = cnp.PyArray_SIZE(xa) // n if n else 0
    if block is None:
        blk = n
        if not is_supported_size(n):
            raise ValueError(_size_msg(n, "last dimension"))
    else:
        blk = block
        if not is_supported_size(blk):
            raise ValueError(_size_msg(blk, "block"))
        if n % blk:
            raise ValueError(f"last dimension {n} is not a multiple of block={blk}")
    if order == "signs-then-rotate":
        ordv = 0
    elif order == "rotate-then-signs":
        ordv = 1
    else:
        raise ValueError(f"order must be 'signs-then-rotate' or 'rotate-then-signs', got {order!r}")
    if threads is not None:
        nthreads = threads
        if nthreads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
    if out is None:
        oa = cnp.PyArray_NewCopy(xa, cnp.NPY_CORDER)
    elif out is x:  # in place: the hot path of the decoder, no copy and no dtype/shape checks
        oa = xa
        if not cnp.PyArray_IS_C_CONTIGUOUS(oa) or not cnp.PyArray_ISWRITEABLE(oa):
            raise ValueError("out must be a writeable C-contiguous array")
    else:
        if not cnp.PyArray_Check(out):
            raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
        oa = <cnp.ndarray>out
        if cnp.PyArray_TYPE(oa) != cnp.PyArray_TYPE(xa):
            raise TypeError(f"out has dtype {oa.dtype}, expected {xa.dtype}")
        if (<object>oa).shape != (<object>xa).shape:
            raise ValueError(f"out has shape {(<object>oa).shape}, expected {(<object>xa).shape}")
        if not cnp.PyArray_IS_C_CONTIGUOUS(oa) or not cnp.PyArray_ISWRITEABLE(oa):
            raise ValueError("out must be a writeable C-contiguous array")
        if cnp.PyArray_IS_C_CONTIGUOUS(xa):  # np.copyto costs microseconds of casting checks
            memmove(cnp.PyArray_DATA(oa), cnp.PyArray_DATA(xa), cnp.PyArray_NBYTES(xa))
        elif cnp.PyArray_CopyInto(oa, xa) < 0:
            raise ValueError("could not copy x into out")
    if signs is not None:
        sa = _signs_array(signs, n, cnp.PyArray_TYPE(xa))
        sp = cnp.PyArray_DATA(sa)
    cdef void *op = cnp.PyArray_DATA(oa)
    cdef bint f32 = cnp.PyArray_TYPE(oa) == cnp.NPY_FLOAT32
    if rows * n < _NOGIL_MIN:  # about a microsecond of work: the GIL is kept (releasing and retaking it costs a sizeable share)
        st = _run(op, f32, rows, n, blk, norm, sp, ordv, nthreads)
    else:
        with nogil:
            st = _run(op, f32, rows, n, blk, norm, sp, ordv, nthreads)
    if st == LOWBIT_EINVAL and signs is not None:
        raise ValueError("signs must contain only +1 and -1")
    check(st, "fwht")
    return oa


cdef cnp.ndarray _out_part(object a, int typenum, str dtname, cnp.npy_intp *dims, int nd,
                          str what):
    """One of fwht_quantize_act's preallocated outputs, checked: dtype, shape, C-contiguous."""
    cdef int i
    if not cnp.PyArray_Check(a):
        raise TypeError(f"out {what} must be a numpy array, got {type(a).__name__}")
    cdef cnp.ndarray o = <cnp.ndarray>a
    if cnp.PyArray_TYPE(o) != typenum:
        raise TypeError(f"out {what} has dtype {o.dtype}, expected {dtname}")
    ok = cnp.PyArray_NDIM(o) == nd
    for i in range(nd):
        ok = ok and cnp.PyArray_DIM(o, i) == dims[i]
    if not ok:
        raise ValueError(f"out {what} has shape {(<object>o).shape}, expected "
                         f"{tuple(dims[i] for i in range(nd))}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(o) or not cnp.PyArray_ISWRITEABLE(o):
        raise ValueError(f"out {what} must be a writeable C-contiguous array")
    return o


def fwht_quantize_act(x, block, signs, int64_t group, *, out=None):
    """Decoder hot path in one pass: y = H(signs * x) blockwise (normalized), then A8-quantize y.

    x is float32 (..., n); returns q int8 (..., n), d float32 (..., n/group) and s int32
    (..., n/group), exactly pylowbit.quantize_act(fwht(x, block=block, signs=signs), group): the
    quantizer is the dot kernels' own (quantize_act), applied to each block while it is in cache.
    signs may be None (no flip).  out: optional (q, d, s) arrays of those shapes and dtypes to
    fill instead of allocating (the decoder reuses them token after token); returned as given.
    """
    cdef cnp.ndarray xa, sa, q, d, s
    cdef int64_t n, rows, blk, r, ng
    cdef int st = 0
    cdef const float *sp = NULL
    cdef const float *xp
    cdef int8_t *qp
    cdef float *dp
    cdef int32_t *spp
    cdef cnp.npy_intp dims[64]  # NPY_MAXDIMS in numpy 2
    cdef int nd, i
    if not cnp.PyArray_Check(x):
        raise TypeError(f"x must be a numpy float32 array, got {type(x).__name__}")
    if cnp.PyArray_TYPE(<cnp.ndarray>x) != cnp.NPY_FLOAT32:
        raise TypeError(f"x must be float32, got {(<cnp.ndarray>x).dtype}")
    xa = <cnp.ndarray>x
    if not cnp.PyArray_IS_C_CONTIGUOUS(xa):
        xa = np.ascontiguousarray(xa)
    nd = cnp.PyArray_NDIM(xa)
    if nd == 0:
        raise ValueError("x must have at least one dimension")
    n = cnp.PyArray_DIM(xa, nd - 1)
    rows = cnp.PyArray_SIZE(xa) // n if n else 0
    blk = n if block is None else block
    if not is_supported_size(blk):
        raise ValueError(_size_msg(blk, "block"))
    if n % blk:
        raise ValueError(f"last dimension {n} is not a multiple of block={blk}")
    if group <= 0 or n % group:
        raise ValueError(f"last dimension {n} is not a multiple of group={group}")
    if signs is not None:
        sa = _signs_array(signs, n, cnp.NPY_FLOAT32)
        sp = <const float *>cnp.PyArray_DATA(sa)
    ng = n // group
    for i in range(nd):
        dims[i] = cnp.PyArray_DIM(xa, i)
    if out is None:
        q = cnp.PyArray_EMPTY(nd, dims, cnp.NPY_INT8, 0)
        dims[nd - 1] = ng
        d = cnp.PyArray_EMPTY(nd, dims, cnp.NPY_FLOAT32, 0)
        s = cnp.PyArray_EMPTY(nd, dims, cnp.NPY_INT32, 0)
    else:
        if not isinstance(out, tuple) or len(<tuple>out) != 3:
            raise TypeError("out must be a tuple (q, d, s)")
        q = _out_part((<tuple>out)[0], cnp.NPY_INT8, "int8", dims, nd, "q")
        dims[nd - 1] = ng
        d = _out_part((<tuple>out)[1], cnp.NPY_FLOAT32, "float32", dims, nd, "d")
        s = _out_part((<tuple>out)[2], cnp.NPY_INT32, "int32", dims, nd, "s")
    xp = <const float *>cnp.PyArray_DATA(xa)
    qp = <int8_t *>cnp.PyArray_DATA(q)
    dp = <float *>cnp.PyArray_DATA(d)
    spp = <int32_t *>cnp.PyArray_DATA(s)
    if rows * n < _NOGIL_MIN:
        for r in range(rows):
            st = lowbit_fwht_quantize_act(xp + r * n, n, blk, sp, group, qp + r * n, dp + r * ng,
                                          spp + r * ng)
            if st != LOWBIT_OK:
                break
    else:
        with nogil:
            for r in range(rows):
                st = lowbit_fwht_quantize_act(xp + r * n, n, blk, sp, group, qp + r * n,
                                              dp + r * ng, spp + r * ng)
                if st != LOWBIT_OK:
                    break
    if st == LOWBIT_EINVAL and signs is not None:
        raise ValueError("signs must contain only +1 and -1")
    check(st, "fwht_quantize_act")
    if out is not None:
        return out
    return q, d, s
