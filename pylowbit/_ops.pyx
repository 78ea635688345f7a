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
from libc.stdint cimport int64_t

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memset

from pylowbit._lowbit cimport check, matrix_of  # defined once, in _lowbit.pyx
from pylowbit.lowbit cimport LOWBIT_EINVAL, lowbit_matrix

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


def rms_norm(x, w, float eps, out=None):
    """x / sqrt(mean(x**2, axis=-1) + eps) * w over the last axis of x; w (n,) or None."""
    cdef cnp.ndarray xa = _f32(x, "x")
    if xa.ndim < 1 or xa.shape[xa.ndim - 1] == 0:
        raise ValueError(f"x must have a non-empty last axis, got shape {_shape(xa)}")
    cdef int64_t n = xa.shape[xa.ndim - 1], rows = cnp.PyArray_SIZE(xa) // n
    cdef const float *wp = NULL
    cdef cnp.ndarray wa
    if w is not None:
        wa = _f32(w, "w", 1)
        if wa.shape[0] != n:
            raise ValueError(f"w must have shape ({n},), got {_shape(wa)}")
        wp = _p(wa)
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    cdef cnp.ndarray o = _out(out, xa)
    cdef float *xp = _p(xa)
    cdef float *op = _p(o)
    cdef int st
    with nogil:
        st = lowbit_rms_norm(xp, wp, rows, n, eps, op)
    check(st, "rms_norm")
    return o


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
    if xa.ndim < 1 or xa.shape[xa.ndim - 1] == 0:
        raise ValueError(f"x must have a non-empty last axis, got shape {_shape(xa)}")
    cdef int64_t n = xa.shape[xa.ndim - 1], rows = cnp.PyArray_SIZE(xa) // n
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
    cdef cnp.ndarray aa, ba, o
    aa, ba, o = _elementwise(a, b, "a", "b", out)
    cdef float *ap = _p(aa)
    cdef float *bp = _p(ba)
    cdef float *op = _p(o)
    cdef int64_t n = cnp.PyArray_SIZE(aa)
    cdef int st
    with nogil:
        st = lowbit_add(ap, bp, n, op)
    check(st, "add")
    return o


# ---- Gated DeltaNet (qwen35) ------------------------------------------------------------------

cdef extern from "lowbit/ops.h" nogil:
    int lowbit_ssm_conv(const float *x, const float *w, float *state, int64_t T, int64_t C,
                        int64_t K, float *out)
    int lowbit_l2_norm(const float *x, int64_t rows, int64_t n, float eps, float *y)
    int lowbit_gdn_gates(const float *b, const float *a, const float *ssm_a, const float *dt_bias,
                         int64_t T, int64_t Hv, float *beta, float *g)
    int lowbit_gated_delta_rule(const float *q, const float *k, const float *v, const float *g,
                                const float *beta, float *state, int64_t T, int64_t Hk, int64_t Hv,
                                int64_t d, float *out, int threads, int chunked)
    int lowbit_gated_rms_norm_silu(const float *o, const float *w, const float *z, int64_t rows,
                                   int64_t n, float eps, float *out)
    int lowbit_sigmoid_mul(const float *x, const float *gate, int64_t n, float *out)


cdef bint _overlap(cnp.ndarray a, cnp.ndarray b) noexcept:
    """Whether the memory of a and b (both C-contiguous) overlaps."""
    cdef char *pa = <char *>cnp.PyArray_DATA(a)
    cdef char *pb = <char *>cnp.PyArray_DATA(b)
    return pa < pb + cnp.PyArray_NBYTES(b) and pb < pa + cnp.PyArray_NBYTES(a)


cdef _no_overlap(cnp.ndarray out, str what, tuple others, tuple names):
    cdef int i
    for i in range(len(others)):
        if _overlap(out, others[i]):
            raise ValueError(f"{what} must not share memory with {names[i]}")


cdef cnp.ndarray _out_shape(object out, tuple shape, str what):
    """out checked to be a writable float32 C-contiguous array of `shape`, or a new one."""
    if out is None:
        return np.empty(shape, dtype=np.float32)
    cdef cnp.ndarray o = _f32(out, what, len(shape), True)
    if _shape(o) != shape:
        raise ValueError(f"{what} must have shape {shape}, got {_shape(o)}")
    return o


def ssm_conv(x, w, state, out=None):
    """Causal depthwise conv + SiLU of x (T, C) with taps w (C, K) (tap K-1 multiplies the current
    input), continuing from state (C, K-1) (the previous K-1 inputs per channel, oldest first;
    zeros for a new sequence), which is updated in place to the last K-1 inputs.  Returns out
    (T, C): out[t, c] = silu(sum_i w[c, i] * window_c[t + i]), window_c = state[c] then x[:, c]."""
    cdef cnp.ndarray xa = _f32(x, "x", 2), wa = _f32(w, "w", 2), sa = _f32(state, "state", 2, True)
    cdef int64_t T = xa.shape[0], C = xa.shape[1], K = wa.shape[1]
    if wa.shape[0] != C or K < 1:
        raise ValueError(f"w must have shape ({C}, K >= 1), got {_shape(wa)}")
    if sa.shape[0] != C or sa.shape[1] != K - 1:
        raise ValueError(f"state must have shape ({C}, {K - 1}), got {_shape(sa)}")
    if K > 1 and _overlap(sa, xa) or K > 1 and _overlap(sa, wa):
        raise ValueError("state must not share memory with x or w")
    cdef cnp.ndarray o = _out_shape(out, (T, C), "out")
    _no_overlap(o, "out", (xa, wa, sa), ("x", "w", "state"))
    cdef float *xp = _p(xa)
    cdef float *wp = _p(wa)
    cdef float *sp = _p(sa)
    cdef float *op = _p(o)
    cdef int st
    with nogil:
        st = lowbit_ssm_conv(xp, wp, sp, T, C, K, op)
    check(st, "ssm_conv")
    return o


def l2_norm(x, float eps, out=None):
    """x / sqrt(sum(x**2, axis=-1) + eps) over the last axis of x (any number of dimensions, e.g.
    (T, heads, d): each d-row)."""
    cdef cnp.ndarray xa = _f32(x, "x")
    if xa.ndim < 1 or xa.shape[xa.ndim - 1] == 0:
        raise ValueError(f"x must have a non-empty last axis, got shape {_shape(xa)}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    cdef int64_t n = xa.shape[xa.ndim - 1], rows = cnp.PyArray_SIZE(xa) // n
    cdef cnp.ndarray o = _out(out, xa)
    cdef float *xp = _p(xa)
    cdef float *op = _p(o)
    cdef int st
    with nogil:
        st = lowbit_l2_norm(xp, rows, n, eps, op)
    check(st, "l2_norm")
    return o


def gdn_gates(b, a, ssm_a, dt_bias, beta_out=None, g_out=None):
    """The Gated-DeltaNet gates of b, a (T, Hv): beta = sigmoid(b) and the log-decay
    g = ssm_a[h] * softplus(a + dt_bias[h]) (softplus(x) = log1p(exp(x)), x itself above 20).
    ssm_a, dt_bias: (Hv,).  Returns (beta, g), each (T, Hv)."""
    cdef cnp.ndarray ba = _f32(b, "b", 2), aa = _f32(a, "a", 2)
    cdef cnp.ndarray sa = _f32(ssm_a, "ssm_a", 1), da = _f32(dt_bias, "dt_bias", 1)
    cdef int64_t T = ba.shape[0], Hv = ba.shape[1]
    if not _same_shape(aa, ba):
        raise ValueError(f"a must have the shape of b {_shape(ba)}, got {_shape(aa)}")
    if sa.shape[0] != Hv:
        raise ValueError(f"ssm_a must have shape ({Hv},), got {_shape(sa)}")
    if da.shape[0] != Hv:
        raise ValueError(f"dt_bias must have shape ({Hv},), got {_shape(da)}")
    cdef cnp.ndarray bo = _out(beta_out, ba, "beta_out"), go = _out(g_out, ba, "g_out")
    if _overlap(bo, go):
        raise ValueError("beta_out and g_out must not share memory")
    _no_overlap(bo, "beta_out", (aa, sa, da), ("a", "ssm_a", "dt_bias"))
    _no_overlap(go, "g_out", (ba, sa, da), ("b", "ssm_a", "dt_bias"))
    cdef float *bp = _p(ba)
    cdef float *ap = _p(aa)
    cdef float *sp = _p(sa)
    cdef float *dp = _p(da)
    cdef float *bop = _p(bo)
    cdef float *gop = _p(go)
    cdef int st
    with nogil:
        st = lowbit_gdn_gates(bp, ap, sp, dp, T, Hv, bop, gop)
    check(st, "gdn_gates")
    return bo, go


def gated_delta_rule(q, k, v, g, beta, state, out=None, int threads=0, chunked=None):
    """The gated delta rule over T tokens.  q, k (T, Hk, d) (L2-normed), v (T, Hv, d), g (T, Hv)
    log-decays, beta (T, Hv); state (Hv, d, d), state[h, j, i] = S_h[i][j], updated in place.  V
    head h uses K head h % Hk.  Per token and head: S <- exp(g) S; e = S^T k; S += k (beta (v - e))^T;
    o = S^T q / sqrt(d).  Returns out (T, Hv, d).  threads: pool threads (0: the default), the same
    bits for any count.  chunked: True / False force the chunked (WY, 64-token blocks) or the
    token-by-token form (equal within float rounding); None chooses."""
    cdef cnp.ndarray qa = _f32(q, "q", 3), ka = _f32(k, "k", 3), va = _f32(v, "v", 3)
    cdef cnp.ndarray ga = _f32(g, "g", 2), bea = _f32(beta, "beta", 2)
    cdef cnp.ndarray sa = _f32(state, "state", 3, True)
    cdef int64_t T = va.shape[0], Hv = va.shape[1], d = va.shape[2], Hk = qa.shape[1]
    if d == 0 or Hv == 0:
        raise ValueError(f"v must have non-empty heads, got shape {_shape(va)}")
    if qa.shape[0] != T or qa.shape[2] != d or Hk == 0:
        raise ValueError(f"q must have shape ({T}, Hk, {d}), got {_shape(qa)}")
    if _shape(ka) != _shape(qa):
        raise ValueError(f"k must have the shape of q {_shape(qa)}, got {_shape(ka)}")
    if Hv % Hk:
        raise ValueError(f"{Hv} V heads are not a multiple of {Hk} K heads")
    if _shape(ga) != (T, Hv):
        raise ValueError(f"g must have shape {(T, Hv)}, got {_shape(ga)}")
    if _shape(bea) != (T, Hv):
        raise ValueError(f"beta must have shape {(T, Hv)}, got {_shape(bea)}")
    if _shape(sa) != (Hv, d, d):
        raise ValueError(f"state must have shape {(Hv, d, d)}, got {_shape(sa)}")
    cdef int mode
    if chunked is None:
        mode = -1
    elif chunked is True or chunked is False:
        mode = 1 if chunked else 0
    else:
        raise TypeError(f"chunked must be None, True or False, got {chunked!r}")
    _no_overlap(sa, "state", (qa, ka, va, ga, bea), ("q", "k", "v", "g", "beta"))
    cdef cnp.ndarray o = _out_shape(out, (T, Hv, d), "out")
    _no_overlap(o, "out", (qa, ka, va, ga, bea, sa), ("q", "k", "v", "g", "beta", "state"))
    cdef float *qp = _p(qa)
    cdef float *kp = _p(ka)
    cdef float *vp = _p(va)
    cdef float *gp = _p(ga)
    cdef float *bp = _p(bea)
    cdef float *sp = _p(sa)
    cdef float *op = _p(o)
    cdef int st
    with nogil:
        st = lowbit_gated_delta_rule(qp, kp, vp, gp, bp, sp, T, Hk, Hv, d, op, threads, mode)
    check(st, "gated_delta_rule")
    return o


def gated_rms_norm_silu(o, w, z, float eps, out=None):
    """RMSNorm of each last-axis row of o (d values, e.g. o (T, Hv, d)) times w (d,), times silu(z)
    (z the shape of o): the bits of rms_norm(o, w, eps) followed by act_mul('silu', z, normed)."""
    cdef cnp.ndarray oa, za, res
    oa, za, res = _elementwise(o, z, "o", "z", out)
    if oa.ndim < 1 or oa.shape[oa.ndim - 1] == 0:
        raise ValueError(f"o must have a non-empty last axis, got shape {_shape(oa)}")
    cdef int64_t n = oa.shape[oa.ndim - 1], rows = cnp.PyArray_SIZE(oa) // n
    cdef cnp.ndarray wa = _f32(w, "w", 1)
    if wa.shape[0] != n:
        raise ValueError(f"w must have shape ({n},), got {_shape(wa)}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    cdef float *op_ = _p(oa)
    cdef float *wp = _p(wa)
    cdef float *zp = _p(za)
    cdef float *rp = _p(res)
    cdef int st
    with nogil:
        st = lowbit_gated_rms_norm_silu(op_, wp, zp, rows, n, eps, rp)
    check(st, "gated_rms_norm_silu")
    return res


def sigmoid_mul(x, gate, out=None):
    """x * sigmoid(gate) elementwise (same shapes; the sigmoid of act_mul's silu)."""
    cdef cnp.ndarray xa, ga, o
    xa, ga, o = _elementwise(x, gate, "x", "gate", out)
    cdef float *xp = _p(xa)
    cdef float *gp = _p(ga)
    cdef float *op = _p(o)
    cdef int64_t n = cnp.PyArray_SIZE(xa)
    cdef int st
    with nogil:
        st = lowbit_sigmoid_mul(xp, gp, n, op)
    check(st, "sigmoid_mul")
    return o


# ---- the decoder's layer loop (native/src/decoder.c) ------------------------------------------

cdef extern from "lowbit/decoder.h" nogil:
    int LOWBIT_GROUP_MAX
    int LOWBIT_BLOCK_ATTENTION, LOWBIT_BLOCK_GATED_ATTENTION, LOWBIT_BLOCK_GDN
    int LOWBIT_PREP_NONE, LOWBIT_PREP_ROUND_BF16, LOWBIT_PREP_GROUPED_HEADS

    ctypedef struct lowbit_decoder_group:
        int n
        const lowbit_matrix *m[4]
        int64_t rows[4]
        int64_t cols
        int glu
        int prep
        int64_t rot_block
        const float *rot_signs
        int host_id

    ctypedef struct lowbit_decoder_config:
        int64_t n_layer, d_model, n_ff, n_head, n_head_kv, head_dim, v_head_dim, ctx, rope_half
        int rope_neox
        float eps, attn_scale
        int ffn_act
        int64_t ssm_k_heads, ssm_v_heads, ssm_state, ssm_conv

    ctypedef struct lowbit_decoder_layer:
        int kind
        const float *attn_norm
        lowbit_decoder_group qkv
        const float *q_norm
        const float *k_norm
        int rope
        int64_t window
        float *k_cache
        float *v_cache
        const float *attn_sub_norm
        lowbit_decoder_group gdn_in[2]
        const float *conv_w
        float *conv_state
        const float *ssm_a
        const float *ssm_dt
        float *ssm_state
        const float *ssm_norm
        lowbit_decoder_group out
        const float *post_attn_norm
        const float *ffn_norm
        lowbit_decoder_group ffn_glu
        const float *ffn_sub_norm
        lowbit_decoder_group ffn_down
        const float *post_ffw_norm

    ctypedef int (*lowbit_decoder_host_fn)(void *ctx, int host_id, const float *x, int64_t T,
                                           float *const *ys)
    int lowbit_decoder_check(const lowbit_decoder_config *cfg, const lowbit_decoder_layer *layers,
                             char *why, size_t why_len)
    int64_t lowbit_decoder_scratch_floats(const lowbit_decoder_config *cfg, int64_t T)
    int lowbit_decoder_run(const lowbit_decoder_config *cfg, const lowbit_decoder_layer *layers,
                           float *x, int64_t T, int64_t pos, const float *const *rope_cos,
                           const float *const *rope_sin, float *scratch, lowbit_decoder_host_fn host,
                           void *host_ctx, int threads)
    void lowbit_decoder_timing(int enable, double *recurrent_us, double *total_us)

BLOCK_KINDS = {"attention": LOWBIT_BLOCK_ATTENTION, "gated_attention": LOWBIT_BLOCK_GATED_ATTENTION,
               "gdn": LOWBIT_BLOCK_GDN}
INPUT_PREPS = {None: LOWBIT_PREP_NONE, "round_bf16": LOWBIT_PREP_ROUND_BF16,
               "grouped_heads": LOWBIT_PREP_GROUPED_HEADS}
CONFIG_FIELDS = ("d_model", "n_ff", "n_head", "n_head_kv", "head_dim", "v_head_dim", "ctx",
                 "rope_half", "rope_neox", "eps", "attn_scale", "ffn_act", "ssm_k_heads", "ssm_v_heads",
                 "ssm_state", "ssm_conv")


cdef cnp.ndarray _view(float *p, int64_t rows, int64_t cols):
    """A (rows, cols) float32 array over memory the caller keeps alive."""
    cdef cnp.npy_intp dims[2]
    dims[0], dims[1] = rows, cols
    return cnp.PyArray_SimpleNewFromData(2, dims, cnp.NPY_FLOAT32, p)


cdef int _host_call(void *ctx, int host_id, const float *x, int64_t T, float *const *ys) noexcept with gil:
    """Runs a host group (Python's Linear / LinearGroup / GatedFFN) for the C loop; an exception
    is kept on the Decoder and re-raised when the run returns."""
    cdef Decoder dec = <Decoder>ctx
    cdef int j
    try:
        fn, rows, cols = dec._host[host_id]
        outs = tuple(_view(ys[j], T, rows[j]) for j in range(len(rows)))
        res = fn(_view(<float *>x, T, cols), dec._threads, outs if len(outs) > 1 else outs[0])
        res = res if isinstance(res, tuple) else (res,)
        for j in range(len(res)):  # (a GatedFFN returns its gate output only)
            if res[j] is not outs[j]:
                np.copyto(outs[j], res[j])
    except BaseException as e:
        dec._error = e
        return LOWBIT_EINVAL
    return 0


cdef class Decoder:
    """A model's layers as one lowbit_decoder_run call with the GIL released (native/src/decoder.c,
    whose header documents every field).  config: a dict of CONFIG_FIELDS (n_layer is len(layers));
    layers: one dict per layer of the lowbit_decoder_layer fields (kind a BLOCK_KINDS name, norm
    vectors and states as float32 arrays or None, groups as group specs).  A group spec is (host, mats, rows, cols, glu,
    prep, rot_block, signs): mats the PackedMatrix of each row block, or None to have the C loop
    call host(x, threads, out) (a matrix that is not a liblowbit one)."""
    cdef lowbit_decoder_config cfg
    cdef lowbit_decoder_layer *layers
    cdef list _keep   # every array and matrix the layers point into
    cdef list _host   # host_id -> (callable, rows, cols)
    cdef object _error, _threads
    cdef cnp.ndarray _scratch1  # a one-token run's scratch, reused

    def __cinit__(self, dict config not None, list layers not None):
        for k in CONFIG_FIELDS:
            if k not in config:
                raise ValueError(f"decoder config lacks {k!r}")
        c = config
        self.cfg.n_layer, self.cfg.d_model, self.cfg.n_ff = len(layers), c["d_model"], c["n_ff"]
        self.cfg.n_head, self.cfg.n_head_kv = c["n_head"], c["n_head_kv"]
        self.cfg.head_dim, self.cfg.v_head_dim, self.cfg.ctx = c["head_dim"], c["v_head_dim"], c["ctx"]
        self.cfg.rope_half, self.cfg.rope_neox = c["rope_half"], c["rope_neox"]
        self.cfg.eps, self.cfg.attn_scale, self.cfg.ffn_act = c["eps"], c["attn_scale"], c["ffn_act"]
        self.cfg.ssm_k_heads, self.cfg.ssm_v_heads = c["ssm_k_heads"], c["ssm_v_heads"]
        self.cfg.ssm_state, self.cfg.ssm_conv = c["ssm_state"], c["ssm_conv"]
        if not layers:
            raise ValueError("the decoder needs at least one layer")
        self.layers = <lowbit_decoder_layer *>PyMem_Malloc(len(layers) * sizeof(lowbit_decoder_layer))
        if not self.layers:
            raise MemoryError()
        memset(self.layers, 0, len(layers) * sizeof(lowbit_decoder_layer))
        self._keep, self._host = [], []
        cdef int il
        cdef lowbit_decoder_layer *L
        for il in range(len(layers)):
            spec, L = layers[il], &self.layers[il]
            L.kind = BLOCK_KINDS[spec["kind"]]
            L.attn_norm, L.ffn_norm = self._vec(spec, "attn_norm"), self._vec(spec, "ffn_norm")
            L.post_attn_norm, L.ffn_sub_norm = self._vec(spec, "post_attn_norm"), self._vec(spec, "ffn_sub_norm")
            L.post_ffw_norm = self._vec(spec, "post_ffw_norm")
            self._group(&L.out, spec["out"])
            self._group(&L.ffn_glu, spec["ffn_glu"])
            self._group(&L.ffn_down, spec["ffn_down"])
            if L.kind == LOWBIT_BLOCK_GDN:
                groups = spec["gdn_in"]
                if not 1 <= len(groups) <= 2:
                    raise ValueError(f"layer {il}: gdn_in must be one or two groups")
                for j in range(len(groups)):
                    self._group(&L.gdn_in[j], groups[j])
                L.conv_w, L.ssm_a = self._vec(spec, "conv_w"), self._vec(spec, "ssm_a")
                L.ssm_dt, L.ssm_norm = self._vec(spec, "ssm_dt"), self._vec(spec, "ssm_norm")
                L.conv_state, L.ssm_state = self._vec(spec, "conv_state", True), self._vec(spec, "ssm_state", True)
                self._sized(spec, il, {"conv_w": (self._C(), self.cfg.ssm_conv),
                                       "conv_state": (self._C(), self.cfg.ssm_conv - 1),
                                       "ssm_a": (self.cfg.ssm_v_heads,), "ssm_dt": (self.cfg.ssm_v_heads,),
                                       "ssm_norm": (self.cfg.ssm_state,),
                                       "ssm_state": (self.cfg.ssm_v_heads, self.cfg.ssm_state, self.cfg.ssm_state)})
            else:
                self._group(&L.qkv, spec["qkv"])
                L.q_norm, L.k_norm = self._vec(spec, "q_norm"), self._vec(spec, "k_norm")
                L.attn_sub_norm = self._vec(spec, "attn_sub_norm")
                L.k_cache, L.v_cache = self._vec(spec, "k_cache", True), self._vec(spec, "v_cache", True)
                L.rope, L.window = spec["rope"], spec["window"]
                hd, vd, Hkv = self.cfg.head_dim, self.cfg.v_head_dim, self.cfg.n_head_kv
                self._sized(spec, il, {"q_norm": (hd,), "k_norm": (hd,),
                                       "attn_sub_norm": (self.cfg.n_head * vd,),
                                       "k_cache": (Hkv, self.cfg.ctx, hd), "v_cache": (Hkv, self.cfg.ctx, vd)})
            d = self.cfg.d_model
            self._sized(spec, il, {"attn_norm": (d,), "ffn_norm": (d,), "post_attn_norm": (d,),
                                   "post_ffw_norm": (d,), "ffn_sub_norm": (self.cfg.n_ff,)})
        cdef char why[256]
        why[0] = 0
        if lowbit_decoder_check(&self.cfg, self.layers, why, sizeof(why)) != 0:
            raise ValueError(why.decode())

    cdef int64_t _C(self):
        return (2 * self.cfg.ssm_k_heads + self.cfg.ssm_v_heads) * self.cfg.ssm_state

    cdef void _sized(self, dict spec, int il, dict shapes) except *:
        for name, shape in shapes.items():
            a = spec.get(name)
            if a is not None and _shape(a) != shape:
                raise ValueError(f"layer {il}: {name} has shape {_shape(a)}, expected {shape}")

    cdef float *_vec(self, dict spec, str name, bint writable=False) except? NULL:
        a = spec.get(name)
        if a is None:
            return NULL
        cdef cnp.ndarray arr = _f32(a, name, -1, writable)
        self._keep.append(arr)
        return _p(arr)

    cdef void _group(self, lowbit_decoder_group *g, tuple spec) except *:
        host, mats, rows, cols, glu, prep, block, signs = spec
        if not 1 <= len(rows) <= LOWBIT_GROUP_MAX:
            raise ValueError(f"a group has 1 to {LOWBIT_GROUP_MAX} matrices, got {len(rows)}")
        g.n, g.cols, g.glu, g.prep, g.rot_block = len(rows), cols, glu, INPUT_PREPS[prep], block
        cdef int j
        for j in range(g.n):
            g.rows[j] = rows[j]
            if mats is None:  # (not a conditional expression: it would drop the const)
                g.m[j] = NULL
            else:
                g.m[j] = matrix_of(mats[j])
        if mats is None:
            g.host_id = len(self._host)
            self._host.append((host, tuple(rows), cols))
        else:
            self._keep.append(mats)
        g.rot_signs = NULL
        if signs is not None:
            a = _f32(signs, "signs", 1)
            if a.shape[0] != cols:
                raise ValueError(f"signs has {a.shape[0]} values for a {cols}-wide input")
            self._keep.append(a)
            g.rot_signs = _p(a)

    def __dealloc__(self):
        PyMem_Free(self.layers)

    def run(self, x, int64_t pos, list cos not None, list sin not None, threads=None):
        """x (T, d) in place through every layer at positions pos..pos + T - 1; cos / sin: the
        (T, rope_half) tables of those positions, one per layer `rope` index.  threads: None (the
        default) or >= 1."""
        cdef cnp.ndarray xa = _f32(x, "x", 2, True)
        cdef int64_t T = cnp.PyArray_DIM(xa, 0)
        if cnp.PyArray_DIM(xa, 1) != self.cfg.d_model:
            raise ValueError(f"x must have shape (T, {self.cfg.d_model}), got {_shape(xa)}")
        if T < 1 or pos < 0 or pos > self.cfg.ctx - T:
            raise ValueError(f"positions {pos}..{pos + T - 1} do not fit the cache of {self.cfg.ctx}")
        if len(cos) != len(sin):
            raise ValueError(f"{len(cos)} cos tables but {len(sin)} sin tables")
        cdef int il, j, n_tab = len(cos)
        for il in range(self.cfg.n_layer):
            if self.layers[il].kind != LOWBIT_BLOCK_GDN and self.layers[il].rope >= n_tab:
                raise ValueError(f"layer {il} needs cos / sin table {self.layers[il].rope}, got {n_tab}")
        cdef const float **tabs = <const float **>PyMem_Malloc((2 * n_tab + 1) * sizeof(void *))
        if not tabs:
            raise MemoryError()
        cdef cnp.ndarray a, scratch
        cdef int64_t need = lowbit_decoder_scratch_floats(&self.cfg, T)
        cdef int st
        cdef float *xp
        cdef float *sp
        cdef int nth = 0 if threads is None else threads
        try:
            for j in range(2 * n_tab):
                a = _f32((cos, sin)[j % 2][j // 2], "cos" if j % 2 == 0 else "sin", 2)
                if cnp.PyArray_DIM(a, 0) != T or cnp.PyArray_DIM(a, 1) != self.cfg.rope_half:
                    raise ValueError(f"rope tables must be (T, {self.cfg.rope_half}), got {_shape(a)}")
                tabs[(j % 2) * n_tab + j // 2] = _p(a)  # the cos tables, then the sin tables
            if T == 1 and self._scratch1 is not None:
                scratch = self._scratch1
            else:
                scratch = np.empty(need, np.float32)
                if T == 1:
                    self._scratch1 = scratch
            xp, sp = _p(xa), _p(scratch)
            self._threads, self._error = threads, None
            with nogil:
                st = lowbit_decoder_run(&self.cfg, self.layers, xp, T, pos, tabs, tabs + n_tab, sp,
                                        _host_call, <void *>self, nth)
        finally:
            PyMem_Free(tabs)
        if self._error is not None:
            e, self._error = self._error, None
            raise e
        check(st, "decoder layers")



def decoder_timing(bint enable):
    """Benchmark timing of Decoder.run (lowbit_decoder_timing): returns (recurrent, total) seconds
    summed since the last call, then resets them; enable=False stops timing.  The recurrent part
    is the Gated-DeltaNet blocks' work between their input projections and ssm_out."""
    cdef double r = 0, t = 0
    lowbit_decoder_timing(enable, &r, &t)
    return r * 1e-6, t * 1e-6
