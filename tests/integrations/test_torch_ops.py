"""torch.ops.pylowbit: results against the numpy API, opcheck, torch.compile, torch.export, errors,
threads."""
import numpy as np
import pytest
import torch

import pylowbit as lb
import pylowbit.torch as pt
from pylowbit import _lowbit

ALL_FORMATS = ["i2_s", "tq2_0", "tq1_0", "ptq1_0", "q2_0", "pq2_0", "q1_0", "q8_0", "f16", "bf16", "f32"]
OPS = torch.ops.pylowbit


def _layer(fmt, out_f=64, in_f=256, bias=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    lin = torch.nn.Linear(in_f, out_f, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(out_f, in_f, generator=g))
    return lin, pt.Linear.from_linear(lin, fmt)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_gemm_equals_numpy_api(fmt):
    _, layer = _layer(fmt)
    x = torch.randn(5, 256)
    q = lb.QTensor(layer.weight.numpy(), fmt, (64, 256))
    np.testing.assert_array_equal(layer(x).numpy(), lb.gemm(q, x.numpy()))
    # one vector, and a leading batch shape
    np.testing.assert_array_equal(layer(x[0]).numpy(), lb.gemv(q, x[0].numpy()))
    assert layer(x.reshape(5, 1, 256)).shape == (5, 1, 64)


def test_gguf_quantize_formats_read_as_stored():
    # A decode-only llama.cpp format (Q4_K) goes in through from_gguf, bytes as they are.
    w = np.random.default_rng(1).standard_normal((32, 256)).astype(np.float32)
    q8 = lb.quantize(w, "q8_0")
    layer = pt.Linear.from_gguf(q8)
    assert layer.format == "q8_0" and torch.equal(layer.weight, torch.from_numpy(q8.data))
    x = torch.randn(2, 256)
    np.testing.assert_array_equal(layer(x).numpy(), lb.gemm(q8, x.numpy()))


def test_from_gguf_file_tensor(tmp_path):
    from pylowbit.gguf import GGUFFile, TensorSpec, write_gguf
    rng = np.random.default_rng(3)
    q = {f: lb.quantize(rng.standard_normal((16, 256)).astype(np.float32), f) for f in ("i2_s", "tq1_0")}
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"},
                      [TensorSpec(f"w.{f}", t.type_id, t.shape, t.data.tobytes()) for f, t in q.items()])
    x = torch.randn(3, 256)
    with GGUFFile(path) as gf:
        for f, t in q.items():
            layer = pt.Linear.from_gguf(gf.tensor(f"w.{f}"))
            assert layer.format == f and (layer.out_features, layer.in_features) == (16, 256)
            np.testing.assert_array_equal(layer(x).numpy(), lb.gemm(t, x.numpy()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs(dtype):
    _, layer = _layer("i2_s")
    x = torch.randn(3, 256).to(dtype)
    y = layer(x)
    assert y.dtype == dtype
    torch.testing.assert_close(y, layer(x.float()).to(dtype))


def test_quantize_act_and_fwht_equal_numpy_api():
    x = torch.randn(3, 256)
    for fmt in ("i2_s", "tq2_0", "q8_0", "pq2_0"):
        q, d, s = OPS.quantize_act(x, lb.format_info(fmt).type_id)
        for r in range(3):
            rq, rd, rs = lb.quantize_act_for(x[r].numpy(), fmt)
            np.testing.assert_array_equal(q[r].numpy(), rq)
            np.testing.assert_array_equal(d[r].numpy(), rd)
            np.testing.assert_array_equal(s[r].numpy(), rs)
    signs = torch.from_numpy(np.random.default_rng(2).choice([-1.0, 1.0], 256).astype(np.float32))
    for first in (True, False):
        got = OPS.fwht(x, 64, signs, first)
        ref = lb.fwht(x.numpy().copy(), block=64, signs=signs.numpy(),
                      order="signs-then-rotate" if first else "rotate-then-signs")
        np.testing.assert_array_equal(got.numpy(), ref)
    np.testing.assert_array_equal(OPS.fwht(x, 32).numpy(), lb.fwht(x.numpy().copy(), block=32))


def _sample_args():
    _, layer = _layer("tq2_0")
    tid = layer.info.type_id
    x = torch.randn(4, 256)
    return [
        (OPS.gemm.default, (x, layer.weight, tid, 64, 256)),
        (OPS.gemm.default, (x.requires_grad_(), layer.weight, tid, 64, 256)),
        (OPS.dequantize.default, (layer.weight, tid, 64, 256)),
        (OPS.quantize_act.default, (torch.randn(2, 256), tid)),
        (OPS.fwht.default, (torch.randn(2, 256), 128, torch.ones(256), False, True)),
    ]


@pytest.mark.parametrize("case", range(5))
def test_opcheck(case):
    op, args = _sample_args()[case]
    torch.library.opcheck(op, args)


def test_compile_fullgraph_equals_eager():
    torch._dynamo.reset()
    _, layer = _layer("i2_s", bias=True)
    second = pt.Linear.from_linear(torch.nn.Linear(64, 128), "q8_0")
    model = torch.nn.Sequential(layer, torch.nn.GELU(), second)
    x = torch.randn(3, 256)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)


def test_export_two_layers():
    _, a = _layer("i2_s", out_f=128)
    _, b = _layer("tq2_0", out_f=64, in_f=256, seed=1)
    model = torch.nn.Sequential(a, torch.nn.ReLU(), torch.nn.Linear(128, 256), b)
    x = torch.randn(2, 256)
    ep = torch.export.export(model, (x,))
    names = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "pylowbit.gemm.default" in names
    torch.testing.assert_close(ep.module()(x), model(x))


def test_meta_tensors_give_shapes():
    _, layer = _layer("i2_s")
    w = layer.weight.to("meta")
    y = OPS.gemm(torch.empty(7, 256, device="meta"), w, layer.info.type_id, 64, 256)
    assert y.shape == (7, 64) and y.device.type == "meta"


def test_bad_input_errors():
    _, layer = _layer("i2_s")
    tid = layer.info.type_id
    with pytest.raises(TypeError, match="float32, bfloat16 or float16.*int64"):
        layer(torch.ones(2, 256, dtype=torch.int64))
    with pytest.raises(TypeError, match="float64"):
        layer(torch.ones(2, 256, dtype=torch.float64))
    with pytest.raises(ValueError, match="contiguous.*strides"):
        layer(torch.randn(256, 2).t())
    with pytest.raises(ValueError, match="last axis.*256"):
        layer(torch.randn(2, 128))
    with pytest.raises(ValueError, match="takes 4128 bytes"):
        OPS.gemm(torch.randn(1, 256), layer.weight[:-1], tid, 64, 256)
    with pytest.raises(ValueError, match="takes .* bytes"):
        OPS.gemm(torch.randn(1, 256), layer.weight, tid, 128, 256)
    with pytest.raises(ValueError, match="multiple of 128"):
        OPS.gemm(torch.randn(1, 200), torch.zeros(10, dtype=torch.uint8), tid, 1, 200)
    with pytest.raises(ValueError, match="unknown weight type id 99"):
        OPS.gemm(torch.randn(1, 256), layer.weight, 99, 64, 256)
    with pytest.raises(TypeError, match="1-D uint8"):
        OPS.gemm(torch.randn(1, 256), layer.weight.to(torch.int8), tid, 64, 256)
    with pytest.raises(ValueError, match="x is on cpu, the packed weights on meta"):
        OPS.gemm(torch.randn(1, 256), layer.weight.to("meta"), tid, 64, 256)
    with pytest.raises(ValueError, match="x is on meta"):
        layer(torch.randn(1, 256, device="meta"))
    with pytest.raises(ValueError, match="multiple of the block size 256"):
        pt.Linear(100, 8, "tq2_0")
    with pytest.raises(ValueError, match="unknown format"):
        pt.Linear(256, 8, "q3_k")
    with pytest.raises(ValueError, match="not quantized to|but not"):
        pt.Linear.from_linear(torch.nn.Linear(256, 8), "q4_k")
    with pytest.raises(ValueError, match="no activation quantizer"):
        OPS.quantize_act(torch.randn(256), lb.format_info("f16").type_id)


def test_state_dict_round_trip_and_format_check():
    lin, layer = _layer("tq2_0", bias=True)
    fresh = pt.Linear(256, 64, "tq2_0", bias=True)
    fresh.load_state_dict(layer.state_dict())
    x = torch.randn(2, 256)
    assert torch.equal(fresh(x), layer(x))
    assert "format=tq2_0" in repr(fresh) and "out_features=64" in repr(fresh)
    other = pt.Linear(256, 64, "i2_s", bias=True)
    with pytest.raises((RuntimeError, ValueError), match="tq2_0"):
        other.load_state_dict(layer.state_dict())


def test_threads_follow_torch(monkeypatch):
    seen = []
    real = _lowbit.addr_gemm

    def spy(*args):
        seen.append(args[8])  # threads
        return real(*args)

    monkeypatch.setattr(_lowbit, "addr_gemm", spy)
    _, layer = _layer("i2_s")
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            layer(torch.randn(1, 256))
        pt.set_threads(3)  # pylowbit's own count, whatever torch's
        layer(torch.randn(1, 256))
        torch.ops.pylowbit.gemm(torch.randn(1, 256), layer.weight, layer.type_id, 64, 256)
        pt.set_threads(None)
        layer(torch.randn(1, 256))
    finally:
        torch.set_num_threads(before)
        pt.set_threads(None)
    assert seen == [1, 2, 3, 3, 2]
    with pytest.raises(ValueError, match="between 1 and 256"):
        pt.set_threads(0)


@pytest.mark.parametrize("fmt", ["i2_s", "tq2_0", "tq1_0", "q8_0"])
def test_repack_same_results_and_follows_weight(fmt):
    _, layer = _layer(fmt, bias=True)
    x = torch.randn(3, 256)
    want = layer(x)
    layer.repack()
    assert "repacked" in repr(layer)
    with torch.no_grad():
        assert torch.equal(layer(x), want)
        assert torch.equal(layer(x[:1]), want[:1])
    # repacked: every format but Q8_0, and Q8_0 where the variant has its packed layout
    assert (layer.repacked_nbytes > 0) == (_lowbit.packed_nbytes(layer.type_id, 64, 256) > 0)
    assert layer.repacked_nbytes > 0 or fmt == "q8_0"
    _, other = _layer(fmt, bias=True, seed=5)
    layer.load_state_dict(other.state_dict())  # new bytes: packed again on the next call
    with torch.no_grad():
        assert torch.equal(layer(x), other(x))
    layer.repack(False)
    assert layer.repacked_nbytes == 0 and torch.equal(layer(x), other(x))


def test_import_pylowbit_does_not_import_torch(tmp_path):
    import subprocess
    import sys
    code = "import sys, pylowbit; assert 'torch' not in sys.modules, 'torch imported'"
    # (from a directory without a source tree, which would shadow the installed package)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
