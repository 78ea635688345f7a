"""pylowbit inside JAX (pylowbit.jax): XLA FFI custom calls equal the numpy API bit for bit, run
inside jax.jit with no host callback, batch under jax.vmap, and refuse bad calls while tracing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pylowbit as lb
import pylowbit.jax as lbj
from pylowbit import _lowbit

FORMATS = ["tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0", "q8_0", "q1_0", "f16", "f32"]


def _weights(fmt, rows, cols, seed=0):
    rng = np.random.default_rng(seed)
    return lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt)


def _x(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gemv_gemm_in_jit_equal_the_numpy_api(fmt):
    w = _weights(fmt, 40, 512)
    wj = lbj.weights(w)
    x, X = _x(512), _x(3, 512)
    y = jax.jit(lbj.gemv)(wj, jnp.asarray(x))
    Y = jax.jit(lbj.gemm)(wj, jnp.asarray(X))
    np.testing.assert_array_equal(np.asarray(y), w.gemv(x))
    np.testing.assert_array_equal(np.asarray(Y), w.gemm(X))


@pytest.mark.parametrize("fmt", sorted(lb.core.DECODE_ONLY))
def test_decode_only_formats_equal_the_numpy_api(fmt):
    # llama.cpp's formats pylowbit multiplies but does not write: random blocks, finite fp16 scales
    info = lb.format_info(fmt)
    facts = _lowbit.type_facts(info.type_id)
    rows, cols = 8, 512
    nblocks = rows * cols // info.block_size
    raw = np.random.default_rng(11).integers(0, 256, (nblocks, info.type_size), dtype=np.uint8)
    for off in (facts["scale_offset"], facts["scale2_offset"]):
        if off >= 0:
            raw[:, off:off + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    w = lb.QTensor(raw.reshape(-1), fmt, (rows, cols))
    X = _x(2, cols)
    np.testing.assert_array_equal(np.asarray(jax.jit(lbj.gemm)(lbj.weights(w), jnp.asarray(X))),
                                  w.gemm(X))


def test_qtensor_accepted_directly():
    w = _weights("tq2_0", 16, 256)
    x = _x(256)
    np.testing.assert_array_equal(np.asarray(lbj.gemv(w, jnp.asarray(x))), w.gemv(x))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: lbj.gemv(w, x))(x)), w.gemv(x))


def _gemv_fwht(w, x):
    return lbj.fwht(lbj.gemv(w, x), block=128)


def test_jit_tq2_0_gemv_then_fwht_is_bit_exact_and_one_custom_call_each():
    w = _weights("tq2_0", 256, 512, seed=2)
    wj, x = lbj.weights(w), _x(512, seed=3)
    f = jax.jit(_gemv_fwht)
    np.testing.assert_array_equal(np.asarray(f(wj, jnp.asarray(x))), lb.fwht(w.gemv(x), block=128))

    lowered = f.lower(wj, jnp.asarray(x))
    text = lowered.as_text()
    assert "stablehlo.custom_call @pylowbit_gemm" in text
    assert "stablehlo.custom_call @pylowbit_fwht" in text
    compiled = lowered.compile().as_text()
    for hlo in (text, compiled):
        assert "callback" not in hlo.lower()  # no host / Python callback on the path
    assert compiled.count('custom_call_target="pylowbit_gemm"') == 1
    assert compiled.count('custom_call_target="pylowbit_fwht"') == 1


def test_vmap_over_activations_is_one_gemm():
    w = _weights("tq2_0", 64, 256, seed=4)
    wj, X = lbj.weights(w), _x(6, 256, seed=5)
    f = jax.jit(jax.vmap(lambda x: lbj.gemv(wj, x)))
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X))), w.gemm(X))
    assert f.lower(jnp.asarray(X)).as_text().count("custom_call @pylowbit_gemm") == 1
    g = jax.vmap(lambda x: lbj.fwht(x, block=64))
    np.testing.assert_array_equal(np.asarray(g(jnp.asarray(X))), lb.fwht(X, block=64))
    # a batched vector under a batched vector: one 3-D gemm
    X3 = _x(2, 3, 256, seed=6)
    h = jax.vmap(jax.vmap(lambda x: lbj.gemv(wj, x)))
    np.testing.assert_array_equal(np.asarray(h(jnp.asarray(X3))),
                                  w.gemm(X3.reshape(6, 256)).reshape(2, 3, 64))


def test_fwht_options_equal_the_numpy_api():
    x = _x(4, 96, seed=7)
    s = np.where(np.arange(96) % 3, 1.0, -1.0).astype(np.float32)
    for kw in ({}, {"block": 12}, {"block": 32, "normalize": False},
               {"block": 12, "signs": s}, {"block": 12, "signs": s, "order": "rotate-then-signs"}):
        if "block" not in kw:
            xx = x[:, :64].copy()
            np.testing.assert_array_equal(np.asarray(lbj.fwht(jnp.asarray(xx), **kw)), lb.fwht(xx, **kw))
            continue
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: lbj.fwht(x, **kw))(x)),
                                      lb.fwht(x, **kw))


def test_weights_are_an_ordinary_uint8_array_pytree():
    w = _weights("tq2_0", 16, 256)
    wj = lbj.weights(w)
    leaves, tree = jax.tree_util.tree_flatten(wj)
    assert len(leaves) == 1 and leaves[0].dtype == jnp.uint8 and leaves[0].size == w.nbytes
    again = jax.tree_util.tree_unflatten(tree, [jnp.asarray(np.asarray(leaves[0]))])  # e.g. reloaded
    np.testing.assert_array_equal(np.asarray(lbj.gemv(again, _x(256))), w.gemv(_x(256)))


def test_bad_calls_raise_clear_errors_while_tracing():
    w = _weights("tq2_0", 16, 256)
    wj = lbj.weights(w)
    with pytest.raises(TypeError, match="x must be float32, got bfloat16"):
        jax.jit(lbj.gemv)(wj, jnp.ones(256, jnp.bfloat16))
    with pytest.raises(TypeError, match="x must be float32, got int32"):
        lbj.gemv(wj, jnp.ones(256, jnp.int32))
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 256\) for a 16x256 matrix, got \(128,\)"):
        jax.jit(lbj.gemv)(wj, jnp.ones(128, jnp.float32))
    with pytest.raises(ValueError, match="x must be 1-D"):
        lbj.gemv(wj, jnp.ones((2, 256), jnp.float32))
    with pytest.raises(ValueError, match=r"need 66 uint8 bytes, got 64"):
        lbj.gemv(lbj.Weights(jnp.zeros(64, jnp.uint8), "tq2_0", (1, 256)), jnp.ones(256, jnp.float32))
    with pytest.raises(TypeError, match="QTensor or pylowbit.jax.Weights"):
        lbj.gemv(np.zeros(66, np.uint8), jnp.ones(256, jnp.float32))
    with pytest.raises(ValueError, match="dropped its file bytes"):
        lbj.weights(w.pack())
    with pytest.raises(ValueError, match="last dimension 96 is not a multiple of block=64"):
        lbj.fwht(jnp.ones(96, jnp.float32), block=64)
    with pytest.raises(ValueError, match="block=36 is not a supported Hadamard size"):
        lbj.fwht(jnp.ones(72, jnp.float32), block=36)
    with pytest.raises(ValueError, match="signs must be a 1-D vector of length 64"):
        lbj.fwht(jnp.ones(64, jnp.float32), signs=jnp.ones(32))


def test_the_handler_refuses_what_tracing_cannot_see():
    # Batched weights reach the handler with more bytes than the matrix: an error, not a wrong answer.
    w = _weights("tq2_0", 16, 256)
    stacked = jnp.stack([jnp.asarray(w.data)] * 2)
    f = jax.vmap(lambda d, x: lbj.gemv(lbj.Weights(d, "tq2_0", (16, 256)), x))
    with pytest.raises(Exception, match="vmap over the weights is not supported"):
        jax.block_until_ready(f(stacked, jnp.ones((2, 256), jnp.float32)))
    s = np.ones(64, np.float32)
    s[3] = 0.5  # signs other than +-1: liblowbit's status, raised through XLA
    with pytest.raises(Exception, match="pylowbit fwht"):
        jax.block_until_ready(lbj.fwht(jnp.ones(64, jnp.float32), signs=s))


def test_an_array_on_another_device_is_refused():
    # No GPU here: a stand-in with the one method the check reads (jax.Array.devices).
    class Gpu:
        platform = "gpu"

        def __str__(self):
            return "cuda:0"

    class OnGpu:
        def devices(self):
            return {Gpu()}

    with pytest.raises(ValueError, match=r"x is on cuda:0 \(platform gpu\); pylowbit's XLA kernels run on the CPU"):
        lbj._check_cpu(OnGpu(), "x")
    lbj._check_cpu(jnp.ones(4), "x")  # a CPU array passes
