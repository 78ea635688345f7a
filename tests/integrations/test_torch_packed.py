"""A repacked pylowbit.torch.Linear holds one copy of its weight, the packed bytes (`packed`, in
place of the GGUF bytes): its memory, state_dict round trips, torch.ops.pylowbit.gemm_packed /
unpack (opcheck, compile, export, autograd) and bad input."""
import copy
import io
import os
import sys

import numpy as np
import pytest
import torch

import pylowbit as lb
import pylowbit.torch as pt
from pylowbit import _lowbit
from pylowbit.torch._ops_packed import empty_aligned, packed_nbytes

REPACKED = ["i2_s", "tq2_0", "tq1_0", "ptq1_0", "q2_0", "pq2_0"]
# Q1_0 is repacked where the variant has a GEMV for its rows64 layout (every x86 SIMD variant)
if _lowbit.packed_nbytes(lb.format_info("q1_0").type_id, 64, 128):
    REPACKED.append("q1_0")
OPS = torch.ops.pylowbit


def _layer(fmt, out_f=64, in_f=1280, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    lin = torch.nn.Linear(in_f, out_f, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(out_f, in_f, generator=g))
        if bias:
            lin.bias.copy_(torch.randn(out_f, generator=g))
    return pt.Linear.from_linear(lin, fmt)


def _held_bytes(layer):
    """The layer's tensors plus what C owns for it."""
    tensors = sum(t.numel() * t.element_size() for t in layer.buffers(recurse=False))
    mats = layer.packed_matrices() or ()
    return tensors + sum(m.nbytes for m in mats)


@pytest.mark.parametrize("fmt", REPACKED)
def test_repacked_layer_holds_one_copy(fmt):
    layer = _layer(fmt, out_f=256, bias=False)
    file_bytes = layer.weight.numel()
    x = torch.randn(3, 1280)
    want = layer(x)
    layer.repack()
    with torch.no_grad():
        assert torch.equal(layer(x), want) and torch.equal(layer(x[:1]), want[:1])
    assert layer.weight.numel() == 0 and layer.packed is not None
    assert layer.packed_matrices()[0].nbytes == 0  # C owns nothing: it borrows `packed`
    held = _held_bytes(layer)
    assert held == layer.repacked_nbytes == packed_nbytes(layer.type_id, 256, 1280)
    dense_layout = held <= file_bytes * 1.01
    if fmt in ("tq1_0", "ptq1_0") and not dense_layout:
        # a variant without a dense base-3 kernel packs them in 2 bits (docs/TORCH.md)
        assert held <= 1.25 * file_bytes, (held, file_bytes)
    else:
        assert held <= 1.1 * file_bytes, (held, file_bytes)
    layer.repack(False)
    assert layer.packed is None and layer.weight.numel() == file_bytes
    assert torch.equal(layer(x), want)


def test_quantize_repack_holds_the_packed_bytes():
    model = torch.nn.Sequential(torch.nn.Linear(1280, 512, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(512, 1280, bias=False))
    x = torch.randn(2, 1280)
    want = pt.quantize_(copy.deepcopy(model), format="i2_s")(x)
    pt.quantize_(model, format="i2_s", repack=True)
    layers = [m for m in model.modules() if isinstance(m, pt.Linear)]
    assert len(layers) == 2
    for m in layers:
        assert _held_bytes(m) <= 1.1 * lb.tensor_nbytes("i2_s", m.in_features * m.out_features)
    with torch.no_grad():
        assert torch.equal(model(x), want)



def test_repacked_bytes_are_weight_memory(monkeypatch):
    """A repacked layer's bytes are liblowbit's memory for packed matrices (empty_packed: huge
    pages on Linux where the kernel allows them, as the decoder's own; torch's allocator gives
    4 KB pages), and a view of them outlives the layer."""
    from test_pack_into import _thp_eligible
    layer = _layer("i2_s", out_f=4096, in_f=2560, bias=False).repack()
    x = torch.randn(1, 2560)
    with torch.no_grad():
        want = layer(x)
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    if sys.platform.startswith("linux") and os.path.exists(thp):
        assert _thp_eligible(layer.packed.data_ptr()) is ("[never]" not in open(thp).read())
    view, copy_of = layer.packed[-4096:], layer.packed[-4096:].clone()
    del layer
    junk = [empty_aligned(8 << 20).fill_(0xEE) for _ in range(3)]
    assert torch.equal(view, copy_of) and len(junk) == 3
    assert empty_aligned(0).numel() == 0 and empty_aligned(100).data_ptr() % _lowbit.PACKED_ALIGN == 0
    again = _layer("i2_s", out_f=4096, in_f=2560, bias=False).repack()
    with torch.no_grad():
        assert torch.equal(again(x), want)
    # a format that is not repacked (Q8_0 with its packed layout off): its GGUF bytes, read in
    # place, move there once
    monkeypatch.setenv("PYLOWBIT_Q8ROWS", "0")
    q8 = _layer("q8_0", out_f=1024, in_f=2560, bias=False)
    with torch.no_grad():
        want = q8(x)
        before = q8.weight.clone()
        q8.repack()
        where = q8.weight.data_ptr()
        assert torch.equal(q8.weight, before) and torch.equal(q8(x), want)
        assert q8.repack().weight.data_ptr() == where and torch.equal(q8(x), want)
    if sys.platform.startswith("linux") and os.path.exists(thp):
        assert _thp_eligible(where) is ("[never]" not in open(thp).read())

@pytest.mark.parametrize("fmt", REPACKED + ["q8_0"])
def test_state_dict_round_trips_bit_exact(fmt):
    src = _layer(fmt)
    gguf = src.weight.clone()
    x = torch.randn(4, 1280)
    want = src(x)
    src.repack()
    sd = src.state_dict()
    assert list(sd) == ["weight", "bias", "_extra_state"]  # `packed` is not saved
    assert torch.equal(sd["weight"], gguf)  # the GGUF bytes, unpacked on save
    # repacked -> a fresh layer as it is; through torch.save too
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    fresh = pt.Linear(1280, 64, fmt, bias=True)
    fresh.load_state_dict(torch.load(buf))
    assert torch.equal(fresh.weight, gguf) and torch.equal(fresh(x), want)
    # plain -> a repacked layer: packed on load, one copy
    other = pt.Linear(1280, 64, fmt, bias=True).repack()
    other.load_state_dict(fresh.state_dict())
    with torch.no_grad():
        assert torch.equal(other(x), want)
    if fmt != "q8_0":
        assert other.weight.numel() == 0 and other.packed is not None
    # a state_dict of another format is refused, and the layer keeps its weights
    with pytest.raises((RuntimeError, ValueError), match=fmt if fmt != "i2_s" else "i2_s"):
        _layer("q8_0" if fmt != "q8_0" else "i2_s").load_state_dict(sd)
    with pytest.raises((RuntimeError, ValueError)):
        other.load_state_dict(_layer("q2_0" if fmt != "q2_0" else "i2_s").state_dict())
    with torch.no_grad():
        assert torch.equal(other(x), want)


def test_deepcopy_and_pickle_of_a_repacked_layer():
    layer = _layer("tq2_0").repack()
    x = torch.randn(2, 1280)
    want = layer(x)
    twin = copy.deepcopy(layer)
    assert twin.packed.data_ptr() != layer.packed.data_ptr()
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    with torch.no_grad():
        assert torch.equal(twin(x), want) and torch.equal(loaded(x), want)


def test_dequantize_and_grad_of_a_repacked_layer():
    layer = _layer("i2_s")
    dense = layer.dequantize()
    x = torch.randn(3, 1280, requires_grad=True)
    layer(x).sum().backward()
    plain_grad = x.grad.clone()
    layer.repack()
    assert torch.equal(layer.dequantize(), dense)
    x.grad = None
    y = layer(x)
    gy = torch.randn_like(y)
    (y * gy).sum().backward()
    assert torch.equal(x.grad, (gy @ dense))
    x.grad = None
    layer(x).sum().backward()
    assert torch.equal(x.grad, plain_grad)


def test_gradcheck_of_the_straight_through_gradient():
    """gradcheck of gemm_packed's backward (the straight-through gradient, grad . W): x enters
    through a linear map whose Jacobian it compares against, so only the backward is checked
    (the forward quantizes activations, which has no useful derivative)."""
    layer = _layer("tq2_0", out_f=16, in_f=256).repack()
    w = layer.dequantize().double()

    def f(gy):  # x . W^T's vector-Jacobian product with gy, through the op's backward
        x = torch.zeros(2, 256, requires_grad=True)
        y = OPS.gemm_packed(x, layer.packed, layer.type_id, 16, 256)
        (gx,) = torch.autograd.grad(y, x, gy.float(), create_graph=False)
        return gx.double()

    gy = torch.randn(2, 16, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(f(gy), gy.detach() @ w, rtol=1e-6, atol=1e-5)
    assert torch.autograd.gradcheck(lambda g: g @ w, (gy,))


def test_opcheck_gemm_packed_and_unpack():
    layer = _layer("tq2_0", out_f=16, in_f=512).repack()
    p, tid = layer.packed, layer.type_id
    for args in [(torch.randn(3, 512), p, tid, 16, 512),
                 (torch.randn(2, 5, 512, dtype=torch.bfloat16), p, tid, 16, 512),
                 (torch.randn(3, 512, requires_grad=True), p, tid, 16, 512)]:
        torch.library.opcheck(OPS.gemm_packed.default, args)
    torch.library.opcheck(OPS.unpack.default, (p, tid, 16, 512))
    y = OPS.gemm_packed(torch.randn(2, 512, device="meta"), p.to("meta"), tid, 16, 512)
    assert y.shape == (2, 16) and y.device.type == "meta"


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = _layer("i2_s", out_f=256, in_f=1280)
        self.b = _layer("tq2_0", out_f=1280, in_f=256, seed=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_compile_and_export_of_repacked_layers():
    model = TwoLayers()
    x = torch.randn(4, 1280)
    want = model(x)
    for m in (model.a, model.b):
        m.repack()
    with torch.no_grad():
        assert torch.equal(model(x), want)
        compiled = torch.compile(model, fullgraph=True, backend="eager")
        assert torch.equal(compiled(x), want)
        compiled_inductor = torch.compile(model, fullgraph=True)
        assert torch.equal(compiled_inductor(x), want)
    ep = torch.export.export(model, (x,))
    assert "gemm_packed" in str(ep.graph) and "pylowbit.gemm.default" not in str(ep.graph)
    assert torch.equal(ep.module()(x), want)
    # the packed bytes travel as the program's non-persistent buffers; the GGUF weight is empty
    assert set(ep.graph_signature.non_persistent_buffers) == {"a.packed", "b.packed"}
    assert ep.state_dict["a.weight"].numel() == 0


def test_bad_packed_input():
    layer = _layer("tq2_0", out_f=64, in_f=512).repack()
    p, tid = layer.packed, layer.type_id
    x = torch.randn(1, 512)
    n = p.numel()
    shifted = empty_aligned(n + 1)[1:]
    shifted.copy_(p)
    with pytest.raises(ValueError, match="multiple of 64"):
        OPS.gemm_packed(x, shifted, tid, 64, 512)
    with pytest.raises(ValueError, match=r"\(%d\) are short of the matrix" % (n - 1)):
        OPS.gemm_packed(x, p[:-1], tid, 64, 512)
    with pytest.raises(ValueError, match=f"takes {n} bytes"):  # traced: the size, from the shape
        OPS.gemm_packed(x.to("meta"), p[:-1].to("meta"), tid, 64, 512)
    with pytest.raises(TypeError, match="uint8"):
        OPS.gemm_packed(x, p.view(torch.int8), tid, 64, 512)
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        OPS.gemm_packed(x.to(torch.int32), p, tid, 64, 512)
    with pytest.raises(ValueError, match="no valid header"):
        OPS.gemm_packed(x, torch.zeros_like(p), tid, 64, 512)
    # another shape of the same size: the header says which
    assert packed_nbytes(tid, 63, 512) == n
    with pytest.raises(ValueError, match=r"\(64, 512\), expected type \d+ \(63, 512\)"):
        OPS.gemm_packed(x, p, tid, 63, 512)
    q4 = lb.format_info("q4_k").type_id
    with pytest.raises(ValueError, match="not repacked"):
        OPS.gemm_packed(x, p, q4, 64, 512)
    with pytest.raises(ValueError, match="last axis"):
        OPS.gemm_packed(torch.randn(1, 256), p, tid, 64, 512)
    with pytest.raises(ValueError, match="no valid header"):
        OPS.unpack(torch.zeros_like(p), tid, 64, 512)
    # the numpy-level constructor
    w = torch.zeros(lb.tensor_nbytes("tq2_0", 64 * 512), dtype=torch.uint8)
    with pytest.raises(TypeError, match="uint8"):
        _lowbit.PackedMatrix(w.numpy(), tid, 64, 512, out=np.zeros(n, np.float32))
    with pytest.raises(ValueError, match="multiple of 64"):
        _lowbit.PackedMatrix(w.numpy(), tid, 64, 512, out=shifted.numpy())


def test_gemm_packed_follows_the_bytes_at_an_address():
    """The op keeps what it wrapped at each address (no kernel plan a call); other bytes at that
    address, of the same or another header, are read as they are."""
    a, b = (_layer("tq2_0", out_f=64, in_f=512, seed=s, bias=False).repack() for s in (1, 2))
    c = _layer("tq2_0", out_f=63, in_f=512, seed=3, bias=False).repack()
    assert c.packed.numel() == a.packed.numel()
    x = torch.randn(2, 512)
    want_a, want_b, want_c = a(x), b(x), c(x)
    buf = empty_aligned(a.packed.numel())
    tid = a.type_id
    for src, shape, want in [(a, (64, 512), want_a), (b, (64, 512), want_b), (c, (63, 512), want_c),
                             (a, (64, 512), want_a)]:
        buf.copy_(src.packed)
        assert torch.equal(OPS.gemm_packed(x, buf, tid, *shape), want)
        assert torch.equal(OPS.unpack(buf, tid, *shape), src.file_bytes())
    with pytest.raises(ValueError, match=r"expected type \d+ \(63, 512\)"):
        OPS.gemm_packed(x, buf, tid, 63, 512)


@pytest.mark.parametrize("fmt", ["tq1_0", "i2_s"])
def test_bytes_packed_under_another_variant_still_run(fmt, isa):
    """The layout is the variant's at packing time; the header carries it, so the bytes run (and
    unpack) under any variant, with the same results."""
    layer = _layer(fmt, out_f=48, in_f=1280)
    x = torch.randn(2, 1280)
    want, gguf = layer(x), layer.weight.clone()
    for packed_under in lb.isa_supported():
        isa(packed_under)
        layer.repack()
        for run_under in lb.isa_supported():
            isa(run_under)
            with torch.no_grad():
                assert torch.equal(layer(x), want), (packed_under, run_under)
                y = OPS.gemm_packed(x, layer.packed, layer.type_id, 48, 1280) + layer.bias
            assert torch.equal(y, want) and torch.equal(layer.file_bytes(), gguf)
        layer.repack(False)
