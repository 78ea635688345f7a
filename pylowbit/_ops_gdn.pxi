# The Gated-DeltaNet ops (native/src/ops_gdn.c), part of the _ops module: included by _ops.pyx,
# whose array checks (_f32, _out, _p...) they use.

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
    cdef int64_t n = _row_len(xa, "x"), rows = cnp.PyArray_SIZE(xa) // n
    _check_eps(eps)
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
    cdef int64_t n = _row_len(oa, "o"), rows = cnp.PyArray_SIZE(oa) // n
    cdef cnp.ndarray wa = _vector(w, "w", n)
    _check_eps(eps)
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
    return _binary(lowbit_sigmoid_mul, "sigmoid_mul", x, gate, "x", "gate", out)
