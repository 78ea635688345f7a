# cython: language_level=3, boundscheck=False, wraparound=False
"""Decoder ops over liblowbit (native/src/ops.c, ops_gdn.c): RMSNorm, RoPE, softmax, attention over a
KV cache, gated activations, residual adds and the Gated-DeltaNet ops, each one call with the GIL
released; and the layer loop that strings them together (Decoder, native/src/decoder.c).

Arrays must already be float32 and C-contiguous (the decoder's own buffers are): anything else is
a TypeError / ValueError naming the argument, never a silent copy.  Outputs are new arrays unless
`out` is given (it may be an input: the ops work in place).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint16_t, uintptr_t
from libc.stdlib cimport free, malloc

from pylowbit._lowbit cimport ADDR_BF16, ADDR_F32, bf16_to_f32, check, f32_to_bf16  # defined once, in _lowbit.pyx

cnp.import_array()

cdef extern from "lowbit/ops.h" nogil:
    int lowbit_rms_norm(const float *x, const float *w, int64_t rows, int64_t n, float eps, float *y)
    int lowbit_rope(float *x, int64_t T, int64_t heads, int64_t hd, const float *cos,
                    const float *sin, int64_t half, int neox)
    int lowbit_softmax(float *x, int64_t rows, int64_t n)
    int lowbit_attention(const float *q, const float *k, const float *v, int64_t T, int64_t H,
                         int64_t Hkv, int64_t hd, int64_t vd, float *kc, float *vc, int64_t ctx,
                         int64_t pos, int64_t window, float scale, float *out)
    int lowbit_attention_mt(const float *q, const float *k, const float *v, int64_t T, int64_t H,
                            int64_t Hkv, int64_t hd, int64_t vd, float *kc, float *vc, int64_t ctx,
                            int64_t pos, int64_t window, float scale, float *out, int threads)
    int lowbit_act_mul(int act, const float *gate, const float *up, int64_t n, float *out)
    int lowbit_add(const float *a, const float *b, int64_t n, float *out)
    int LOWBIT_ACT_SILU, LOWBIT_ACT_RELU2, LOWBIT_ACT_GELU_TANH

ACTIVATIONS = {"silu": LOWBIT_ACT_SILU, "relu2": LOWBIT_ACT_RELU2, "gelu": LOWBIT_ACT_GELU_TANH}


cdef cnp.ndarray _f32(object a, str what, int ndim=-1, bint writable=False):
    """a itself if it is a C-contiguous float32 array (of ndim dimensions, if given)."""
    if not cnp.PyArray_Check(a):
        raise TypeError(f"{what} must be a numpy float32 array, got {type(a).__name__}")
    cdef cnp.ndarray arr = <cnp.ndarray>a
    if cnp.PyArray_TYPE(arr) != cnp.NPY_FLOAT32:
        raise TypeError(f"{what} must be float32, got {arr.dtype}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(arr) or not cnp.PyArray_ISALIGNED(arr):
        raise ValueError(f"{what} must be C-contiguous and aligned")
    if ndim >= 0 and cnp.PyArray_NDIM(arr) != ndim:
        raise ValueError(f"{what} must have {ndim} dimensions, got shape {_shape(arr)}")
    if writable and not cnp.PyArray_ISWRITEABLE(arr):
        raise ValueError(f"{what} must be writable")
    return arr


cdef cnp.ndarray _out(object out, object like, str what="out"):
    if out is None:
        return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(<cnp.ndarray>like), cnp.PyArray_DIMS(<cnp.ndarray>like),
                                 cnp.NPY_FLOAT32, 0)  # (np.empty_like: a Python-level dispatcher)
    cdef cnp.ndarray o = _f32(out, what, -1, True)
    if not _same_shape(o, <cnp.ndarray>like):
        raise ValueError(f"{what} must have shape {_shape(like)}, got {_shape(o)}")
    return o


cdef inline tuple _shape(object a):
    return (<object>a).shape


cdef inline bint _same_shape(cnp.ndarray a, cnp.ndarray b) noexcept:
    # (comparing .shape tuples costs a microsecond a call: the decoder makes hundreds a token)
    cdef int i, nd = cnp.PyArray_NDIM(a)
    if nd != cnp.PyArray_NDIM(b):
        return False
    for i in range(nd):
        if cnp.PyArray_DIM(a, i) != cnp.PyArray_DIM(b, i):
            return False
    return True


cdef tuple _elementwise(object a, object b, str na, str nb, object out):
    """(a, b, out) checked for an elementwise op on two float32 arrays of one shape."""
    cdef cnp.ndarray aa = _f32(a, na), ba = _f32(b, nb)
    if not _same_shape(aa, ba):
        raise ValueError(f"{na} and {nb} differ in shape: {_shape(aa)} vs {_shape(ba)}")
    return aa, ba, _out(out, aa)


cdef cnp.ndarray _empty3(int64_t a, int64_t b, int64_t c):
    cdef cnp.npy_intp dims[3]
    dims[0], dims[1], dims[2] = a, b, c
    return cnp.PyArray_EMPTY(3, dims, cnp.NPY_FLOAT32, 0)


cdef inline float *_p(cnp.ndarray a) noexcept:
    return <float *>cnp.PyArray_DATA(a)


cdef int64_t _row_len(cnp.ndarray a, str what) except -1:
    """The length of a's last axis, the rows a row-wise op works on (none: ValueError)."""
    if a.ndim < 1 or a.shape[a.ndim - 1] == 0:
        raise ValueError(f"{what} must have a non-empty last axis, got shape {_shape(a)}")
    return a.shape[a.ndim - 1]


cdef cnp.ndarray _vector(object w, str what, int64_t n):
    """w checked to be a float32 vector of n values."""
    cdef cnp.ndarray wa = _f32(w, what, 1)
    if wa.shape[0] != n:
        raise ValueError(f"{what} must have shape ({n},), got {_shape(wa)}")
    return wa


cdef int _check_eps(float eps) except -1:
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    return 0


ctypedef int (*_binary_op)(const float *a, const float *b, int64_t n, float *out) noexcept nogil


cdef cnp.ndarray _binary(_binary_op op, str what, object a, object b, str na, str nb, object out):
    """op(a, b) -> out for an elementwise op on two float32 arrays of one shape."""
    cdef cnp.ndarray aa, ba, o
    aa, ba, o = _elementwise(a, b, na, nb, out)
    cdef float *ap = _p(aa)
    cdef float *bp = _p(ba)
    cdef float *op_ = _p(o)
    cdef int64_t n = cnp.PyArray_SIZE(aa)
    cdef int st
    with nogil:
        st = op(ap, bp, n, op_)
    check(st, what)
    return o


def rms_norm(x, w, float eps, out=None):
    """x / sqrt(mean(x**2, axis=-1) + eps) * w over the last axis of x; w (n,) or None."""
    cdef cnp.ndarray xa = _f32(x, "x")
    cdef int64_t n = _row_len(xa, "x"), rows = cnp.PyArray_SIZE(xa) // n
    cdef const float *wp = NULL
    if w is not None:
        wp = _p(_vector(w, "w", n))  # (the caller's w keeps the memory alive)
    _check_eps(eps)
    cdef cnp.ndarray o = _out(out, xa)
    cdef float *xp = _p(xa)
    cdef float *op = _p(o)
    cdef int st
    with nogil:
        st = lowbit_rms_norm(xp, wp, rows, n, eps, op)
    check(st, "rms_norm")
    return o



def addr_rms_norm(uintptr_t x, int64_t rows, int64_t n, uintptr_t w, float eps, uintptr_t y,
                  int dtype):
    """rms_norm at addresses (pylowbit.torch): x (rows, n), w (n,), y (rows, n; may be x), all
    float32 (dtype ADDR_F32) or all bfloat16 (ADDR_BF16).  bfloat16 the way transformers' RMSNorm
    computes it: normalized in float32, rounded to bfloat16, times w in float32, rounded again."""
    if dtype != ADDR_F32 and dtype != ADDR_BF16:
        raise ValueError(f"addr_rms_norm: unknown dtype code {dtype}")
    if rows < 0 or n <= 0:
        raise ValueError(f"addr_rms_norm: bad shape ({rows}, {n})")
    _check_eps(eps)
    if x == 0 or w == 0 or y == 0:
        raise ValueError("addr_rms_norm: null address")
    if rows == 0:
        return
    cdef int st
    cdef float *t
    cdef int64_t i, j
    if dtype == ADDR_F32:
        with nogil:
            st = lowbit_rms_norm(<const float *>x, <const float *>w, rows, n, eps, <float *>y)
        check(st, "rms_norm")
        return
    t = <float *>malloc(<size_t>(rows * n + n) * sizeof(float))
    if t == NULL:
        raise MemoryError("addr_rms_norm")
    with nogil:
        bf16_to_f32(<const uint16_t *>x, t, rows * n)
        bf16_to_f32(<const uint16_t *>w, t + rows * n, n)
        st = lowbit_rms_norm(t, NULL, rows, n, eps, t)
        if st == 0:
            f32_to_bf16(t, <uint16_t *>y, rows * n)
            bf16_to_f32(<const uint16_t *>y, t, rows * n)
            for i in range(rows):
                for j in range(n):
                    t[i * n + j] *= t[rows * n + j]
            f32_to_bf16(t, <uint16_t *>y, rows * n)
        free(t)
    check(st, "rms_norm")

def rope(x, cos, sin, bint neox):
    """Rotate x (T, heads, hd) in place by cos, sin (T, half): pairs (i, i + half) if neox, else
    (2i, 2i + 1), over the first 2 * half dims of each head.  Returns x."""
    cdef cnp.ndarray xa = _f32(x, "x", 3, True)
    cdef cnp.ndarray ca = _f32(cos, "cos", 2), sa = _f32(sin, "sin", 2)
    cdef int64_t T = xa.shape[0], heads = xa.shape[1], hd = xa.shape[2], half = ca.shape[1]
    if ca.shape[0] != T or sa.shape[0] != T or sa.shape[1] != half:
        raise ValueError(f"cos and sin must both have shape ({T}, half), got {_shape(ca)} and {_shape(sa)}")
    if 2 * half > hd:
        raise ValueError(f"cos/sin rotate {2 * half} dims, more than the head dim {hd}")
    cdef float *xp = _p(xa)
    cdef float *cp = _p(ca)
    cdef float *sp = _p(sa)
    cdef int st
    with nogil:
        st = lowbit_rope(xp, T, heads, hd, cp, sp, half, neox)
    check(st, "rope")
    return xa


def softmax(x):
    """Softmax over the last axis of x, in place.  Returns x."""
    cdef cnp.ndarray xa = _f32(x, "x", -1, True)
    cdef int64_t n = _row_len(xa, "x"), rows = cnp.PyArray_SIZE(xa) // n
    cdef float *xp = _p(xa)
    cdef int st
    with nogil:
        st = lowbit_softmax(xp, rows, n)
    check(st, "softmax (a row of only -inf?)")
    return xa


def attention(q, k, v, k_cache, v_cache, int64_t pos, int64_t window, float scale, out=None,
              int threads=1):
    """Store k (T, Hkv, hd) and v (T, Hkv, vd) into k_cache (Hkv, ctx, hd) / v_cache (Hkv, ctx, vd)
    at positions pos.., then causal (window > 0: sliding-window) softmax(scale * q.k) v for the
    queries q (T, H, hd) at those positions.  Returns out (T, H, vd).  threads: up to this many
    pool threads when the problem is large (0: the library default); the same bits for any count."""
    cdef cnp.ndarray qa = _f32(q, "q", 3), ka = _f32(k, "k", 3), va = _f32(v, "v", 3)
    cdef cnp.ndarray kc = _f32(k_cache, "k_cache", 3, True), vc = _f32(v_cache, "v_cache", 3, True)
    cdef int64_t T = qa.shape[0], H = qa.shape[1], hd = qa.shape[2]
    cdef int64_t Hkv = ka.shape[1], vd = va.shape[2], ctx = kc.shape[1]
    if T == 0:
        raise ValueError("attention needs at least one query")
    if ka.shape[0] != T or ka.shape[2] != hd:
        raise ValueError(f"k must have shape ({T}, Hkv, {hd}), got {_shape(ka)}")
    if va.shape[0] != T or va.shape[1] != Hkv:
        raise ValueError(f"v must have shape ({T}, {Hkv}, vd), got {_shape(va)}")
    if Hkv == 0 or H % Hkv:
        raise ValueError(f"{H} query heads are not a multiple of {Hkv} KV heads")
    if kc.shape[0] != Hkv or kc.shape[2] != hd:
        raise ValueError(f"k_cache must have shape ({Hkv}, ctx, {hd}), got {_shape(kc)}")
    if vc.shape[0] != Hkv or vc.shape[1] != ctx or vc.shape[2] != vd:
        raise ValueError(f"v_cache must have shape ({Hkv}, {ctx}, {vd}), got {_shape(vc)}")
    if pos < 0 or pos > ctx - T:
        raise ValueError(f"positions {pos}..{pos + T - 1} do not fit the cache of {ctx}")
    if window < 0:
        raise ValueError(f"window must be >= 0 (0: none), got {window}")
    cdef cnp.ndarray o
    if out is None:
        o = _empty3(T, H, vd)
    else:
        o = _f32(out, "out", 3, True)
        if _shape(o) != (T, H, vd):
            raise ValueError(f"out must have shape {(T, H, vd)}, got {_shape(o)}")
    cdef float *qp = _p(qa)
    cdef float *kp = _p(ka)
    cdef float *vp = _p(va)
    cdef float *kcp = _p(kc)
    cdef float *vcp = _p(vc)
    cdef float *op = _p(o)
    cdef int st
    with nogil:
        st = lowbit_attention_mt(qp, kp, vp, T, H, Hkv, hd, vd, kcp, vcp, ctx, pos, window, scale, op,
                                 threads)
    check(st, "attention")
    return o


def act_mul(str act, gate, up, out=None):
    """act(gate) * up elementwise, act one of 'silu', 'relu2', 'gelu' (tanh approximation)."""
    cdef int kind
    try:
        kind = ACTIVATIONS[act]
    except KeyError:
        raise ValueError(f"unknown activation {act!r} (known: {', '.join(ACTIVATIONS)})") from None
    cdef cnp.ndarray ga, ua, o
    ga, ua, o = _elementwise(gate, up, "gate", "up", out)
    cdef float *gp = _p(ga)
    cdef float *up_ = _p(ua)
    cdef float *op = _p(o)
    cdef int64_t n = cnp.PyArray_SIZE(ga)
    cdef int st
    with nogil:
        st = lowbit_act_mul(kind, gp, up_, n, op)
    check(st, "act_mul")
    return o


def add(a, b, out=None):
    """a + b elementwise (same shapes)."""
    return _binary(lowbit_add, "add", a, b, "a", "b", out)


# The Gated-DeltaNet ops and the decoder's layer loop, in files of their own (one module).
include "_ops_gdn.pxi"
include "_ops_decoder.pxi"
