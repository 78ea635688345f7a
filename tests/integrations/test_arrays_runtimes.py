"""torch tensors and JAX arrays through the numpy-style API: read in place (not copied), out= a
torch tensor written in place, and bad arrays from each runtime refused with the reason."""
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import pylowbit as lb


def _w(rows=8, cols=256, seed=0):
    rng = np.random.default_rng(seed)
    return lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), "tq2_0")


def _x(n=256, seed=1):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


class CudaArray:
    """Stands for a GPU array: DLPack says CUDA (a real one needs a GPU)."""

    def __init__(self, dtype="float32"):
        self.dtype = dtype

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kw):
        raise AssertionError("a CUDA array must be refused before it is exported")


def test_torch_and_jax_arrays_are_viewed_in_place():
    t = torch.from_numpy(_x()).clone()
    assert lb.as_array(t).ctypes.data == t.data_ptr()
    j = jnp.asarray(_x())
    assert lb.as_array(j).ctypes.data == j.unsafe_buffer_pointer()
    wb = torch.from_numpy(_w().data.copy())
    assert lb.QTensor(wb, "tq2_0", (8, 256)).data.ctypes.data == wb.data_ptr()


@pytest.mark.parametrize("runtime", ["torch", "jax"])
def test_no_copy_of_a_large_activation(runtime):
    # A copy of x (4 MiB) would show in the traced peak; the result is 4 rows of float32.
    cols = 1 << 20
    w = lb.quantize(np.ones((4, cols), np.float32), "tq2_0")
    x = _x(cols)
    arr = torch.from_numpy(x) if runtime == "torch" else jnp.asarray(x)
    ref = w.gemv(x)
    tracemalloc.start()
    try:
        y = w.gemv(arr)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(y, ref)
    assert peak < cols  # well under the 4 MiB of x


def test_results_equal_the_numpy_api():
    w, x = _w(), _x()
    X = np.stack([x, x[::-1].copy()])
    for conv in (torch.from_numpy, jnp.asarray):
        np.testing.assert_array_equal(w.gemv(conv(x)), w.gemv(x))
        np.testing.assert_array_equal(lb.gemm(w, conv(X)), w.gemm(X))
        np.testing.assert_array_equal(lb.fwht(conv(x)), lb.fwht(x))
        np.testing.assert_array_equal(lb.quantize(conv(X), "tq2_0").data, lb.quantize(X, "tq2_0").data)
        for a, b in zip(lb.quantize_act_for(conv(x), "tq2_0"), lb.quantize_act_for(x, "tq2_0")):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(w.pack().gemv(torch.from_numpy(x)), w.gemv(x))


def test_out_torch_tensor_written_in_place():
    w, x = _w(), _x()
    out = torch.empty(8)
    ptr = out.data_ptr()
    assert w.gemv(torch.from_numpy(x), out=out) is out
    assert out.data_ptr() == ptr
    np.testing.assert_array_equal(out.numpy(), w.gemv(x))
    t = torch.from_numpy(x.copy())
    assert lb.fwht(t, out=t) is t  # in place
    np.testing.assert_array_equal(t.numpy(), lb.fwht(x))


def test_bad_torch_calls():
    w, x = _w(), _x()
    with pytest.raises(TypeError, match=r"x \(torch.Tensor of dtype torch.bfloat16\) cannot be read"):
        w.gemv(torch.ones(256, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="x must be float32, got float64"):
        w.gemv(torch.ones(256, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x is not C-contiguous .*strides in elements \(2,\)"):
        w.gemv(torch.ones(512)[::2])
    with pytest.raises(ValueError, match=r"not C-contiguous .*\.contiguous\(\)"):
        w.gemm(torch.ones(256, 2).T)
    with pytest.raises(TypeError, match="require gradient"):
        w.gemv(torch.ones(256, requires_grad=True))
    with pytest.raises(ValueError, match=r"x must have shape \(256,\), got \(128,\)"):
        w.gemv(torch.ones(128))
    with pytest.raises(ValueError, match="x is on device CUDA:0"):
        w.gemv(CudaArray())
    with pytest.raises(ValueError, match="out is on device CUDA:0"):
        w.gemv(x, out=CudaArray())
    with pytest.raises(ValueError, match="meta"):
        w.gemv(torch.ones(256, device="meta"))
    with pytest.raises(ValueError, match="out must have shape"):
        w.gemv(x, out=torch.empty(9))
    with pytest.raises(TypeError, match="QTensor data must be uint8 bytes, got dtype int8"):
        lb.QTensor(torch.zeros(8 * 66, dtype=torch.int8), "tq2_0", (8, 256))


def test_bad_jax_calls():
    w, x = _w(), _x()
    with pytest.raises(TypeError, match=r"bfloat16\) cannot be read"):
        w.gemv(jnp.ones(256, jnp.bfloat16))
    with pytest.raises(TypeError, match="x must be float32, got int32"):
        w.gemv(jnp.ones(256, jnp.int32))
    with pytest.raises(ValueError, match=r"x must have shape \(256,\), got \(128,\)"):
        w.gemv(jnp.ones(128))
    with pytest.raises(ValueError, match="JAX arrays are immutable"):
        w.gemv(x, out=jnp.zeros(8))
    with pytest.raises(ValueError, match="JAX arrays are immutable"):
        lb.fwht(x, out=jnp.zeros(256))
    assert jax.devices()[0].platform == "cpu"
