"""GEMV / GEMM against a float64 numpy reference, and every ISA variant against scalar."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit

KERNEL_FORMATS = ["tq1_0", "tq2_0", "i2_s", "q1_0", "q2_0", "pq2_0", "ptq1_0", "q8_0"]
ALL_FORMATS = KERNEL_FORMATS + ["f16", "f32"]
VARIANTS = lb.isa_supported()


@pytest.fixture
def isa():
    """Restores the default variant after a test that forces one."""
    before = lb.isa_active()
    yield lb.set_isa
    lb.set_isa(before)


def act_group(fmt):
    return _lowbit.act_group(lb.format_info(fmt).type_id)


def emulate_a8(x, group):
    """numpy model of the A8 activation quantizer: what the kernels multiply with, in float64."""
    g = x.astype(np.float64).reshape(-1, group)
    amax = np.abs(x.reshape(-1, group)).max(axis=1).astype(np.float32)
    d = amax / np.float32(127)
    inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    prod = (x.reshape(-1, group) * inv[:, None]).astype(np.float32)
    q = np.clip(np.sign(prod) * np.floor(np.abs(prod) + 0.5), -127, 127)
    return (q * d[:, None].astype(np.float64)).reshape(-1), q.astype(np.int8).reshape(-1), d


def weights(fmt, rows, cols, seed=0):
    rng = np.random.default_rng(seed)
    return lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt)


def shapes(fmt):
    bs = lb.format_info(fmt).block_size
    bs = max(bs, 32)
    # column counts that are multiples of the block but not of any SIMD width / unroll; row counts
    # that leave tails against every row tile and the 64-row thread chunk
    return [(1, bs), (3, 3 * bs), (17, 5 * bs), (65, 7 * bs), (130, 2 * 256)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_activation_quantizer_matches_numpy_model(variant, isa):
    isa(variant)
    rng = np.random.default_rng(0)
    for group in (32, 64, 128):
        x = (rng.standard_normal(group * 9) * rng.choice([1e-3, 1, 100], group * 9)).astype(np.float32)
        x[:group] = 0  # an all-zero group: scale 0, codes 0
        q, d, s = lb.quantize_act(x, group)
        _, q_ref, d_ref = emulate_a8(x, group)
        np.testing.assert_array_equal(q, q_ref)
        np.testing.assert_array_equal(d, d_ref)
        np.testing.assert_array_equal(s, q.reshape(-1, group).sum(axis=1, dtype=np.int32))


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_gemv_matches_float64_reference(fmt):
    rng = np.random.default_rng(1)
    for rows, cols in shapes(fmt):
        w = weights(fmt, rows, cols, seed=rows)
        x = rng.standard_normal(cols).astype(np.float32)
        wd = w.dequantize().astype(np.float64)
        y = w.gemv(x)
        if fmt in ("f16", "f32"):
            xa = x.astype(np.float64)
        else:
            xa, _, _ = emulate_a8(x, act_group(fmt))
        ref = wd @ xa
        # float32 accumulation of int32 group sums: error bounded relative to sum |w||x|
        scale = np.abs(wd) @ np.abs(xa) + 1e-30
        assert np.max(np.abs(y - ref) / scale) < 2e-6, (rows, cols)
        # and against the unquantized activations: int8 activations cost < 1 % of sum |w||x|
        assert np.max(np.abs(y - wd @ x.astype(np.float64)) / scale) < 1e-2


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_gemm_equals_gemv_per_column(fmt):
    rng = np.random.default_rng(2)
    rows, cols = 70, 2 * 256
    w = weights(fmt, rows, cols)
    x = rng.standard_normal((9, cols)).astype(np.float32)
    y = w.gemm(x)
    for b in range(x.shape[0]):
        np.testing.assert_allclose(y[b], w.gemv(x[b]), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_give_identical_results(threads):
    rng = np.random.default_rng(3)
    w = weights("tq2_0", 300, 512)
    x = rng.standard_normal(512).astype(np.float32)
    np.testing.assert_array_equal(w.gemv(x, threads=threads), w.gemv(x, threads=1))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_every_variant_matches_scalar(fmt, variant, isa):
    """Integer sums are exact in every variant; only the float combination order may differ."""
    rng = np.random.default_rng(4)
    for rows, cols in shapes(fmt):
        w = weights(fmt, rows, cols, seed=cols)
        x = rng.standard_normal((4, cols)).astype(np.float32)
        isa("scalar")
        ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
        isa(variant)
        assert lb.isa_active() == variant
        tol = np.abs(w.dequantize()).astype(np.float64) @ np.abs(x.T) * 1e-6 + 1e-30
        assert np.all(np.abs(w.gemv(x[0]) - ref_v) <= tol[:, 0])
        assert np.all(np.abs(w.gemm(x) - ref_m) <= tol.T)


def test_gemv_act_uses_given_codes():
    """Kernels consume exactly the A8 codes given: all-ones codes with unit scale sum each row."""
    fmt = "tq2_0"
    w = weights(fmt, 5, 512)
    G = act_group(fmt)
    q = np.ones(512, np.int8)
    d = np.ones(512 // G, np.float32)
    s = np.full(512 // G, G, np.int32)
    out = np.empty(5, np.float32)
    _lowbit.gemv_act(w.data, w.type_id, 5, 512, q, d, s, out)
    np.testing.assert_allclose(out, w.dequantize().sum(axis=1), rtol=1e-5)
