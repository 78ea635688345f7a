"""The array-input layer (pylowbit.as_array): numpy, the buffer protocol and DLPack objects are read
in place, never copied; what cannot be read in place is refused with the reason.  Only numpy and
the standard library here (torch and JAX: tests/integrations/test_arrays_runtimes.py)."""
import array

import numpy as np
import pytest

import pylowbit as lb


def _w(rows=8, cols=256, fmt="tq2_0"):
    rng = np.random.default_rng(0)
    return lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt)


class DLPackOnly:
    """An array known only through DLPack (as an array-API library exports one)."""

    def __init__(self, a, device=(1, 0)):
        self._a, self._device = a, device

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._device


def test_numpy_is_returned_as_is():
    x = np.ones(256, np.float32)
    assert lb.as_array(x) is x


def test_dlpack_object_is_viewed_not_copied():
    x = np.arange(256, dtype=np.float32)
    v = lb.as_array(DLPackOnly(x))
    assert v.ctypes.data == x.ctypes.data and v.shape == x.shape


def test_buffer_protocol_is_viewed_not_copied():
    a = array.array("f", range(256))
    v = lb.as_array(a)
    assert v.dtype == np.float32 and v.ctypes.data == a.buffer_info()[0]
    m = memoryview(bytearray(64))
    assert lb.as_array(m).ctypes.data == np.frombuffer(m, np.uint8).ctypes.data


def test_products_take_any_array():
    w = _w()
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    ref = w.gemv(x)
    for form in (DLPackOnly(x), array.array("f", x.tolist()), memoryview(x)):
        np.testing.assert_array_equal(w.gemv(form), ref)
        np.testing.assert_array_equal(lb.gemm(w, DLPackOnly(x.reshape(1, 256))), ref[None])
    np.testing.assert_array_equal(lb.fwht(DLPackOnly(x)), lb.fwht(x))
    q = lb.quantize(DLPackOnly(x.reshape(1, 256)), "tq2_0")
    np.testing.assert_array_equal(q.data, lb.quantize(x.reshape(1, 256), "tq2_0").data)
    for got, want in zip(lb.quantize_act_for(memoryview(x), "tq2_0"), lb.quantize_act_for(x, "tq2_0")):
        np.testing.assert_array_equal(got, want)


def test_weight_bytes_from_a_buffer_or_dlpack():
    w = _w()
    for form in (bytearray(w.data.tobytes()), DLPackOnly(w.data.copy())):
        w2 = lb.QTensor(form, "tq2_0", w.shape)
        np.testing.assert_array_equal(w2.dequantize(), w.dequantize())
    shared = DLPackOnly(w.data)
    assert lb.QTensor(shared, "tq2_0", w.shape).data.ctypes.data == w.data.ctypes.data


def test_out_is_the_callers_array_written_in_place():
    w = _w()
    x = np.ones(256, np.float32)
    out = bytearray(8 * 4)  # a writeable buffer of 8 float32
    view = memoryview(out).cast("f")
    assert w.gemv(x, out=view) is view
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), w.gemv(x))
    backing = np.zeros((2, 8), np.float32)
    res = w.gemm(np.ones((2, 256), np.float32), out=DLPackOnly(backing))
    assert isinstance(res, DLPackOnly)
    np.testing.assert_array_equal(backing, w.gemm(np.ones((2, 256), np.float32)))
    y = np.zeros(256, np.float32)
    assert lb.fwht(DLPackOnly(x), out=y) is y
    np.testing.assert_array_equal(y, lb.fwht(x))


def test_other_device_is_refused():
    w = _w()
    with pytest.raises(ValueError, match=r"x is on device CUDA:1 .*CPU"):
        w.gemv(DLPackOnly(np.ones(256, np.float32), device=(2, 1)))
    with pytest.raises(ValueError, match=r"out is on device ROCm:0"):
        w.gemv(np.ones(256, np.float32), out=DLPackOnly(np.ones(8, np.float32), device=(10, 0)))
    with pytest.raises(ValueError, match=r"QTensor data is on device Metal:0"):
        lb.QTensor(DLPackOnly(w.data, device=(8, 0)), "tq2_0", w.shape)


def test_strided_foreign_array_is_refused_with_its_strides():
    w = _w()
    with pytest.raises(ValueError, match=r"x is not C-contiguous .*strides in elements \(2,\)"):
        w.gemv(DLPackOnly(np.ones(512, np.float32)[::2]))
    with pytest.raises(ValueError, match=r"strided buffer"):
        w.gemv(memoryview(np.ones(512, np.float32))[::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        lb.fwht(np.ones(256, np.float32), out=DLPackOnly(np.ones(512, np.float32)[::2]))


def test_wrong_dtype_or_shape_is_refused():
    w = _w()
    with pytest.raises(TypeError, match="x must be float32, got float64"):
        w.gemv(DLPackOnly(np.ones(256)))
    with pytest.raises(TypeError, match="x must be float32, got int32"):
        w.gemv(array.array("i", [1] * 256))
    with pytest.raises(ValueError, match=r"x must have shape \(256,\), got \(128,\)"):
        w.gemv(DLPackOnly(np.ones(128, np.float32)))
    with pytest.raises(TypeError, match="out must be a float32 array, got dtype float64"):
        w.gemv(np.ones(256, np.float32), out=DLPackOnly(np.ones(8)))
    with pytest.raises(TypeError, match="QTensor data must be uint8 bytes, got dtype float32"):
        lb.QTensor(DLPackOnly(np.zeros(66, np.float32)), "tq2_0", (1, 256))


def test_out_that_is_not_an_array_is_refused():
    with pytest.raises(TypeError, match="out must be a float32 array .*got list"):
        _w().gemv(np.ones(256, np.float32), out=[0.0] * 8)


def test_read_only_out_is_refused():
    w = _w()
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        w.gemv(np.ones(256, np.float32), out=memoryview(ro))
    with pytest.raises(ValueError, match="read-only"):
        lb.fwht(np.ones(8, np.float32), out=memoryview(ro))


def test_fwht_quantize_act_takes_any_array():
    x = np.random.default_rng(3).standard_normal((2, 256)).astype(np.float32)
    s = np.where(np.arange(256) % 3, 1.0, -1.0).astype(np.float32)
    want = lb.fwht_quantize_act(x, 128, s, 128)
    for got_part, want_part in zip(lb.fwht_quantize_act(DLPackOnly(x), 128, s, 128), want):
        np.testing.assert_array_equal(got_part, want_part)
    q, d, sums = np.empty((2, 256), np.int8), np.empty((2, 2), np.float32), np.empty((2, 2), np.int32)
    out = (DLPackOnly(q), memoryview(d), DLPackOnly(sums))
    assert lb.fwht_quantize_act(memoryview(x), 128, s, 128, out=out) is out
    for got_part, want_part in zip((q, d, sums), want):
        np.testing.assert_array_equal(got_part, want_part)
