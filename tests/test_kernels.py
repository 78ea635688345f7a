"""GEMV / GEMM against a float64 numpy reference, and every ISA variant against scalar."""
import os

import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit

KERNEL_FORMATS = ["tq1_0", "tq2_0", "i2_s", "q1_0", "q2_0", "pq2_0", "ptq1_0", "q8_0"]
ALL_FORMATS = KERNEL_FORMATS + ["f16", "bf16", "f32"]
FLOAT_FORMATS = ("f16", "bf16", "f32")
VARIANTS = lb.isa_supported()



def act_group(fmt):
    return _lowbit.act_group(lb.format_info(fmt).type_id)


def p2_scale(amax):
    """I2_S's activation scale: the smallest power of two >= 2^-126 with 127 * d >= amax (0 for 0)."""
    if amax == 0:
        return np.float32(0)
    m, e = np.frexp(np.float64(amax) / 127)  # amax / 127 = m * 2^e, m in [0.5, 1)
    return np.float32(np.ldexp(1.0, max(e - 1 if m == 0.5 else e, -126)))


def s8_inv(amax):
    """I2_S's default inverse activation scale, bitnet.cpp's: 127 / max(amax, 1e-5) in double."""
    return np.float32(127.0 / max(float(amax), 1e-5))


def act_rule(fmt):
    """The rounding rule the library uses for a weight type (lowbit_act_rule_of_type)."""
    if fmt in ("pq2_0", "ptq1_0"):
        return "q8_k"  # Q8_K's rule per 128-group (their weight block)
    if fmt == "i2_s":
        return "s8"  # bitnet.cpp's (lb.set_i2s_act_scale("pow2"): "p2")
    return RULE_OF_GROUP.get(act_group(fmt), "a8")


# lowbit_quantize_act's group -> rule mapping
RULE_OF_GROUP = {256: "q8_k", 32: "q8_0", 128: "p2"}


def emulate_a8(x, group, rule=None):
    """numpy model of the activation quantizer: what the kernels multiply with, in float64.

    rule (default: the group's, RULE_OF_GROUP): "q8_k" llama.cpp's Q8_K (iscale = -127 / the
    element of largest |x|, round half to even, d = 1 / iscale), "q8_0" Q8_0 as ggml rounds it on
    x86 (127 / amax, half to even, d = amax / 127 rounded to fp16), "p2" (p2_scale of the whole
    vector, half away from zero), "s8" bitnet.cpp's (s8_inv of the whole vector, half away from
    zero, d = 1 / that), "a8" pylowbit's A8 (127 / amax, half away from zero, fp32
    d = amax / 127)."""
    rule = rule or RULE_OF_GROUP.get(group, "a8")
    xs = x.reshape(-1, group).astype(np.float32)
    ax = np.abs(xs)
    amax = ax.max(axis=1).astype(np.float32)
    nz = amax > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "p2":  # P2 (I2_S): one power-of-two scale for the whole vector
            d = np.full(len(xs), p2_scale(ax.max()), np.float32)
            inv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, 1), 0).astype(np.float32)
        elif rule == "s8":  # S8 (I2_S, bitnet.cpp's): one scale 127 / max|x| for the whole vector
            inv = np.full(len(xs), s8_inv(ax.max()), np.float32)
            d = (np.float32(1) / inv).astype(np.float32)
        elif rule == "q8_k":
            smax = xs[np.arange(len(xs)), np.argmax(ax == amax[:, None], axis=1)]
            inv = np.where(nz, np.float32(-127) / np.where(nz, smax, 1), 0).astype(np.float32)
            d = np.where(nz, np.float32(1) / np.where(nz, inv, 1), 0).astype(np.float32)
        else:
            d = (amax / np.float32(127)).astype(np.float32)
            ok = nz if rule == "q8_0" else d > 0
            inv = np.where(ok, np.float32(127) / np.where(nz, amax, 1), 0).astype(np.float32)
            if rule == "q8_0":
                d = d.astype(np.float16).astype(np.float32)
    prod = np.clip((xs * inv[:, None]).astype(np.float32), -127, 127)
    if rule in ("q8_0", "q8_k"):
        q = np.rint(prod)  # half to even
    else:  # roundf (half away from zero); floor(|p| + 0.5) would round 0.49999997 up
        t = np.trunc(prod)
        q = t + np.where(np.abs(prod - t) >= 0.5, np.sign(prod), 0)
    return (q * d[:, None].astype(np.float64)).reshape(-1), q.astype(np.int8).reshape(-1), d


def emulate_for(x, fmt):
    """emulate_a8 as the library quantizes for weight format fmt (quantize_act_for)."""
    return emulate_a8(x, act_group(fmt), act_rule(fmt))


def test_activation_groups_follow_llama_cpp():
    """TQ1_0/TQ2_0 pair with Q8_K (256), the Q8_0 family with Q8_0 (32); I2_S keeps 128; PQ2_0 /
    PTQ1_0 take 128-groups (their weight block, Q8_K's rule)."""
    want = {"tq1_0": 256, "tq2_0": 256, "q1_0": 32, "q2_0": 32, "pq2_0": 128, "ptq1_0": 128,
            "q8_0": 32, "i2_s": 128}
    assert {f: act_group(f) for f in want} == want


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
    for group in (32, 64, 128, 256):
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
        if fmt in FLOAT_FORMATS:
            xa = x.astype(np.float64)
        else:
            xa, _, _ = emulate_for(x, fmt)
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


@pytest.mark.parametrize("variant", VARIANTS)
def test_i2_s_p2_activation_rule(variant, isa):
    """I2_S's 128-groups share one power-of-two scale per vector (formats.h, P2), edges included:
    an all-zero vector (d = 0), a tiny one (d = 2^-126), amax exactly 127 * 2^k, inf (code 127)."""
    isa(variant)
    x = np.random.default_rng(5).standard_normal(4 * 128).astype(np.float32)
    q, d, s = lb.quantize_act(x, 128)
    assert len(set(d.tolist())) == 1 and d[0] == p2_scale(np.abs(x).max())
    assert np.frexp(d[0])[0] == 0.5 and np.abs(q).max() > 63  # a power of two, no coarser than needed
    for v, want in ((0.0, 0.0), (1e-40, 2.0 ** -126), (127.0, 1.0), (127.00002, 2.0), (508.0, 4.0)):
        y = np.zeros(256, np.float32)
        y[3] = v
        q, d, s = lb.quantize_act(y, 128)
        assert list(d) == [want, want] and q[3] == (np.floor(np.float32(v) / want + 0.5) if want else 0)
    y = np.ones(256, np.float32)
    y[5], y[6] = np.inf, np.nan
    q, d, s = lb.quantize_act(y, 128)
    assert q[5] == 127 and q[6] == -127 and q[0] == 0  # inf clamps, NaN -> -127, 1 / 2^122 -> 0


def test_i2_s_row_sums_only_with_p2_scales(isa):
    """The AVX2 I2_S GEMV adds a row's int sums and does one float step only where that is exact
    (equal power-of-two scales): other given scales (gemv_act) take the per-group path, so every
    case still equals scalar bit for bit."""
    if "avx2" not in VARIANTS:
        pytest.skip("no AVX2")
    rng = np.random.default_rng(6)
    rows, cols = 64, 2560
    w = weights("i2_s", rows, cols, seed=3).pack()
    q = rng.integers(-127, 128, cols).astype(np.int8)
    s = q.reshape(-1, 128).sum(axis=1, dtype=np.int32)
    ng = cols // 128
    for d in (np.full(ng, 2.0 ** -7), np.full(ng, 0.1), np.linspace(0.01, 0.02, ng),
              np.full(ng, 2.0 ** 110), np.where(np.arange(ng) % 2, 2.0 ** -7, 2.0 ** -6)):
        d = d.astype(np.float32)
        outs = {}
        for variant in ("scalar", "avx2"):
            isa(variant)
            outs[variant] = np.empty(rows, np.float32)
            w._m.gemv_act(q, d, s, outs[variant], 1)
        np.testing.assert_array_equal(outs["avx2"], outs["scalar"])


# ---- bit-exactness and the packed (row-interleaved) layout -------------------------------------

# Variants whose kernels keep the scalar spec's float order too (not only exact integer sums), so
# their quantized-format results equal scalar bit for bit.
BIT_EXACT_VARIANTS = {"scalar", "avx2", "avx512vnni"}
_SCALE_AT = {"tq1_0": (54, 52), "tq2_0": (66, 64), "q1_0": (18, 0), "q2_0": (18, 0),
             "pq2_0": (34, 0), "ptq1_0": (28, 26), "q8_0": (34, 0)}


def base3_dense(fmt, variant):
    """Whether `variant` packs `fmt` in the dense base-3 layout (PYLOWBIT_BASE3 unset): TQ1_0 /
    PTQ1_0 on avx512vnni where the CPU has AVX-512 VBMI."""
    if fmt not in ("tq1_0", "ptq1_0") or variant != "avx512vnni":
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512vbmi " in line + " " for line in f)
    except OSError:
        return False


def base3_units(fmt, cols):
    """32-byte units of a dense base-3 row (internal.h's rule, counted here independently): every
    5 groups of S = group / 32 slices take S units, the last ng % 5 groups S / 4 units each."""
    group = 256 if fmt == "tq1_0" else 128
    s, ng = group // 32, cols // group
    return ng // 5 * s + ng % 5 * (s // 4)


def random_code_weights(fmt, rows, cols, seed=0):
    """Random code bytes (every code value, incl. 2-bit code 3 and Q8_0 -128) with sane scales."""
    rng = np.random.default_rng(seed)
    n = lb.tensor_nbytes(fmt, rows * cols)
    data = rng.integers(0, 256, n, dtype=np.uint8)
    if fmt == "i2_s":
        data[n - 32:n - 28] = np.frombuffer(np.float32(0.75).tobytes(), np.uint8)
    else:
        size, at = _SCALE_AT[fmt]
        blocks = data.reshape(-1, size)
        d = rng.uniform(0.25, 2, blocks.shape[0]).astype(np.float16)
        blocks[:, at:at + 2] = d.view(np.uint8).reshape(-1, 2)
    return lb.QTensor(data, fmt, (rows, cols))


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v in BIT_EXACT_VARIANTS])
@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_bit_exact_variants_equal_scalar(fmt, variant, isa):
    rng = np.random.default_rng(5)
    for rows, cols in shapes(fmt) + [(67, 2560)]:
        for w in (weights(fmt, rows, cols, seed=rows), random_code_weights(fmt, rows, cols, rows)):
            x = rng.standard_normal((6, cols)).astype(np.float32)
            isa("scalar")
            ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
            isa(variant)
            np.testing.assert_array_equal(w.gemv(x[0]), ref_v)
            np.testing.assert_array_equal(w.gemm(x), ref_m)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_packed_matches_scalar_file_layout(fmt, variant, isa):
    """The repacked layout gives the file layout's results (bit for bit for repacked formats on
    bit-exact variants), for GEMV and GEMM, on 1 and 2 threads."""
    rng = np.random.default_rng(6)
    cases = shapes(fmt) + [(67, 2560)]
    if variant in BIT_EXACT_VARIANTS and fmt in ("tq2_0", "pq2_0"):
        cases.append((2052, 4096))  # > 2 MB packed: 2 MB-aligned, huge pages asked for (repack.c)
    for k, (rows, cols) in enumerate(cases):
        ws = [weights(fmt, rows, cols, seed=rows)]
        if fmt in _SCALE_AT or fmt == "i2_s":
            ws.append(random_code_weights(fmt, rows, cols, rows))
        for w in ws:
            x = rng.standard_normal((5, cols)).astype(np.float32)
            isa("scalar")
            ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
            isa(variant)
            p = w.pack()
            assert p.shape == w.shape and p.fmt == w.fmt
            assert (p.data is None) == p.is_packed  # repacked: the file bytes are let go
            packs = fmt not in ("q8_0", "q1_0", *FLOAT_FORMATS)
            assert p.is_packed == packs
            if packs:
                # codes: 2 bits a weight in 32-byte chunks of 128 (rows padded to 4), or the base-3
                # formats' dense units where the variant decodes them; fp16 scales
                blk = lb.format_info(fmt).block_size
                dense = base3_dense(fmt, variant)
                rows4 = -(-rows // 16) * 16 if dense else -(-rows // 4) * 4  # dense: sets of 16
                scales = 0 if fmt == "i2_s" else rows4 * (cols // blk) * 2
                units = base3_units(fmt, cols) if dense else -(-cols // 128)
                assert p.packed_nbytes == rows4 * units * 32 + scales
            for threads in (1, 2):
                yv, ym = p.gemv(x[0], threads=threads), p.gemm(x, threads=threads)
                if (packs or fmt in FLOAT_FORMATS) and variant in BIT_EXACT_VARIANTS:
                    np.testing.assert_array_equal(yv, ref_v)
                    np.testing.assert_array_equal(ym, ref_m)
                else:
                    tol = np.abs(w.dequantize()).astype(np.float64) @ np.abs(x.T) * 1e-6 + 1e-30
                    assert np.all(np.abs(yv - ref_v) <= tol[:, 0])
                    assert np.all(np.abs(ym - ref_m) <= tol.T)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["q2_0", "pq2_0", "ptq1_0"])
def test_packed_group32_sums_at_their_bound(fmt, variant, isa):
    """Every weight at its largest code against activation codes all +127 or all -127: the
    group-32 (Q2_0) and group-128 (PQ2_0, PTQ1_0) GEMVs' int16 partial sums at their bound (AVX2
    keeps planes 1 and 3 as 4x codes in int16 lanes: an overflow there would show).  Rows 4..12:
    pairs of row groups and a lone one."""
    cols = 1024 + 64 if fmt == "q2_0" else 1024  # Q2_0: a last half chunk too
    for rows in (4, 8, 12):
        if fmt == "ptq1_0":  # base-3: +1 is the top code
            w = lb.quantize(np.ones((rows, cols), np.float32), fmt)
        else:
            size, at = _SCALE_AT[fmt]
            data = np.full(lb.tensor_nbytes(fmt, rows * cols), 0xFF, np.uint8)  # code 3
            data.reshape(-1, size)[:, at:at + 2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
            w = lb.QTensor(data, fmt, (rows, cols))
        wd = w.dequantize().astype(np.float64)
        assert np.all(wd == wd.max()) and wd.max() > 0
        for sign in (1.0, -1.0):
            x = np.full(cols, sign, np.float32)
            isa("scalar")
            ref = w.gemv(x)
            isa(variant)
            y = w.pack().gemv(x)
            want = wd @ emulate_for(x, fmt)[0]  # exact: every activation code is +-127
            np.testing.assert_allclose(y, want, rtol=1e-6)
            if variant in BIT_EXACT_VARIANTS:
                np.testing.assert_array_equal(y, ref)


def test_packed_outlives_its_source():
    w = weights("tq2_0", 9, 512)
    x = np.random.default_rng(7).standard_normal(512).astype(np.float32)
    ref = w.gemv(x)
    p = lb.QTensor(w.data.copy(), "tq2_0", w.shape).pack()
    assert p.data is None and p.nbytes == p.packed_nbytes
    with pytest.raises(ValueError, match="keep_source"):
        p.dequantize()
    np.testing.assert_array_equal(w.pack(keep_source=True).dequantize(), w.dequantize())
    import gc
    gc.collect()
    np.testing.assert_array_equal(p.gemv(x), ref)
    q8 = lb.QTensor(weights("q8_0", 9, 512).data.copy(), "q8_0", (9, 512))
    ref8 = q8.gemv(x)
    p8 = q8.pack()  # borrows the bytes: must keep them alive
    del q8
    gc.collect()
    np.testing.assert_array_equal(p8.gemv(x), ref8)


@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_row_and_column_tiles(threads):
    """Few rows and a batch of 64: the work is split by columns too; every column is the GEMV."""
    rng = np.random.default_rng(8)
    for fmt in ("tq2_0", "q2_0"):
        w = weights(fmt, 70, 512)
        x = rng.standard_normal((64, 512)).astype(np.float32)
        for m in (w, w.pack()):
            y = m.gemm(x, threads=threads)
            for b in (0, 1, 31, 62, 63):
                np.testing.assert_array_equal(y[b], m.gemv(x[b], threads=1))


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


@pytest.mark.parametrize("variant", VARIANTS)
def test_stream_read_reads_every_word(variant, isa):
    """The bandwidth probe returns the sum of the 64-bit words (mod 2^64) in every variant, whatever
    the thread count, so it reads all of them: several pool tasks and a last partial 128 bytes."""
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**64, (3 << 20) // 8 + 8, dtype=np.uint64)  # 3 MB + 64 bytes
    want = int(words.sum(dtype=np.uint64))
    buf = words.view(np.uint8)
    isa(variant)
    for threads in (1, 2):
        assert _lowbit.stream_read(buf, threads) == want
        assert _lowbit.stream_read(buf[:-64], threads) == int(words[:-8].sum(dtype=np.uint64))


def test_gemm_into_equals_gemm_and_checks_shapes():
    """The decoder's unchecked-in-Python path: same numbers as gemm, bad shapes still refused in C."""
    rng = np.random.default_rng(5)
    w = lb.quantize(rng.standard_normal((40, 256)).astype(np.float32), "tq2_0")
    x = rng.standard_normal((3, 256)).astype(np.float32)
    for m in (w, w.pack()):
        np.testing.assert_array_equal(m.gemm_into(x, np.empty((3, 40), np.float32)), m.gemm(x))
        with pytest.raises(ValueError, match="columns"):
            m.gemm_into(np.ascontiguousarray(x[:, :128]), np.empty((3, 40), np.float32))
        with pytest.raises(ValueError, match="out has shape"):
            m.gemm_into(x, np.empty((3, 41), np.float32))


# ---- ggml's Q5_0 / Q4_K / Q6_K (read from llama.cpp's files, multiplied in place) ---------------

GGML_FORMATS = ["q5_0", "q4_k", "q6_k"]
# fp16 scales to make sane: byte offsets in the block (Q4_K: d and dmin)
_GGML_SCALES_AT = {"q5_0": (22, [0]), "q4_k": (144, [0, 2]), "q6_k": (210, [208])}


def ggml_weights(fmt, rows, cols, seed=0):
    """Random bytes (every code, every 6-bit scale / min, every int8 Q6_K scale) with finite fp16
    scales: the layouts are checked against gguf-py's decoder, which needs no quantizer."""
    rng = np.random.default_rng(seed)
    size, at = _GGML_SCALES_AT[fmt]
    data = rng.integers(0, 256, lb.tensor_nbytes(fmt, rows * cols), dtype=np.uint8)
    blocks = data.reshape(-1, size)
    for o in at:
        d = (rng.uniform(0.25, 2, blocks.shape[0]) * rng.choice([-1, 1], blocks.shape[0]) * 1e-2)
        blocks[:, o:o + 2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return lb.QTensor(data, fmt, (rows, cols))


def test_ggml_formats_are_known_with_llama_cpp_activation_groups():
    assert {f: (lb.format_info(f).type_id, lb.format_info(f).block_size, lb.format_info(f).type_size)
            for f in GGML_FORMATS} == {"q5_0": (6, 32, 22), "q4_k": (12, 256, 144), "q6_k": (14, 256, 210)}
    assert {f: act_group(f) for f in GGML_FORMATS} == {"q5_0": 32, "q4_k": 256, "q6_k": 256}


@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_dequantize_matches_gguf_bit_exact(fmt):
    from gguf import GGMLQuantizationType as T
    from gguf import quants as gq

    w = ggml_weights(fmt, 7, 1024, seed=1)
    ref = gq.dequantize(w.data.reshape(7, -1), T[fmt.upper()]).reshape(7, 1024)
    np.testing.assert_array_equal(w.dequantize(), ref)


@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_gemv_matches_float64_dot_of_gguf_decode(fmt):
    """The kernels against gguf-py's dequantize times the emulated activations, in float64."""
    from gguf import GGMLQuantizationType as T
    from gguf import quants as gq

    rng = np.random.default_rng(2)
    for rows, cols in [(1, 256), (5, 512), (33, 2048), (70, 256 * 3)]:
        w = ggml_weights(fmt, rows, cols, seed=rows)
        wd = gq.dequantize(w.data.reshape(rows, -1), T[fmt.upper()]).astype(np.float64)
        x = rng.standard_normal((3, cols)).astype(np.float32)
        for b in range(3):
            xa, _, _ = emulate_for(x[b], fmt)
            ref = wd.reshape(rows, cols) @ xa
            scale = np.abs(wd.reshape(rows, cols)) @ np.abs(xa) + 1e-30
            assert np.max(np.abs(w.gemv(x[b]) - ref) / scale) < 2e-6, (rows, cols)
            assert np.max(np.abs(w.gemm(x)[b] - ref) / scale) < 2e-6, (rows, cols)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_every_variant_equals_scalar_bit_exact(fmt, variant, isa):
    """Q5_0 / Q4_K / Q6_K keep the reference's float order in every variant (NEON and dotprod
    run the reference itself), so results are bit-identical; packing borrows the file bytes."""
    rng = np.random.default_rng(5)
    for rows, cols in [(1, 256), (3, 768), (17, 1280), (65, 512), (67, 2560)]:
        w = ggml_weights(fmt, rows, cols, seed=rows)
        x = (rng.standard_normal((6, cols)) * rng.choice([1e-3, 1, 50], (6, cols))).astype(np.float32)
        isa("scalar")
        ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
        isa(variant)
        p = w.pack()
        assert not p.is_packed and p.data is w.data  # borrowed, computed in place
        for threads in (1, 2):
            np.testing.assert_array_equal(w.gemv(x[0], threads=threads), ref_v)
            np.testing.assert_array_equal(w.gemm(x, threads=threads), ref_m)
            np.testing.assert_array_equal(p.gemm(x, threads=threads), ref_m)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["q5_0", "q8_0", "q4_k", "q6_k"])
def test_file_kernels_long_rows_equal_scalar(fmt, variant, isa):
    """Rows longer than the VNNI kernels' activation-table windows (the accumulators carry across
    windows through the output), an odd number of 32-blocks, short row and activation tiles."""
    cols = 8192 + (96 if fmt in ("q5_0", "q8_0") else 512)
    w = (ggml_weights if fmt in GGML_FORMATS else random_code_weights)(fmt, 9, cols, seed=3)
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((10, cols)) * rng.choice([1e-3, 1, 50], (10, cols))).astype(np.float32)
    isa("scalar")
    ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
    isa(variant)
    np.testing.assert_array_equal(w.gemv(x[0]), ref_v)
    np.testing.assert_array_equal(w.gemm(x), ref_m)


@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_formats_refuse_malformed_sizes_and_quantize(fmt):
    info = lb.format_info(fmt)
    w = ggml_weights(fmt, 2, 512)
    with pytest.raises(ValueError, match="needs"):
        lb.QTensor(w.data[:-1], fmt, (2, 512))
    with pytest.raises(ValueError, match="multiple of the block"):
        lb.QTensor(w.data, fmt, (2 * 512 // (info.block_size // 2), info.block_size // 2))
    with pytest.raises(ValueError, match="columns|shape"):
        w.gemv(np.zeros(256, np.float32))
    with pytest.raises(ValueError, match="does not quantize"):
        lb.quantize(np.zeros(512, np.float32), fmt)
    with pytest.raises(ValueError, match="unsupported"):  # the C library refuses it too
        _lowbit.quantize(np.zeros(512, np.float32), info.type_id)


# ---- every kernel of the list (native/src/kernel_list.inc), one test each ---------------------
#
# The test ids are the kernels' names, taken from the C list: an entry added there is tested here,
# one removed drops out.  prefer_kernel makes the kernel win wherever it fits, so kernels this CPU
# would not pick (a vendor twin, a general kernel listed after a specialised one) run too.

USABLE = [v for v in VARIANTS if v in lb.isa_compiled()]
LISTED = [k for k in _lowbit.kernels() if k["isa"] in USABLE]
PACKED_FORMATS = [f for f in KERNEL_FORMATS
                  if _lowbit.kernel_selected("scalar", f, "packed", "gemv", 256)]


@pytest.fixture
def prefer():
    """_lowbit.prefer_kernel, with the list's own order restored after the test."""
    yield _lowbit.prefer_kernel
    _lowbit.prefer_kernel(None)


def kernel_weights(fmt, rows, cols, seed):
    if fmt in GGML_FORMATS:
        return ggml_weights(fmt, rows, cols, seed)
    if fmt in _SCALE_AT or fmt == "i2_s":
        return random_code_weights(fmt, rows, cols, seed)
    return weights(fmt, rows, cols, seed)


def pack_in_layout(w, layout):
    """w packed in `layout` ("packed": 2-bit codes, "base3": dense) whatever the variant would pick."""
    old = os.environ.get("PYLOWBIT_BASE3")
    os.environ["PYLOWBIT_BASE3"] = "1" if layout == "base3" else "0"
    try:
        return w.pack()
    finally:
        if old is None:
            del os.environ["PYLOWBIT_BASE3"]
        else:
            os.environ["PYLOWBIT_BASE3"] = old


def check_weight_kernel(k, isa):
    """GEMV / paired GEMV / GEMM cases the kernel runs, against the scalar file layout; how many."""
    fmts = [k["fmt"]] if k["fmt"] else PACKED_FORMATS
    batch = 5 if k["role"] == "gemm" else 1
    rows = 200 if k["role"] == "pair_gemv" else 67  # pairs: more than two 64-row tiles
    rng = np.random.default_rng(11)
    reached = 0
    for fmt in fmts:
        unit = max(lb.format_info(fmt).block_size, act_group(fmt))
        for cols in [c * unit for c in (1, 2, 3, 5)] + [2560 // unit * unit]:
            if _lowbit.kernel_selected(k["isa"], fmt, k["layout"], k["role"], cols) != k["name"]:
                continue
            reached += 1
            w = kernel_weights(fmt, rows, cols, seed=cols)
            x = rng.standard_normal((batch, cols)).astype(np.float32)
            isa("scalar")
            ref = w.gemm(x)
            isa(k["isa"])
            m = w if k["layout"] == "file" else pack_in_layout(w, k["layout"])
            assert k["layout"] == "file" or m.is_packed
            y = m.gemm(x) if batch > 1 else m.gemv(x[0])[None]
            if k["isa"] == "scalar":  # the reference itself: against float64
                wd = w.dequantize().astype(np.float64)
                xa = np.stack([emulate_for(xb, fmt)[0] for xb in x])
                scale = np.abs(wd) @ np.abs(xa.T) + 1e-30
                assert np.max(np.abs(y.T - wd @ xa.T) / scale) < 2e-6
            elif k["isa"] in BIT_EXACT_VARIANTS:
                np.testing.assert_array_equal(y, ref)
            else:
                tol = np.abs(w.dequantize()).astype(np.float64) @ np.abs(x.T) * 1e-6 + 1e-30
                assert np.all(np.abs(y - ref) <= tol.T)
    return reached


def check_quantizer(k, isa):
    if _lowbit.kernel_selected(k["isa"], None, "none", "quantize") != k["name"]:
        return 0
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(2560) * rng.choice([1e-3, 1, 100], 2560)).astype(np.float32)
    outs = []
    for variant in ("scalar", k["isa"]):
        isa(variant)
        outs.append([lb.quantize_act(x, g) for g in (32, 64, 128, 256)]
                    + [lb.quantize_act_for(x, f) for f in KERNEL_FORMATS])
    for got, want in zip(*outs):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    for (q, d, _), g in zip(outs[1], (32, 64, 128, 256)):  # and the numpy model
        _, q_ref, d_ref = emulate_a8(x, g)
        np.testing.assert_array_equal(q, q_ref)
        np.testing.assert_array_equal(d, d_ref)
    return len(outs[0])


def check_float_gemv(k, isa):
    if _lowbit.kernel_selected(k["isa"], k["fmt"], "file", "float_gemv") != k["name"]:
        return 0
    rng = np.random.default_rng(13)
    for cols in (1, 17, 256, 300):
        w = weights(k["fmt"], 9, cols, seed=cols)
        x = rng.standard_normal(cols).astype(np.float32)
        isa("scalar")
        ref = w.gemv(x)
        isa(k["isa"])
        y = w.gemv(x)
        np.testing.assert_array_equal(y, ref)
        wd = w.dequantize().astype(np.float64)
        assert np.all(np.abs(y - wd @ x) <= 1e-6 * (np.abs(wd) @ np.abs(x)) + 1e-30)
    return 4


def check_read_probe(k, isa):
    if _lowbit.kernel_selected(k["isa"], None, "none", "read") != k["name"]:
        return 0
    words = np.random.default_rng(14).integers(0, 2**64, (1 << 18) + 8, dtype=np.uint64)
    isa(k["isa"])
    assert _lowbit.stream_read(words.view(np.uint8), 1) == int(words.sum(dtype=np.uint64))
    return 1


@pytest.mark.parametrize("kernel", LISTED, ids=[k["name"] for k in LISTED])
def test_listed_kernel_matches_scalar(kernel, isa, prefer):
    prefer(kernel["name"])
    check = {"quantize": check_quantizer, "float_gemv": check_float_gemv,
             "read": check_read_probe}.get(kernel["role"], check_weight_kernel)
    assert check(kernel, isa) > 0, f"{kernel['name']} is listed but no case reaches it"


def test_kernel_list_names_each_kernel_once():
    names = [k["name"] for k in _lowbit.kernels()]
    assert len(names) == len(set(names))
    assert {k["isa"] for k in _lowbit.kernels()} == set(lb.isa_compiled())
    with pytest.raises(ValueError, match="no kernel named"):
        _lowbit.prefer_kernel("gemv_nonexistent_avx2")


def test_info_lists_every_kernel_and_the_ones_this_cpu_runs(capsys):
    from pylowbit.cli import main

    assert main(["info", "--kernels"]) == 0
    out = capsys.readouterr().out
    names = set(out.split())
    assert {k["name"] for k in _lowbit.kernels()} <= names
    usable = [v for v in lb.isa_supported() if v in lb.isa_compiled()]
    for fmt, layout, role in [("tq2_0", "packed", "gemv"), ("q8_0", "file", "gemv"), ("q2_0", "packed", "pair_gemv")]:
        row = next(line.split() for line in out.splitlines() if line.split()[:3] == [fmt, layout, role])
        assert row[3:] == [_lowbit.kernel_selected(v, fmt, layout, role, 2560) or "-" for v in usable]
    # no pairing without a pair kernel: the scalar variant has none
    assert _lowbit.kernel_selected("scalar", "tq2_0", "packed", "pair_gemv", 2560) is None
