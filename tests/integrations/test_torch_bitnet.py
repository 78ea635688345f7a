"""A tiny random BitNet model built by transformers in its own packed layout, saved and loaded offline:
after pylowbit.torch.quantize_ every BitLinear runs on pylowbit's I2_S kernels with the same integer
products, logits within 1e-4 relative and identical greedy tokens."""
import logging

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, BitNetConfig, BitNetForCausalLM
from transformers.integrations.bitnet import (AutoBitLinear, BitLinear, pack_weights,
                                             replace_with_bitnet_linear)
from transformers.utils.quantization_config import BitNetQuantConfig

import pylowbit as lb
import pylowbit.torch as pt

TINY = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def ternarize(w):
    """BitNet b1.58's absmean rule, as transformers' WeightQuant: codes and 1 / scale."""
    scale = 1.0 / w.abs().mean().clamp(min=1e-5)
    return (w * scale).round().clamp(-1, 1).to(torch.int8), scale


def save_packed_bitnet(path, use_rms_norm=False, seed=0):
    """transformers' own packed checkpoint (BitLinear: uint8 (out/4, in) + weight_scale)."""
    torch.manual_seed(seed)
    cfg = BitNetConfig(**TINY)
    qc = BitNetQuantConfig(linear_class="bitlinear", quantization_mode="offline", use_rms_norm=use_rms_norm)
    dense = BitNetForCausalLM(cfg).state_dict()
    model = replace_with_bitnet_linear(BitNetForCausalLM(cfg), modules_to_not_convert=["lm_head"],
                                       quantization_config=qc)
    for name, m in model.named_modules():
        if isinstance(m, BitLinear):
            codes, scale = ternarize(dense[name + ".weight"])
            m.weight = torch.nn.Buffer(pack_weights(codes.clone()))
            m.weight_scale = torch.nn.Buffer(scale.reshape(1))
            if m.rms_norm is not None:
                m.rms_norm.to_empty(device="cpu")
                with torch.no_grad():
                    m.rms_norm.weight.copy_(1 + 0.1 * torch.randn(m.in_features))
    model.config.quantization_config = qc
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def packed_dir(tmp_path_factory):
    return save_packed_bitnet(tmp_path_factory.mktemp("bitnet"))


def load(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def reference_logits(model, ids):
    # transformers' BitLinear wraps its helpers in torch.compile: run them eagerly (same ops).
    with torch.no_grad(), torch.compiler.set_stance("force_eager"):
        return model(ids).logits


def test_quantize_matches_transformers(packed_dir, caplog):
    model = load(packed_dir)
    n_bitlinear = sum(isinstance(m, BitLinear) for m in model.modules())
    assert n_bitlinear == 14
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    ref = reference_logits(model, ids)
    with torch.compiler.set_stance("force_eager"):
        ref_tokens = model.generate(ids[:1], max_new_tokens=16, do_sample=False)
    with caplog.at_level(logging.INFO, logger="pylowbit.torch"):
        assert pt.quantize_(model) is model
    assert "converted 14 linear layers (14 bitlinear), 9 RMSNorms, 4 sibling groups" in caplog.text
    assert model.pylowbit_converted == {"bitlinear": 14, "rms_norm": 9, "sibling groups": 4}
    assert sum(isinstance(m, pt.RMSNorm) for m in model.modules()) == 9
    assert not any(isinstance(m, BitLinear) for m in model.modules())
    assert sum(isinstance(m, pt.Linear) for m in model.modules()) == n_bitlinear
    assert isinstance(model.lm_head, torch.nn.Linear) and not isinstance(model.lm_head, pt.Linear)
    with torch.no_grad():
        got = model(ids).logits
    rel = ((got - ref).abs().max() / ref.abs().max()).item()
    assert rel < 1e-4, rel
    tokens = model.generate(ids[:1], max_new_tokens=16, do_sample=False)
    assert torch.equal(tokens, ref_tokens)


def test_integer_products_identical(packed_dir):
    # One layer: pylowbit's codes times transformers' activation codes give transformers' integers.
    model = load(packed_dir)
    bl = model.model.layers[0].mlp.gate_proj
    layer = pt.Linear.from_bitlinear(bl)
    w = pt.unpack_bitnet_codes(bl.weight).float() - 1
    torch.testing.assert_close(layer.dequantize(), w / bl.weight_scale.float(), rtol=1e-7, atol=0)
    # the direct code shuffle writes the bytes pylowbit's own quantizer writes
    via_c = lb.quantize(np.ascontiguousarray((w * (1 / bl.weight_scale.float())).numpy()), "i2_s")
    assert torch.equal(layer.weight, torch.from_numpy(via_c.data))
    x = torch.randn(3, bl.in_features)
    q, d, _ = torch.ops.pylowbit.quantize_act(x, layer.info.type_id)
    scale = 127 / x.abs().max(dim=-1, keepdim=True).values.clamp(min=1e-5)
    assert torch.equal(q.float(), (x * scale).round().clamp(-128, 127))


def test_rms_norm_bias_and_head(tmp_path):
    model = load(save_packed_bitnet(tmp_path, use_rms_norm=True, seed=3))
    assert model.model.layers[0].self_attn.q_proj.rms_norm is not None
    ids = torch.randint(0, 256, (1, 10), generator=torch.Generator().manual_seed(2))
    ref = reference_logits(model, ids)
    pt.quantize_(model, head="f16")
    assert isinstance(model.lm_head, pt.Linear) and model.lm_head.format == "f16"
    assert model.model.layers[0].self_attn.q_proj.norm is not None
    with torch.no_grad():
        got = model(ids).logits
    assert ((got - ref).abs().max() / ref.abs().max()).item() < 1e-3
    # a biased BitLinear (hand-built) keeps its bias
    bl = BitLinear(128, 64, bias=True, dtype=torch.float32)
    codes, scale = ternarize(torch.randn(64, 128))
    bl.weight = torch.nn.Buffer(pack_weights(codes.clone()))
    bl.weight_scale = torch.nn.Buffer(scale.reshape(1))
    bl.bias = torch.nn.Buffer(torch.randn(64))
    x = torch.randn(4, 128)
    with torch.compiler.set_stance("force_eager"):
        want = bl(x)
    torch.testing.assert_close(pt.Linear.from_bitlinear(bl)(x), want, rtol=1e-5, atol=1e-5)


def test_autobitlinear_offline_and_online():
    x = torch.randn(3, 128)
    for online in (False, True):
        m = AutoBitLinear(128, 64, bias=True, online_quant=online, dtype=torch.float32)
        if not online:
            codes, scale = ternarize(torch.randn(64, 128))
            with torch.no_grad():
                m.weight.copy_(codes.float())
                m.weight_scale.copy_(1 / scale.reshape(1))
        with torch.no_grad(), torch.compiler.set_stance("force_eager"):
            want = m(x)
        torch.testing.assert_close(pt.Linear.from_bitlinear(m)(x), want, rtol=1e-4, atol=1e-4)


def test_quantize_plain_linears_with_skip():
    model = torch.nn.Sequential()
    model.add_module("up", torch.nn.Linear(256, 128))
    model.add_module("act", torch.nn.ReLU())
    model.add_module("lm_head", torch.nn.Linear(128, 64))
    pt.quantize_(model, format="tq2_0")
    assert isinstance(model.up, pt.Linear) and model.up.format == "tq2_0"
    assert type(model.lm_head) is torch.nn.Linear
    assert model.pylowbit_converted == {"linear tq2_0": 1}
    with pytest.raises(ValueError, match="unknown format"):
        pt.quantize_(model, format="nope")


@pytest.mark.parametrize("repack", [False, True])
def test_converted_layers_memory_is_packed_bytes(packed_dir, repack):
    # repacked: the layout in place of the GGUF bytes, borrowed by the matrix (C owns nothing)
    model = pt.quantize_(load(packed_dir), repack=repack)
    layers = [m for m in model.modules() if isinstance(m, pt.Linear)]
    assert layers and all((m.packed is not None) == repack for m in layers)
    for m in layers:
        held = sum(t.numel() * t.element_size() for t in m.buffers(recurse=False))
        held += sum(p.nbytes for p in (m.packed_matrices() or ()))
        packed = m.in_features * m.out_features // 4  # 2 bits a weight
        assert held <= 1.1 * packed, (held, packed)
