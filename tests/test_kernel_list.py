"""Every kernel of the C list (native/src/kernel_list.inc) against its scalar twin, one test
each, named after the kernel; and `pylowbit info --kernels` against the list."""
import os

import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit
from pylowbit import _ops as ops
from test_kernels import (
    BIT_EXACT_VARIANTS, BLOCK_SCALED, GGML_FORMATS, KERNEL_FORMATS, VARIANTS, act_group,
    emulate_a8, emulate_for, ggml_weights, random_code_weights, shapes, weights)

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
    if fmt in BLOCK_SCALED or fmt == "i2_s":
        return random_code_weights(fmt, rows, cols, seed)
    return weights(fmt, rows, cols, seed)


def pack_in_layout(w, layout):
    """w packed in `layout` ("packed": 2-bit codes in row groups of 4, "base3" / "base3f": dense,
    "rows16": 2-bit codes in 16-row sets, "rows64": Q1_0's bytes in 64-row tiles, "q8rows": Q8_0 in
    16-row sets) whatever the variant would pick."""
    env = {"PYLOWBIT_BASE3": "1" if layout == "base3" else "0",
           "PYLOWBIT_BASE3F": "1" if layout == "base3f" else "0",
           "PYLOWBIT_ROWS16": "1" if layout == "rows16" else "0",
           "PYLOWBIT_ROWS64": "1" if layout == "rows64" else "0",
           "PYLOWBIT_Q8ROWS": "1" if layout == "q8rows" else "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return w.pack()
    finally:
        for k, v in old.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


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


def check_fwht(k, isa):
    """Every block kind (powers of two in and out of cache, m * 2^k), both orders, f32 and f64:
    the entry's bits are the scalar variant's, and a sign that is not +-1 is refused."""
    if _lowbit.kernel_selected(k["isa"], None, "none", "fwht") != k["name"]:
        return 0
    rng = np.random.default_rng(15)
    cases = 0
    for block in (2, 16, 256, 1 << 15, 12, 20 * 8, 28 * 64):
        n = block if block > 1024 else 2 * block
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal((3, n)).astype(dtype)
            signs = rng.choice([-1.0, 1.0], n).astype(dtype)
            for order in ("signs-then-rotate", "rotate-then-signs"):
                got = []
                for v in ("scalar", k["isa"]):
                    isa(v)
                    got.append(lb.fwht(x, block=block, signs=signs, order=order))
                np.testing.assert_array_equal(got[1], got[0])
                cases += 1
            signs[-1] = 0.5
            with pytest.raises(ValueError):
                lb.fwht(x, block=block, signs=signs)
    return cases


def _op_attention(rng, T, H, Hkv, hd, vd, ctx, pos, window):
    q, k, v = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((T, H, hd), (T, Hkv, hd), (T, Hkv, vd)))
    kc, vc = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((Hkv, ctx, hd), (Hkv, ctx, vd)))
    return lambda: [ops.attention(q, k, v, kc.copy(), vc.copy(), pos, window, hd ** -0.5)]


def _op_gate_mul(act):
    def make(rng, n):
        gate, up = rng.uniform(-100, 100, n).astype(np.float32), rng.uniform(-2, 2, n).astype(np.float32)
        return lambda: [ops.act_mul(act, gate, up)]
    return make


def _op_rms_norm(rng, rows, n, with_w):
    x = rng.uniform(-3, 3, (rows, n)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, n).astype(np.float32) if with_w else None
    return lambda: [ops.rms_norm(x, w, 1e-5)]


def _op_gdn(rng, T, d, chunked):
    f = lambda *s, lo=-1, hi=1: rng.uniform(lo, hi, s).astype(np.float32)  # noqa: E731
    Hk, Hv, C, K = 2, 4, 37, 4
    x, w, cstate = f(T, C), f(C, K), f(C, K - 1)
    q, k, v = f(T, Hk, d, lo=-0.3, hi=0.3), f(T, Hk, d, lo=-0.3, hi=0.3), f(T, Hv, d)
    g, beta, state, z, nw = f(T, Hv, lo=-1, hi=0), f(T, Hv, lo=0), f(Hv, d, d), f(T, Hv, d), f(d)

    def run():
        cs, st = cstate.copy(), state.copy()
        return [ops.ssm_conv(x, w, cs), cs, ops.l2_norm(q, 1e-6),
                ops.gated_delta_rule(q, k, v, g, beta, st, threads=1, chunked=chunked), st,
                ops.gated_rms_norm_silu(v, nw, z, 1e-6), ops.sigmoid_mul(v, z)]
    return run


# per op (the "fmt" of a role-op entry): shapes with and without a SIMD tail
OP_CASES = {
    "attention": (_op_attention, [(1, 4, 2, 64, 64, 40, 30, 0), (5, 2, 1, 20, 12, 16, 3, 0),
                                  (3, 2, 2, 8, 8, 32, 20, 7), (9, 6, 3, 36, 36, 64, 40, 16),
                                  # query rows that share a key head run together (4, 2, 1 at a time)
                                  (3, 8, 2, 64, 32, 50, 40, 0), (2, 6, 2, 48, 80, 70, 33, 9),
                                  (1, 3, 3, 16, 16, 20, 17, 0), (4, 12, 2, 128, 128, 90, 70, 0)]),
    "silu_mul": (_op_gate_mul("silu"), [(0,), (1,), (7,), (9,), (33,), (1000,)]),
    "gelu_mul": (_op_gate_mul("gelu"), [(0,), (1,), (7,), (9,), (33,), (1000,)]),
    "rms_norm": (_op_rms_norm, [(1, 1, True), (3, 7, True), (2, 8, False), (1, 9, True), (4, 33, True),
                                (1, 1000, False), (2, 2560, True)]),
    "gdn": (_op_gdn, [(3, 16, False), (70, 16, True), (3, 128, False), (3, 12, False), (70, 36, True)]),
}


def check_op(k, isa):
    """The public op under the entry's variant gives the scalar variant's bits (outputs, states)."""
    if _lowbit.kernel_selected(k["isa"], k["fmt"], "none", "op") != k["name"]:
        return 0
    make, shapes = OP_CASES[k["fmt"]]
    for i, shape in enumerate(shapes):
        run = make(np.random.default_rng(16 + i), *shape)
        got = []
        for v in ("scalar", k["isa"]):
            isa(v)
            got.append(run())
        for a, b in zip(got[1], got[0]):
            np.testing.assert_array_equal(a, b)
    return len(shapes)


@pytest.mark.parametrize("kernel", LISTED, ids=[k["name"] for k in LISTED])
def test_listed_kernel_matches_scalar(kernel, isa, prefer):
    prefer(kernel["name"])
    check = {"quantize": check_quantizer, "float_gemv": check_float_gemv,
             "read": check_read_probe, "fwht": check_fwht,
             "op": check_op}.get(kernel["role"], check_weight_kernel)
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
        # the kernel that runs here (the active variant's), then each usable variant's
        assert row[3] == (_lowbit.kernel_selected(lb.isa_active(), fmt, layout, role, 2560) or "-")
        assert row[4:] == [_lowbit.kernel_selected(v, fmt, layout, role, 2560) or "-" for v in usable]
    # no pairing without a pair kernel: the scalar variant has none
    assert _lowbit.kernel_selected("scalar", "tq2_0", "packed", "pair_gemv", 2560) is None


def info_kernels_json(tmp_path, isa=None):
    """`pylowbit info --kernels --json` in a fresh process (PYLOWBIT_ISA=isa if given), parsed."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYLOWBIT_ISA"}
    if isa:
        env["PYLOWBIT_ISA"] = isa
    code = "from pylowbit.cli import main; main(['info', '--kernels', '--json'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path)  # the installed package, not a source tree in the working directory
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_info_json_names_the_kernel_each_format_and_role_runs(tmp_path):
    info = info_kernels_json(tmp_path)
    assert info["active"] == lb.isa_active() and info["supported"] == lb.isa_supported()
    listed = {k["name"]: k for k in _lowbit.kernels()}
    assert [k["name"] for k in info["kernels"]] == list(listed)
    sel = {(s["fmt"], s["layout"], s["role"]): s for s in info["selected"]}
    for fmt in ("tq1_0", "tq2_0", "i2_s", "q1_0", "q2_0", "pq2_0", "ptq1_0", "q8_0", "q4_k", "q6_k"):
        for role in ("gemv", "gemm"):
            s = sel[(fmt, "file", role)]
            # a kernel of the list, of a variant on the active one's chain, reading this format
            k = listed[s["kernel"]]
            assert k["role"] == role and k["layout"] == "file" and k["fmt"] == fmt
            assert k["isa"] in info["supported"]
            assert s["kernel"] == s["variants"][info["active"]]
            assert s["kernel"] == _lowbit.kernel_selected(info["active"], fmt, "file", role, 2560)
    assert sel[("tq2_0", "packed", "gemm")]["kernel"] in listed
    assert sel[(None, "none", "quantize")]["kernel"] in listed


def test_info_json_under_forced_scalar_names_the_reference_kernels(tmp_path):
    info = info_kernels_json(tmp_path, "scalar")
    assert info["active"] == "scalar"
    weight_roles = [s for s in info["selected"] if s["role"] in ("gemv", "gemm", "float_gemv")]
    assert weight_roles and all(s["kernel"].endswith("_ref") for s in weight_roles)
    # no pair kernel in the scalar variant
    assert all(s["kernel"] is None for s in info["selected"] if s["role"] == "pair_gemv")


def test_info_json_refuses_a_model():
    from pylowbit.cli import main

    with pytest.raises(SystemExit, match="--json"):
        main(["info", "--json", "-m", "model.gguf"])
