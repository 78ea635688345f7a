"""GEMV / GEMM against a float64 numpy reference and every ISA variant against scalar; the weight
and activation helpers the other kernel tests import (test_bit_exact.py, test_kernel_list.py,
test_ggml_formats.py, test_act_rules.py...)."""

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


# ---- weights with every code value, and the packed layout's facts (tests: test_bit_exact.py) ---

# Variants whose kernels keep the scalar spec's float order too (not only exact integer sums), so
# their quantized-format results equal scalar bit for bit.  i8mm: its SMMLA GEMMs and the dotprod
# and neon kernels it falls back to.
BIT_EXACT_VARIANTS = {"scalar", "avx2", "avx512vnni", "avxvnni", "avxvnni_emulated", "i8mm"}


def scale_at(fmt):
    """(bytes a block, byte offset of its fp16 scale) of fmt: the C library's format facts table."""
    facts = _lowbit.type_facts(lb.format_info(fmt).type_id)
    return facts["block_bytes"], facts["scale_offset"]


# the formats whose blocks hold one fp16 scale each (I2_S: one fp32 scale in the tensor's tail)
BLOCK_SCALED = [f for f in KERNEL_FORMATS if scale_at(f)[1] >= 0]


def vbmi_cpu():
    """Whether the CPU has AVX-512 VBMI (/proc/cpuinfo; False where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512vbmi " in line + " " for line in f)
    except OSError:
        return False


def base3_dense(fmt, variant):
    """Whether `variant` packs `fmt` in the dense base-3 layout (PYLOWBIT_BASE3 unset): TQ1_0 /
    PTQ1_0 on avx512vnni where the CPU has AVX-512 VBMI (BASE3F only where asked for)."""
    return fmt in ("tq1_0", "ptq1_0") and variant == "avx512vnni" and vbmi_cpu()


def rows64_layout(fmt, variant):
    """Whether `variant` packs `fmt` in the rows64 layout (PYLOWBIT_ROWS64 unset): Q1_0 on the
    256-bit x86 variants and on avx512vnni with VBMI (without it, the variant's own 512-bit GEMV of
    the file layout comes before avx2's rows64 one); elsewhere (scalar, Arm) Q1_0 is not repacked."""
    if variant == "avx512vnni":
        return fmt == "q1_0" and vbmi_cpu()
    return fmt == "q1_0" and variant in ("avx2", "avxvnni", "avxvnni_emulated")


def rows16_layout(fmt, variant):
    """Whether `variant` packs `fmt` in the rows16 layout (PYLOWBIT_ROWS16 unset): on avx512vnni,
    Q2_0 (group 32) and the group-128 formats with one scale a group, PQ2_0 and PTQ1_0 (where it is
    not dense base-3); on AMD cores also the group-256 ones, TQ2_0 and TQ1_0 (the same); on the
    256-bit x86 variants every format but I2_S."""
    if variant in ("avx2", "avxvnni", "avxvnni_emulated"):
        return fmt in ("q2_0", "pq2_0", "ptq1_0", "tq2_0", "tq1_0")
    if variant != "avx512vnni":
        return False
    if fmt in ("tq2_0", "tq1_0") and not amd_cpu():
        return False
    return fmt in ("q2_0", "pq2_0", "tq2_0") or (
        fmt in ("ptq1_0", "tq1_0") and not base3_dense(fmt, variant))


def q8rows_layout(fmt, variant):
    """Whether `variant` packs `fmt` in the q8rows layout (PYLOWBIT_Q8ROWS unset): Q8_0 on
    avx512vnni, the variant with a GEMV for it; elsewhere Q8_0 is not repacked."""
    return fmt == "q8_0" and variant == "avx512vnni"


def amd_cpu():
    """An AMD x86 core (the kernel list's AMD tuning), read from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("vendor_id") and "AuthenticAMD" in line for line in f)
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
        size, at = scale_at(fmt)
        blocks = data.reshape(-1, size)
        d = rng.uniform(0.25, 2, blocks.shape[0]).astype(np.float16)
        blocks[:, at:at + 2] = d.view(np.uint8).reshape(-1, 2)
    return lb.QTensor(data, fmt, (rows, cols))


# ---- ggml's Q5_0 / Q4_K / Q6_K weights (tests: test_ggml_formats.py) -----------------------------

GGML_FORMATS = ["q5_0", "q4_k", "q6_k"]


def ggml_scales_at(fmt):
    """(bytes a block, byte offsets of its fp16 scales: Q4_K's d and dmin) from the facts table."""
    facts = _lowbit.type_facts(lb.format_info(fmt).type_id)
    return facts["block_bytes"], [o for o in (facts["scale_offset"], facts["scale2_offset"]) if o >= 0]


def ggml_weights(fmt, rows, cols, seed=0):
    """Random bytes (every code, every 6-bit scale / min, every int8 Q6_K scale) with finite fp16
    scales: the layouts are checked against gguf-py's decoder, which needs no quantizer."""
    rng = np.random.default_rng(seed)
    size, at = ggml_scales_at(fmt)
    data = rng.integers(0, 256, lb.tensor_nbytes(fmt, rows * cols), dtype=np.uint8)
    blocks = data.reshape(-1, size)
    for o in at:
        d = (rng.uniform(0.25, 2, blocks.shape[0]) * rng.choice([-1, 1], blocks.shape[0]) * 1e-2)
        blocks[:, o:o + 2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return lb.QTensor(data, fmt, (rows, cols))
