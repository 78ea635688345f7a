"""quantize_'s eager fusions: transformers' RMSNorms as one pylowbit call (pt.RMSNorm), sibling
projections (q/k/v, gate/up) in one multiply (pt.SharedInput), bf16 converted in C.  Each must give
what the unfused path gives."""
import copy
import pickle

import pytest
import torch
from transformers.models.bitnet.modeling_bitnet import BitNetRMSNorm

import pylowbit.torch as pt
from pylowbit import _lowbit
from test_torch_bitnet import load, packed_dir, reference_logits  # noqa: F401 (fixture)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_as_transformers(dtype):
    ref = BitNetRMSNorm(384, eps=1e-5).to(dtype)
    with torch.no_grad():
        ref.weight.copy_(1 + 0.3 * torch.randn(384))
    mine = pt.RMSNorm.from_module(ref)
    assert mine.weight is ref.weight
    x = (3 * torch.randn(5, 7, 384)).to(dtype)
    with torch.no_grad():
        want, got = ref(x), mine(x)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=2e-6, atol=2e-6)
    else:  # same roundings; the float32 sum order may move one value by one bf16 step
        diff = (got.float() - want.float()).abs() / want.float().abs().clamp(min=1e-3)
        assert (diff > 0).float().mean() < 0.01 and diff.max() <= 2 ** -7
    # the autograd path (weight trainable, grad on) is transformers' own ops
    x.requires_grad_(dtype == torch.float32)
    y = mine(x)
    if dtype == torch.float32:
        y.sum().backward()
        assert x.grad is not None and mine.weight.grad is not None
    with pytest.raises(TypeError, match="RMSNorm.from_module takes"):
        pt.RMSNorm.from_module(torch.nn.LayerNorm(8))


def test_shared_input_semantics():
    torch.manual_seed(0)
    lin = [pt.Linear.from_linear(torch.nn.Linear(256, n, bias=False), "i2_s").repack() for n in (64, 32)]
    group = pt.SharedInput(lin)
    for m in lin:
        m.siblings = group
    x = torch.randn(3, 256)
    with torch.no_grad():
        alone = []
        for m in lin:
            m.siblings = None
            alone.append(m(x))
            m.siblings = group
        a = lin[0](x)
        assert group._outs and group._x is x  # the other output kept for its call
        b = lin[1](x)
        assert not group._outs and group._x is None  # handed over and released
        assert torch.equal(a, alone[0]) and torch.equal(b, alone[1])
        # another tensor, or the same one changed in place, is multiplied on its own
        lin[0](x)
        y = x.clone()
        assert torch.equal(lin[1](y), alone[1])
        lin[1](x)
        x.mul_(2)
        torch.testing.assert_close(lin[0](x), 2 * alone[0], rtol=1e-5, atol=1e-5)


def test_fused_model_matches_transformers(packed_dir):  # noqa: F811
    model = load(packed_dir)
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    ref = reference_logits(model, ids)
    with torch.compiler.set_stance("force_eager"):
        ref_tokens = model.generate(ids[:1], max_new_tokens=16, do_sample=False)
    pt.quantize_(model, repack=True)
    assert model.pylowbit_converted == {"bitlinear": 14, "rms_norm": 9, "sibling groups": 4}
    attn = model.model.layers[0].self_attn
    assert attn.q_proj.siblings is attn.k_proj.siblings is attn.v_proj.siblings is not None
    with torch.no_grad():
        got = model(ids).logits
    assert ((got - ref).abs().max() / ref.abs().max()).item() < 1e-4
    assert torch.equal(model.generate(ids[:1], max_new_tokens=16, do_sample=False), ref_tokens)
    # bf16 end to end: fused and unfused pylowbit paths agree (same kernels, same roundings)
    model.to(torch.bfloat16)
    with torch.inference_mode():
        fused = model(ids).logits
    plain = pt.quantize_(load(packed_dir), repack=True, fuse=False).to(torch.bfloat16)
    assert not any(isinstance(m, pt.RMSNorm) for m in plain.modules())
    with torch.inference_mode():
        unfused = plain(ids).logits
    assert ((fused.float() - unfused.float()).abs().max() / unfused.float().abs().max()).item() < 2e-2


@pytest.mark.parametrize("repack", [False, True])
def test_bf16_converted_in_c_as_torch_converts(repack):
    torch.manual_seed(1)
    m = pt.Linear.from_linear(torch.nn.Linear(512, 96, bias=False), "i2_s").repack(repack)
    x = torch.randn(4, 512).to(torch.bfloat16)
    with torch.no_grad():
        got = m(x)
        want = m(x.float()).to(torch.bfloat16)  # bf16 -> f32 is exact; f32 -> bf16 torch's rounding
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    x16 = x.to(torch.float16)
    assert m(x16).dtype == torch.float16


def test_read_ahead_learns_the_call_order():
    torch.manual_seed(2)
    a, b = (pt.Linear.from_linear(torch.nn.Linear(256, 256, bias=False), "i2_s").repack() for _ in range(2))
    x = torch.randn(1, 256)
    pt.set_threads(2)
    try:
        with torch.no_grad():
            want = [a(x), b(x)]
            for _ in range(3):  # a, b, a, b, ...: after a, b's weights are read ahead
                got = [a(x), b(x)]
                assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    finally:
        pt.set_threads(None)
    assert a.__dict__["_next_multiply"]() is b and b.__dict__["_next_multiply"]() is a
    assert "_next_multiply" not in dict(a.named_modules())  # a plain attribute, not a submodule
    assert list(a.state_dict()) == list(b.state_dict())
    # the links are weak references to these very objects: a copy or a pickle starts without them
    pair = torch.nn.Sequential(a, b)
    for c in (copy.deepcopy(pair), pickle.loads(pickle.dumps(pair))):
        assert not any(k in m.__dict__ for m in c for k in ("_next_multiply", "_weakself"))
        with torch.no_grad():
            assert torch.equal(c[0](x), want[0]) and torch.equal(c[1](x), want[1])
        assert c[0].__dict__["_weakself"]() is c[0]
    assert a.__dict__["_next_multiply"]() is b


@pytest.mark.parametrize("head, threads, holds", [("i2_s", "auto", True), (None, "auto", False),
                                                  ("i2_s", "follow", False), (None, "hold", True)])
def test_converted_model_holds_torch_threads(packed_dir, head, threads, holds):  # noqa: F811
    """threads="hold" (and "auto" once no float nn.Linear is left): inside the model's forward,
    torch runs one intra-op thread and pylowbit's kernels the count torch had, and pylowbit's
    idle workers are held awake; restored after, and after an exception too."""
    model = pt.quantize_(load(packed_dir), head=head, threads=threads)
    inside = []
    layer = model.model.layers[0].mlp.down_proj

    def awake_holds():
        n = _lowbit.pool_keep_awake(True) - 1
        _lowbit.pool_keep_awake(False)
        return n

    layer.register_forward_pre_hook(
        lambda m, a: inside.append((torch.get_num_threads(), pt.kernel_threads(), awake_holds() > 0)))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
        assert torch.get_num_threads() == 2 and awake_holds() == 0
        assert inside[-1] == ((1, 2, True) if holds else (2, 2, False))
        with pytest.raises(IndexError), torch.no_grad():
            model(torch.tensor([[10 ** 6]]))  # out of the vocabulary: the embedding raises
        assert torch.get_num_threads() == 2 and pt.kernel_threads() == 2 and awake_holds() == 0
        inside.clear()  # generate() holds too, its forwards inside keep the outer count
        with torch.no_grad():
            model.generate(torch.tensor([[1, 2]]), max_new_tokens=2, do_sample=False)
        assert set(inside) == ({(1, 2, True)} if holds else {(2, 2, False)})
        assert torch.get_num_threads() == 2 and awake_holds() == 0
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="threads='some'"):
        pt.quantize_(load(packed_dir), threads="some")
