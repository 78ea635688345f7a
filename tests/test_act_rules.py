"""Activation rules per weight type: PQ2_0 / PTQ1_0 take 128-groups with Q8_K's rounding (their
weight block; I2_S keeps 128 with one scale per vector, bitnet.cpp's or P2), quantize_act_for, and the group-128 packed GEMV (AVX2:
packed_gemv128, two chunks per reduction) against scalar, bit for bit, at its edges."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit.model import Model
from pylowbit.model.synthetic import write_synthetic_model
from test_kernels import act_group, act_rule, emulate_a8, emulate_for, scale_at

VARIANTS = lb.isa_supported()
QUANT_FORMATS = ["tq1_0", "tq2_0", "i2_s", "q1_0", "q2_0", "pq2_0", "ptq1_0", "q8_0", "q5_0", "q4_k",
                 "q6_k"]


def hostile(rng, group, ngroups):
    """Groups that stress the rule: random scales, an all-zero group, +m / -m ties (the first one
    decides Q8_K's sign), exact halves at scale 1, a tiny group, a negative largest element."""
    x = (rng.standard_normal((ngroups, group)) * rng.choice([1e-3, 1, 100], (ngroups, 1))).astype(np.float32)
    x[1] = 0
    x[[2, 3, 6]] = rng.uniform(-1, 1, (3, group))
    x[2, 7], x[2, 70] = 5.0, -5.0
    x[3, 9], x[3, 20] = -5.0, 5.0
    x[4] = rng.integers(-126, 127, group) + np.float32(0.5)
    x[4, 3] = 127.0
    x[5] *= np.float32(1e-30)
    x[6, 11] = -50.0
    return x.reshape(-1)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["pq2_0", "ptq1_0"])
def test_q8_k_rule_at_128_matches_numpy(fmt, variant, isa):
    """Q8_K's rule per 128-group: iscale = -127 / (first element of largest |x|), q = rint(iscale x),
    d = 1 / iscale in fp32, all-zero group d = 0 -- bit for bit the numpy model, in every variant,
    for group counts around the SIMD quantizers' 8-group batches."""
    isa(variant)
    rng = np.random.default_rng(11)
    assert act_group(fmt) == 128 and act_rule(fmt) == "q8_k"
    for ngroups in (7, 8, 9, 17):
        x = hostile(rng, 128, ngroups)
        q, d, s = lb.quantize_act_for(x, fmt)
        _, q_ref, d_ref = emulate_a8(x, 128, "q8_k")
        np.testing.assert_array_equal(q, q_ref)
        np.testing.assert_array_equal(d, d_ref)
        np.testing.assert_array_equal(s, q.reshape(-1, 128).sum(axis=1, dtype=np.int32))
        assert d[1] == 0 and not q[128:256].any()  # the all-zero group
        # +-5 ties: the first one gets -127 and sets the sign of d; a negative largest: d > 0
        assert (q[2 * 128 + 7], q[2 * 128 + 70], q[3 * 128 + 9], q[3 * 128 + 20]) == (-127, 127, -127, 127)
        assert d[2] < 0 < d[3] and d[6] > 0 and q[6 * 128 + 11] == -127


@pytest.mark.parametrize("variant", VARIANTS)
def test_quantize_act_for_every_type(variant, isa):
    """quantize_act_for(x, fmt) is the library's own quantization for the type (its group and rule,
    emulated in numpy); it equals quantize_act(x, group) wherever the group alone picks the same
    rule, and differs from it for PQ2_0 / PTQ1_0 and I2_S (128 alone means P2, I2_S's power-of-two
    option; I2_S takes bitnet.cpp's S8 by default)."""
    isa(variant)
    rng = np.random.default_rng(12)
    x = hostile(rng, 256, 9)
    for fmt in QUANT_FORMATS:
        q, d, s = lb.quantize_act_for(x, fmt)
        _, q_ref, d_ref = emulate_for(x, fmt)
        np.testing.assert_array_equal(q, q_ref, err_msg=fmt)
        np.testing.assert_array_equal(d, d_ref, err_msg=fmt)
        by_group = lb.quantize_act(x, act_group(fmt))
        same = all(np.array_equal(a, b) for a, b in zip((q, d, s), by_group))
        assert same == (fmt not in ("pq2_0", "ptq1_0", "i2_s")), fmt


def test_quantize_act_for_refuses_bad_input():
    with pytest.raises(ValueError, match="unsupported tensor type"):
        lb.quantize_act_for(np.ones(256, np.float32), "f32")
    with pytest.raises(ValueError, match="unsupported tensor type"):
        lb.quantize_act_for(np.zeros(0, np.float32), "f16")
    with pytest.raises(ValueError, match="multiple of the group size 128"):
        lb.quantize_act_for(np.ones(96, np.float32), "pq2_0")
    with pytest.raises(ValueError, match="1-D"):
        lb.quantize_act_for(np.ones((2, 128), np.float32), "pq2_0")
    with pytest.raises(ValueError, match="unknown format"):
        lb.quantize_act_for(np.ones(128, np.float32), "nope")
    q, d, s = lb.quantize_act_for(np.zeros(0, np.float32), "pq2_0")
    assert q.shape == d.shape == s.shape == (0,)


def _max_code_weights(fmt, rows, cols):
    """Every weight at its largest code (PQ2_0: code 3 = +2, PTQ1_0: +1), random fp16 scales."""
    rng = np.random.default_rng(rows * 7 + cols)
    if fmt == "ptq1_0":
        return lb.quantize(np.ones((rows, cols), np.float32) * rng.uniform(0.5, 2.0, (rows, 1)).astype(np.float32), fmt)
    size, at = scale_at(fmt)
    data = np.full(lb.tensor_nbytes(fmt, rows * cols), 0xFF, np.uint8).reshape(-1, size)
    data[:, at:at + 2] = rng.uniform(0.01, 2.0, len(data)).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return lb.QTensor(data.reshape(-1), fmt, (rows, cols))


@pytest.mark.parametrize("fmt", ["pq2_0", "ptq1_0"])
def test_group128_packed_gemv_equals_scalar(fmt, isa):
    """The packed group-128 GEMV of every variant against scalar, bit for bit: row counts off the
    8-row step and the 64-row task, odd chunk counts (a last lone chunk), random activations with
    zero groups, and the int16 bounds (largest codes against activation codes all +127 / -127)."""
    rng = np.random.default_rng(13)
    for rows, nch in ((1, 1), (3, 2), (5, 3), (13, 5), (70, 20), (67, 9)):
        cols = 128 * nch
        for bound in (False, True):
            w = _max_code_weights(fmt, rows, cols) if bound else \
                lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt)
            acts = []
            if bound:
                for v in (127, -127):
                    q = np.full(cols, v, np.int8)
                    acts.append((q, rng.uniform(1e-3, 1, nch).astype(np.float32),
                                 q.reshape(-1, 128).sum(axis=1, dtype=np.int32)))
            else:
                x = rng.standard_normal(cols).astype(np.float32)
                x.reshape(-1, 128)[::2] = 0  # every other group all zero: d = 0, codes 0
                acts.append(lb.quantize_act_for(x, fmt))
            for q, d, s in acts:
                outs = {}
                for variant in VARIANTS:
                    isa(variant)
                    pk = w.pack()
                    for threads in (1, 2):
                        y = np.full(rows, np.nan, np.float32)
                        pk._m.gemv_act(q, d, s, y, threads)
                        outs[(variant, threads)] = y
                ref = outs[("scalar", 1)]
                assert np.all(np.isfinite(ref))
                for key, y in outs.items():
                    np.testing.assert_array_equal(y, ref, err_msg=f"{fmt} {key} rows {rows} chunks {nch}")


@pytest.mark.parametrize("fmt", ["pq2_0", "ptq1_0"])
def test_group128_packed_gemv_matches_float64(fmt):
    """Through the library's own quantizer: the packed GEMV equals the float64 dot of the decoded
    weights with the emulated Q8_K-at-128 activations (to float32 accumulation error)."""
    rng = np.random.default_rng(14)
    rows, cols = 37, 128 * 7
    w = lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt)
    x = rng.standard_normal(cols).astype(np.float32)
    xa, _, _ = emulate_for(x, fmt)
    wd = w.dequantize().astype(np.float64)
    scale = np.abs(wd) @ np.abs(xa) + 1e-30
    for y in (w.gemv(x), w.pack().gemv(x)):
        assert np.max(np.abs(y - wd @ xa) / scale) < 2e-6


@pytest.mark.parametrize("fmt", ["pq2_0", "ptq1_0"])
def test_synthetic_model_same_logits_in_every_variant(tmp_path, fmt, isa):
    """A whole synthetic PQ2_0 / PTQ1_0 model (prompt through the packed GEMM, decode through the
    group-128 GEMV) gives the same logits in every variant; its agreement with the float64
    reference is test_model.test_logits_match_float64_reference."""
    p = write_synthetic_model(tmp_path / f"{fmt}.gguf", arch="llama", fmt=fmt, seed=7, embed_fmt="q8_0")
    tokens = np.random.default_rng(8).integers(0, 500, 24)
    runs = {}
    for variant in VARIANTS:
        isa(variant)
        m = Model(p, ctx=32, notice=None)
        prompt = m.forward(tokens, pos=0, logits="all")
        runs[variant] = np.vstack([prompt] + [m.forward([t])[None] for t in (7, 11, 13)])
    ref = runs.pop("scalar")
    assert runs
    for variant, logits in runs.items():
        assert np.array_equal(logits, ref), variant


@pytest.fixture
def i2s_scale():
    """lb.set_i2s_act_scale, with the default restored after the test."""
    before = lb.set_i2s_act_scale("bitnet")
    yield lb.set_i2s_act_scale
    lb.set_i2s_act_scale(before)


@pytest.mark.parametrize("variant", VARIANTS)
def test_i2_s_takes_bitnet_cpp_scale_and_pow2_on_request(variant, isa, i2s_scale):
    """I2_S's default: bitnet.cpp's quantize_row_i8_s, one inverse scale 127 / max(max|x|, 1e-5)
    for the whole vector (the quotient in double), codes rounded half away; "pow2" gives P2
    (quantize_act's group-128 rule) back.  Edges: a zero vector (floor 1e-5), a tiny one."""
    isa(variant)
    x = np.random.default_rng(7).standard_normal(6 * 128).astype(np.float32)
    x[300] = 3.0 * np.abs(x).max()  # the largest element in one group only: one scale anyway
    q, d, s = lb.quantize_act_for(x, "i2_s")
    inv = np.float32(127.0 / float(np.abs(x).max()))
    assert np.all(d == np.float32(1) / inv) and np.frexp(d[0])[0] != 0.5  # no power of two
    _, q_ref, _ = emulate_a8(x, 128, "s8")
    np.testing.assert_array_equal(q, q_ref)
    assert q[300] == 127 and np.array_equal(s, q.reshape(-1, 128).sum(axis=1))
    for v in (0.0, 1e-7):
        y = np.full(256, v, np.float32)
        q, d, s = lb.quantize_act_for(y, "i2_s")
        want = np.float32(127.0 / 1e-5)
        assert np.all(d == np.float32(1) / want) and np.all(q == np.round(np.float32(v) * want))
    assert i2s_scale("pow2") == "bitnet"
    by_group = lb.quantize_act(x, 128)
    assert all(np.array_equal(a, b) for a, b in zip(lb.quantize_act_for(x, "i2_s"), by_group))
    assert i2s_scale("bitnet") == "pow2"
    with pytest.raises(ValueError, match="I2_S activation scale"):
        i2s_scale("round")


@pytest.mark.parametrize("batch", [1, 5])
def test_i2_s_result_is_one_float_step_per_row_in_every_variant(batch, isa, i2s_scale):
    """With one scale d for the vector the I2_S result is (float)(row's int sum) * fl(d * tensor
    scale), bit for bit in every variant, file layout and packed, GEMV and GEMM: S8's d is no power
    of two, yet every variant takes the exact path (api.c hands the kernels d's power of two)."""
    rng = np.random.default_rng(8)
    rows, cols = 72, 1280
    w = lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), "i2_s")
    wf = w.dequantize()
    ts = np.float32(np.abs(wf).max())  # the tensor scale
    codes = np.rint(wf / ts)
    x = rng.standard_normal((batch, cols)).astype(np.float32)
    want = np.empty((batch, rows), np.float32)
    for b in range(batch):
        q, d, _ = lb.quantize_act_for(x[b], "i2_s")
        isum = (codes.astype(np.int64) @ q.astype(np.int64)).astype(np.float32)
        want[b] = isum * np.float32(d[0] * ts)
    packed = w.pack()
    for variant in VARIANTS:
        isa(variant)
        for m in (w, packed):
            got = m.gemm(x) if batch > 1 else m.gemv(x[0])[None]
            np.testing.assert_array_equal(got, want, err_msg=f"{variant} {type(m).__name__}")
