"""Paired GEMV tasks (api.c, the kernels' packed_gemv_pair): a task takes a 64-row tile from the
first half of a TQ2_0 / TQ1_0 / PQ2_0 / PTQ1_0 / I2_S matrix and its twin from the second half,
and the AVX2 kernel runs the two side by side (I2_S: its row-sum path where the activations
allow it, else one range after the other).  Q2_0 (group 32) pairs where the variant has
packed_gemv_pair32 (avx512vnni), with cols ending on a half 128-weight chunk too.  Every split of
the tiles (one tile, odd and even counts, a partial last twin, row-group tails) and every entry
point (one matrix, q/k/v in one call, gate/up with the activation, gate and up that do not both
pair) must equal scalar, which runs no pairs, bit for bit."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit, _ops
from test_kernels import random_code_weights  # every code value, arbitrary fp16 scales

NONSCALAR = [v for v in lb.isa_supported() if v != "scalar"]

# 1 tile; 2 (a partial twin, a full one); 3 (the middle task has no twin); 4 with a partial last
# twin; rows ending inside a 4-row group
ROWS = (4, 63, 64, 65, 127, 128, 130, 191, 192, 198, 200, 257, 389)


def _x(rng, cols):
    return (rng.standard_normal(cols) * rng.uniform(0.1, 10, cols)).astype(np.float32)


@pytest.mark.parametrize("variant", NONSCALAR)
@pytest.mark.parametrize("fmt", ["tq2_0", "tq1_0", "pq2_0", "ptq1_0", "i2_s", "q2_0"])
def test_paired_gemv_equals_scalar(fmt, variant, isa):
    rng = np.random.default_rng(31)
    for k, rows in enumerate(ROWS):
        cols = (320 if fmt == "q2_0" else 256, 512, 2560)[k % 3]  # Q2_0: a half chunk
        p = random_code_weights(fmt, rows, cols, seed=k).pack()
        # I2_S: x 1e34 puts amax above 127 * 2^100, where its row sums give way to per-group steps
        for scale in (1.0, 1e34) if fmt == "i2_s" else (1.0,):
            x = _x(rng, cols) * np.float32(scale)
            isa("scalar")
            ref = p.gemv(x)
            isa(variant)
            for threads in (1, 2, 3):
                np.testing.assert_array_equal(p.gemv(x, threads=threads), ref)


def _pair_of_calls(variant, isa, call):
    isa("scalar")
    ref = call()
    isa(variant)
    for threads in (1, 2, 3):
        for got, want in zip(call(threads), ref):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("variant", NONSCALAR)
def test_paired_multi_and_glu_equal_scalar(variant, isa):
    rng = np.random.default_rng(32)
    cols = 512
    qkv = [random_code_weights("tq2_0", r, cols, seed=r).pack() for r in (300, 64, 130)]
    x = _x(rng, cols).reshape(1, cols)

    def multi(threads=1):
        outs = tuple(np.full((1, w.shape[0]), np.nan, np.float32) for w in qkv)
        _lowbit.gemm_multi(tuple(w._m for w in qkv), x, outs, threads)
        return outs

    _pair_of_calls(variant, isa, multi)
    # gate and up both paired; then gate paired and up not (PQ2_0; Q2_0 but in avx512vnni): both
    # run unpaired
    for up_fmt in ("tq1_0", "pq2_0", "q2_0"):
        gate = random_code_weights("tq2_0", 389, cols, seed=1).pack()
        up = random_code_weights(up_fmt, 389, cols, seed=2).pack()

        def glu(threads=1):
            y, yu = np.full((1, 389), np.nan, np.float32), np.full((1, 389), np.nan, np.float32)
            _lowbit.gemm_glu(gate._m, up._m, _ops.ACTIVATIONS["silu"], x, y, yu, threads)
            return y, yu

        _pair_of_calls(variant, isa, glu)
