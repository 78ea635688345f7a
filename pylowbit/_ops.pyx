# cython: language_level=3, boundscheck=False, wraparound=False
"""Decoder ops over liblowbit (native/src/ops.c): RMSNorm, RoPE, softmax, attention over a KV cache,
gated activations and residual adds, each one call with the GIL released.

Arrays must already be float32 and C-contiguous (the decoder's own buffers are): anything else is
a TypeError / ValueError naming the argument, never a silent copy.  Outputs are new arrays unless
`out` is given (it may be an input: the ops work in place).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t

from cpython.mem cimport PyMem_Free, PyMem_Malloc

from pylowbit._lowbit cimport check, matrix_of  # defined once, in _lowbit.pyx
from pylowbit.lowbit cimport lowbit_matrix

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


# ---- the decoder's layer loop in one call -----------------------------------------------------

cdef extern from "lowbit/lowbit.h" nogil:
    int lowbit_matrix_gemm_multi(const lowbit_matrix **ms, int n, const float *x, int64_t batch,
                                 float **ys, int threads)
    int lowbit_matrix_gemm_glu(const lowbit_matrix *gate, const lowbit_matrix *up, int act,
                               const float *x, int64_t batch, float *y, float *y_up, int threads)
    int lowbit_matrix_readahead(const lowbit_matrix **ms, int n, int act, int threads)

# matrices and norm weights of a layer, in DecoderLayers' arrays
cdef enum:
    M_Q, M_K, M_V, M_O, M_GATE, M_UP, M_DOWN, N_MATS
cdef enum:
    W_ATTN, W_Q, W_K, W_ATTN_SUB, W_POST_ATTN, W_FFN, W_FFN_SUB, W_POST_FFW, N_NORMS

MATRIX_NAMES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
NORM_NAMES = ("attn_norm", "attn_q_norm", "attn_k_norm", "attn_sub_norm", "post_attention_norm",
              "ffn_norm", "ffn_sub_norm", "post_ffw_norm")


cdef class DecoderLayers:
    """Every layer of a forward pass in one call, with the GIL released throughout: the same C
    calls in the same order as the Python loop of pylowbit.model.forward (so the same bits), minus
    the interpreter between them (~13 calls a layer, ~4-5 % of a decode token at the 2B shape, a
    time during which the pool's other threads wait).

    layers: one tuple per layer of (7 PackedMatrix in MATRIX_NAMES order, 8 float32 vectors or None
    in NORM_NAMES order, k_cache, v_cache, attention window); act an ACTIVATIONS id."""
    cdef int nl
    cdef const lowbit_matrix **_mats  # layer il's: _mats[il * N_MATS + M_*]
    cdef const float **_norms
    cdef float **_kc
    cdef float **_vc
    cdef int64_t *_window
    cdef object _keep
    cdef int64_t d, H, Hkv, hd, vd, ff, ctx
    cdef float eps, scale
    cdef int neox, act

    def __cinit__(self, list layers not None, int64_t H, int64_t Hkv, int64_t hd, int64_t vd,
                  float eps, float scale, bint neox, int act):
        self.nl = len(layers)
        if self.nl == 0:
            raise ValueError("DecoderLayers needs at least one layer")
        self._mats = <const lowbit_matrix **>PyMem_Malloc(self.nl * N_MATS * sizeof(void *))
        self._norms = <const float **>PyMem_Malloc(self.nl * N_NORMS * sizeof(void *))
        self._kc = <float **>PyMem_Malloc(self.nl * sizeof(void *))
        self._vc = <float **>PyMem_Malloc(self.nl * sizeof(void *))
        self._window = <int64_t *>PyMem_Malloc(self.nl * sizeof(int64_t))
        if not (self._mats and self._norms and self._kc and self._vc and self._window):
            raise MemoryError()
        self.H, self.Hkv, self.hd, self.vd = H, Hkv, hd, vd
        self.eps, self.scale, self.neox, self.act = eps, scale, neox, act
        keep = []
        cdef int il, j
        cdef cnp.ndarray a
        for il in range(self.nl):
            mats, norms, kc, vc, window = layers[il]
            for j in range(N_MATS):
                self._mats[il * N_MATS + j] = matrix_of(mats[j])
            if il == 0:
                self.d, self.ff = mats[M_O].rows, mats[M_DOWN].cols
            shapes = [(m.rows, m.cols) for m in mats]
            if shapes != [(H * hd, self.d), (Hkv * hd, self.d), (Hkv * vd, self.d), (self.d, H * vd),
                          (self.ff, self.d), (self.ff, self.d), (self.d, self.ff)]:
                raise ValueError(f"layer {il}: matrix shapes {shapes} do not fit width {self.d}, "
                                 f"{H} x {hd} query / {Hkv} x {hd} key / {Hkv} x {vd} value heads, "
                                 f"FFN {self.ff}")
            for j in range(N_NORMS):
                if norms[j] is None:
                    self._norms[il * N_NORMS + j] = NULL
                    continue
                a = _f32(norms[j], NORM_NAMES[j], 1)
                want = (hd if j in (W_Q, W_K) else H * vd if j == W_ATTN_SUB
                        else self.ff if j == W_FFN_SUB else self.d)
                if cnp.PyArray_DIM(a, 0) != want:
                    raise ValueError(f"layer {il}: {NORM_NAMES[j]} has {cnp.PyArray_DIM(a, 0)} values, "
                                     f"expected {want}")
                self._norms[il * N_NORMS + j] = _p(a)
                keep.append(a)
            k_arr, v_arr = _f32(kc, "k_cache", 3, True), _f32(vc, "v_cache", 3, True)
            if _shape(k_arr)[0] != Hkv or _shape(k_arr)[2] != hd or _shape(v_arr) != (Hkv, _shape(k_arr)[1], vd):
                raise ValueError(f"layer {il}: caches of shape {_shape(k_arr)} / {_shape(v_arr)}")
            if il == 0:
                self.ctx = _shape(k_arr)[1]
            elif _shape(k_arr)[1] != self.ctx:
                raise ValueError(f"layer {il}: cache length {_shape(k_arr)[1]}, layer 0 has {self.ctx}")
            self._kc[il], self._vc[il] = _p(k_arr), _p(v_arr)
            self._window[il] = window
            keep.append((mats, k_arr, v_arr))
        self._keep = keep

    def __dealloc__(self):
        PyMem_Free(self._mats)
        PyMem_Free(self._norms)
        PyMem_Free(self._kc)
        PyMem_Free(self._vc)
        PyMem_Free(self._window)

    def run(self, x, int64_t pos, list cos not None, list sin not None, tuple bufs not None,
            int threads=0):
        """x (T, d) in place through every layer at positions pos..; cos / sin: one (T, half)
        table per layer; bufs: float32 scratch (h (T, d), q (T, H*hd), k (T, Hkv*hd), v (T, Hkv*vd),
        attention out (T, H*vd), d_out (T, d), gate (T, ff), up (T, ff)).  threads: 0 = default."""
        cdef cnp.ndarray xa = _f32(x, "x", 2, True)
        cdef int64_t T = cnp.PyArray_DIM(xa, 0)
        if cnp.PyArray_DIM(xa, 1) != self.d:
            raise ValueError(f"x must have shape (T, {self.d}), got {_shape(xa)}")
        if T < 1 or pos < 0 or pos > self.ctx - T:
            raise ValueError(f"positions {pos}..{pos + T - 1} do not fit the cache of {self.ctx}")
        if len(cos) != self.nl or len(sin) != self.nl or len(bufs) != 8:
            raise ValueError(f"run needs {self.nl} cos / sin tables and 8 buffers")
        widths = (self.d, self.H * self.hd, self.Hkv * self.hd, self.Hkv * self.vd, self.H * self.vd,
                  self.d, self.ff, self.ff)
        cdef float *b[8]
        cdef cnp.ndarray a
        cdef int j, il
        for j in range(8):
            a = _f32(bufs[j], "bufs", 2, True)
            if cnp.PyArray_DIM(a, 0) != T or cnp.PyArray_DIM(a, 1) != widths[j]:
                raise ValueError(f"bufs[{j}] must have shape ({T}, {widths[j]}), got {_shape(a)}")
            b[j] = _p(a)
        cdef const float **cp = <const float **>PyMem_Malloc(2 * self.nl * sizeof(void *))
        if not cp:
            raise MemoryError()
        cdef int64_t half = -1
        cdef int st = 0
        cdef float *xp
        try:
            for il in range(self.nl):
                for j, tab in enumerate((cos[il], sin[il])):
                    a = _f32(tab, "cos" if j == 0 else "sin", 2)
                    if half < 0:
                        half = cnp.PyArray_DIM(a, 1)
                    if cnp.PyArray_DIM(a, 0) != T or cnp.PyArray_DIM(a, 1) != half or 2 * half > self.hd:
                        raise ValueError(f"layer {il}: rope tables must be (T, half <= {self.hd // 2}), "
                                         f"got {_shape(a)}")
                    cp[2 * il + j] = _p(a)
            xp = _p(xa)
            with nogil:
                st = self._run(xp, T, pos, cp, half, b, threads)
        finally:
            PyMem_Free(cp)
        check(st, "decoder layers")

    cdef int _run(self, float *x, int64_t T, int64_t pos, const float **cs, int64_t half, float **b,
                  int threads) noexcept nogil:
        cdef float *h = b[0]
        cdef float *att = b[4]
        cdef float *dout = b[5]
        cdef float *qkv[3]
        qkv[0], qkv[1], qkv[2] = b[1], b[2], b[3]
        cdef float *one[1]
        cdef const lowbit_matrix **M
        cdef const float **W
        cdef int il, st = 0
        cdef int64_t d = self.d, H = self.H, Hkv = self.Hkv, hd = self.hd
        for il in range(self.nl):
            M = self._mats + il * N_MATS
            W = self._norms + il * N_NORMS
            # attention (each step as the Python loop does it)
            st = st or lowbit_rms_norm(x, W[W_ATTN], T, d, self.eps, h)
            st = st or lowbit_matrix_gemm_multi(M, 3, h, T, qkv, threads)
            # decode: the pool's idle threads prefetch the next product's first weights while this
            # thread does the work in between (lowbit_matrix_readahead; a hint, same results)
            if T == 1:
                lowbit_matrix_readahead(M + M_O, 1, -1, threads)
            if W[W_Q] != NULL:
                st = st or lowbit_rms_norm(qkv[0], W[W_Q], T * H, hd, self.eps, qkv[0])
                st = st or lowbit_rms_norm(qkv[1], W[W_K], T * Hkv, hd, self.eps, qkv[1])
            st = st or lowbit_rope(qkv[0], T, H, hd, cs[2 * il], cs[2 * il + 1], half, self.neox)
            st = st or lowbit_rope(qkv[1], T, Hkv, hd, cs[2 * il], cs[2 * il + 1], half, self.neox)
            st = st or lowbit_attention_mt(qkv[0], qkv[1], qkv[2], T, H, Hkv, hd, self.vd, self._kc[il],
                                           self._vc[il], self.ctx, pos, self._window[il], self.scale,
                                           att, threads)
            if W[W_ATTN_SUB] != NULL:
                st = st or lowbit_rms_norm(att, W[W_ATTN_SUB], T, H * self.vd, self.eps, att)
            one[0] = dout
            st = st or lowbit_matrix_gemm_multi(M + M_O, 1, att, T, one, threads)
            if T == 1:
                lowbit_matrix_readahead(M + M_GATE, 2, self.act, threads)
            if W[W_POST_ATTN] != NULL:
                st = st or lowbit_rms_norm(dout, W[W_POST_ATTN], T, d, self.eps, dout)
            st = st or lowbit_add(x, dout, T * d, x)
            # feed-forward
            st = st or lowbit_rms_norm(x, W[W_FFN], T, d, self.eps, h)
            st = st or lowbit_matrix_gemm_glu(M[M_GATE], M[M_UP], self.act, h, T, b[6], b[7], threads)
            if T == 1:
                lowbit_matrix_readahead(M + M_DOWN, 1, -1, threads)
            if W[W_FFN_SUB] != NULL:
                st = st or lowbit_rms_norm(b[6], W[W_FFN_SUB], T, self.ff, self.eps, b[6])
            st = st or lowbit_matrix_gemm_multi(M + M_DOWN, 1, b[6], T, one, threads)
            if T == 1 and il + 1 < self.nl:
                lowbit_matrix_readahead(M + N_MATS, 3, -1, threads)
            if W[W_POST_FFW] != NULL:
                st = st or lowbit_rms_norm(dout, W[W_POST_FFW], T, d, self.eps, dout)
            st = st or lowbit_add(x, dout, T * d, x)
            if st:
                return st
        return 0


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
