"""The activation quantizer: rounding ties and clamps, Q8_K's and Q8_0's scales as llama.cpp makes
them, and hostile groups (NaN, inf, ties, overflowing inverses) equal to scalar in every variant."""
import numpy as np
import pytest

import pylowbit as lb
from test_kernels import VARIANTS, emulate_a8


@pytest.mark.parametrize("variant", VARIANTS)
def test_activation_quantizer_ties_and_edges(variant, isa):
    """Half-way cases: roundf (away from zero) for A8 groups, half to even for the Q8_0 (32) and
    Q8_K (256) groups, as llama.cpp rounds them; clamps at +-127."""
    isa(variant)
    for group, even in ((64, False), (32, True), (256, True)):
        x = np.zeros(2 * group, np.float32)
        x[0] = 127.0 if group != 256 else -127.0  # scale 1, inverse 1: codes are round(x)
        x[1:12] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -126.5, 0.49999997, -0.49999997, 3.5]
        x[12:32] = np.linspace(-127, 127, 20, dtype=np.float32)
        x[group] = np.float32(1e-30)  # group 2: tiny
        q, d, s = lb.quantize_act(x, group)
        _, q_ref, d_ref = emulate_a8(x, group)
        np.testing.assert_array_equal(q, q_ref)
        np.testing.assert_array_equal(d, d_ref)
        assert d[0] == 1.0
        if even:
            assert list(q[1:9]) == [0, 0, 2, -2, 2, -2, 126, -126] and q[11] == 4
        else:
            assert list(q[1:9]) == [1, -1, 2, -2, 3, -3, 127, -127]
        assert q[9] == 0 and q[10] == 0
        np.testing.assert_array_equal(s, q.reshape(-1, group).sum(axis=1, dtype=np.int32))


@pytest.mark.parametrize("variant", VARIANTS)
def test_q8_k_and_q8_0_scales_are_llama_cpps(variant, isa):
    """Q8_K: the sign of the first largest-|x| element sets the sign of d (d = 1 / (-127 / max));
    Q8_0: d is amax / 127 rounded to fp16; all-zero groups give d = 0 and codes 0."""
    isa(variant)
    x = np.zeros(512, np.float32)
    x[3], x[7], x[9] = 2.0, -2.0, 1.0  # first largest is +2: iscale = -63.5, d = -1/63.5
    q, d, _ = lb.quantize_act(x, 256)
    assert d[0] == np.float32(1) / np.float32(-63.5) and d[1] == 0
    assert (q[3], q[7], q[9]) == (-127, 127, -64)  # 63.5 rounds to even 64
    assert not q[256:].any()
    y = np.zeros(64, np.float32)
    y[5] = -100.0
    q, d, _ = lb.quantize_act(y, 32)
    assert d[0] == np.float32(np.float16(np.float32(100) / np.float32(127))) and d[0] != np.float32(100) / np.float32(127)
    assert q[5] == -127 and d[1] == 0 and not q[32:].any()


@pytest.mark.parametrize("group", [32, 128, 256, 64, 512])
def test_activation_quantizer_hostile_groups_match_scalar(group, isa):
    """NaN / inf products clamp to -127, +m and -m ties give Q8_K the first one's sign, groups so
    small that 127 / amax overflows, and group counts around the SIMD 8-group batches: every
    variant equals scalar bit for bit."""
    rng = np.random.default_rng(group)
    for ng in (1, 7, 8, 9, 17):
        x = rng.standard_normal((ng, group)).astype(np.float32)
        for g in range(ng):
            a, b = sorted(rng.choice(group, 2, replace=False))
            kind = g % 6
            if kind == 0:
                x[g, a] = np.nan
            elif kind == 1:
                x[g, a], x[g, b] = np.inf, -2.0
            elif kind == 2:
                x[g, a], x[g, b] = -5.0, 5.0  # a tie: the first (a < b) decides
            elif kind == 3:
                x[g] *= np.float32(1e-38)  # 127 / amax overflows: the clamps matter
            elif kind == 4:
                x[g] = 0.0
        x = x.reshape(-1)
        isa("scalar")
        want = lb.quantize_act(x, group)
        for variant in VARIANTS:
            isa(variant)
            got = lb.quantize_act(x, group)
            for w, o in zip(want, got):
                assert w.tobytes() == o.tobytes(), (variant, ng)
        q = want[0].reshape(ng, group)
        assert q[0][np.isnan(x[:group])] == -127  # NaN -> -127 (formats.h), not +127
        if ng > 2 and group == 256:
            assert want[1][2] > 0  # first of +-5 is -5: d = 1 / (-127 / -5)
