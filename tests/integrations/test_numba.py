"""pylowbit's kernels inside numba's nopython mode (pylowbit.numba): the numpy API's results, a
hand-written decode loop, bad calls refused."""
import numba
import numpy as np
import pytest

import pylowbit as lb
import pylowbit.numba as lbn

FORMATS = ["tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0", "q8_0", "f16", "f32"]


def _weights(fmt, rows, cols, seed):
    rng = np.random.default_rng(seed)
    return lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gemv_gemm_equal_the_numpy_api(fmt):
    w = _weights(fmt, 48, 512, 1)
    x = np.random.default_rng(2).standard_normal((3, 512)).astype(np.float32)
    data, t, rows, cols = lbn.weights(w)

    @numba.njit
    def both(x):
        y1 = np.empty(rows, np.float32)
        lbn.gemv(data, t, rows, cols, x[0], y1)
        y = np.empty((x.shape[0], rows), np.float32)
        lbn.gemm(data, t, rows, cols, x, y)
        return y1, y

    y1, y = both(x)
    np.testing.assert_array_equal(y1, w.gemv(x[0]))
    np.testing.assert_array_equal(y, w.gemm(x))


def test_raw_ctypes_functions_in_njit():
    w = _weights("tq2_0", 16, 256, 3)
    x = np.random.default_rng(4).standard_normal(256).astype(np.float32)

    @numba.njit
    def raw(wd, x):
        y = np.empty(16, np.float32)
        st = lbn.lowbit_gemv(35, wd.ctypes.data, 16, 256, x.ctypes.data, y.ctypes.data, 1)
        return st, y

    st, y = raw(w.data, x)
    assert st == 0
    np.testing.assert_array_equal(y, w.gemv(x))


def test_fwht_and_act_quantizer_equal_the_numpy_api():
    x = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    np.testing.assert_array_equal(lbn.fwht_(x.copy(), 128), lb.fwht(x, block=128))
    n = 512
    q, d, s = np.empty(n, np.int8), np.empty(n // 256, np.float32), np.empty(n // 256, np.int32)
    lbn.quantize_act_for(35, x, q, d, s)
    for got, want in zip((q, d, s), lb.quantize_act_for(x, "tq2_0")):
        np.testing.assert_array_equal(got, want)


# ---- a hand-written decode loop in nopython mode: a two-layer MLP of packed (TQ2_0) matrices with
# RMSNorm, its output fed back as the next step's input ----------------------------------------------

D, H, STEPS = 256, 768, 6


@numba.njit
def _rmsnorm(x, g, eps):
    ss = 0.0
    for v in x:
        ss += np.float64(v) * v
    inv = np.float32(1.0 / np.sqrt(ss / x.shape[0] + eps))
    return (x * inv) * g


@numba.njit
def _silu(h):
    for j in range(h.shape[0]):
        h[j] = h[j] / (np.float32(1.0) + np.exp(-h[j]))
    return h


@numba.njit
def _decode(w1, w2, t, g, x0, steps):
    h = np.empty(H, np.float32)
    y = np.empty(D, np.float32)
    x = x0.copy()
    out = np.empty((steps, D), np.float32)
    for i in range(steps):
        lbn.gemv(w1, t, H, D, _rmsnorm(x, g, 1e-6), h)
        _silu(h)
        lbn.gemv(w2, t, D, H, h, y)
        x = x + y
        out[i] = x
    return out


def test_decode_loop_in_nopython_mode_equals_the_numpy_api():
    w1, w2 = _weights("tq2_0", H, D, 6), _weights("tq2_0", D, H, 7)
    g = np.random.default_rng(8).uniform(0.5, 1.5, D).astype(np.float32)
    x0 = np.random.default_rng(9).standard_normal(D).astype(np.float32)
    got = _decode(w1.data, w2.data, w1.type_id, g, x0, STEPS)

    x = x0.copy()
    for i in range(STEPS):  # the same steps through the numpy API (norm and SiLU: the same code)
        h = _silu(w1.gemv(_rmsnorm(x, g, 1e-6)))
        x = x + w2.gemv(h)
        np.testing.assert_array_equal(got[i], x)


# ---- bad calls ------------------------------------------------------------------------------------

def test_bad_calls_raise_clear_errors():
    w = _weights("tq2_0", 8, 256, 10)
    data, t, rows, cols = lbn.weights(w)
    x, y = np.ones(256, np.float32), np.empty(8, np.float32)
    with pytest.raises(numba.core.errors.TypingError, match=r"array\(float64, 1d, C\)"):
        lbn.gemv(data, t, rows, cols, x.astype(np.float64), y)  # wrong dtype
    with pytest.raises(numba.core.errors.TypingError, match=r"array\(float32, 1d, A\)"):
        lbn.gemv(data, t, rows, cols, np.ones(512, np.float32)[::2], y)  # strided view
    with pytest.raises(ValueError, match="x must have `cols` elements"):
        lbn.gemv(data, t, rows, cols, np.ones(128, np.float32), y)
    with pytest.raises(ValueError, match="out must have `rows` elements"):
        lbn.gemv(data, t, rows, cols, x, np.empty(9, np.float32))
    with pytest.raises(ValueError, match="byte count does not match"):
        lbn.gemv(data[:-2], t, rows, cols, x, y)
    with pytest.raises(ValueError, match="gemm: x must have shape"):
        lbn.gemm(data, t, rows, cols, np.ones((2, 128), np.float32), np.empty((2, 8), np.float32))
    with pytest.raises(ValueError, match="liblowbit"):
        lbn.fwht_(np.ones(96, np.float32), 64)  # 96 is not a multiple of the block
    with pytest.raises(TypeError, match="QTensor"):
        lbn.weights(data)
