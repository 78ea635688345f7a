"""Files as bitnet.cpp writes them: its BitNet b1.58 2B4T converter and llama-quantize I2_S.

bitnet.cpp's utils/convert-ms-to-gguf-bitnet.py names the architecture `bitnet-25` (its gguf-py's
MODEL_ARCH.BITNET_25; the later published 2B4T GGUF says `bitnet-b1.58`, which bitnet.cpp runs the
same way) and writes, under that prefix, vocab_size, context_length, embedding_length, block_count,
feed_forward_length, rope.dimension_count, attention.head_count(_kv), layer_norm_rms_epsilon,
rope.freq_base and general.file_type -- no attention.key_length.  Tensors come in the checkpoint's
safetensors order (its names sorted: the layers in string order 0, 1, 10, 11, ..., each layer's
tensors sorted by their Hugging Face names), renamed to llama.cpp's; no output.weight (the head is
tied).  llama-quantize then stores the 7 matrices of each layer as I2_S, token_embd as F16 and the
norms as F32, and sets general.file_type = 40 (bitnet.cpp's LLAMA_FTYPE_MOSTLY_I2_S).
"""

import numpy as np
import pytest

from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, ValueType, write_gguf
from pylowbit.model import Model, ModelError
from pylowbit.model.config import Config
from pylowbit.model.synthetic import write_synthetic_model

# the 2B4T checkpoint's tensor names -> llama.cpp's (bitnet.cpp's gguf-py tensor map)
HF_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.ffn_sub_norm.weight": "ffn_sub_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.attn_sub_norm.weight": "attn_sub_norm.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
}
I2_S_FILE_TYPE = 40  # bitnet.cpp's llama.h


def converter_order(n_layer):
    """GGUF tensor names in the order bitnet.cpp's converter writes them."""
    hf = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    for i in range(n_layer):
        hf.update({f"model.layers.{i}.{k}": f"blk.{i}.{v}" for k, v in HF_LAYER.items()})
    return [hf[k] for k in sorted(hf)]


def as_bitnet_cpp_writes(src, dst, arch="bitnet-25"):
    """Rewrite a synthetic bitnet-b1.58 I2_S file with bitnet.cpp's architecture name, keys, tensor
    order and types (the tensors' bytes unchanged)."""
    with GGUFFile(src) as f:
        old = f.get("general.architecture")
        p = f"{old}."
        meta = {"general.architecture": arch, "general.name": "bitnet2b_2501"}
        for key in ("vocab_size", "context_length", "embedding_length", "block_count", "feed_forward_length",
                    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
                    "rope.freq_base"):
            if p + key in f.metadata:
                vt, et = f.metadata_types[p + key]
                meta[f"{arch}.{key}"] = MetaValue(vt, f.metadata[p + key], et)
        d, H = f.metadata[p + "embedding_length"], f.metadata[p + "attention.head_count"]
        meta[f"{arch}.vocab_size"] = f.tensor("token_embd.weight").shape[0]
        meta[f"{arch}.rope.dimension_count"] = d // H
        meta["general.file_type"] = MetaValue(ValueType.UINT32, I2_S_FILE_TYPE)
        meta["general.quantization_version"] = MetaValue(ValueType.UINT32, 2)
        for k, v in f.metadata.items():
            if k.startswith("tokenizer."):
                vt, et = f.metadata_types[k]
                meta[k] = MetaValue(vt, v, et)
        order = converter_order(f.metadata[p + "block_count"])
        assert sorted(order) == sorted(f.tensors)  # the synthetic file has exactly these tensors
        specs = [TensorSpec(n, f.tensors[n].file_type_id, f.tensors[n].shape, np.array(f.tensors[n].data))
                 for n in order]
    write_gguf(dst, meta, specs)
    return dst


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bitnet_cpp")
    canon = write_synthetic_model(d / "canon.gguf", arch="bitnet-b1.58", fmt="i2_s", embed_fmt="f16", seed=5,
                                   n_layer=12)  # 12: string order puts blk.10 before blk.2
    return canon, as_bitnet_cpp_writes(canon, d / "bitnet-25.gguf")


def test_the_rewritten_file_is_laid_out_like_bitnet_cpp_s(files):
    """The fixture itself: what the checks below rely on (types, order, no head, no key_length)."""
    _, p = files
    with GGUFFile(p) as f:
        names = list(f.tensors)
        assert names[0] == "token_embd.weight" and names[-1] == "output_norm.weight"
        assert names.index("blk.10.attn_norm.weight") < names.index("blk.2.attn_norm.weight")  # string order
        assert names.index("blk.0.ffn_down.weight") < names.index("blk.0.attn_q.weight")
        assert "output.weight" not in f.tensors
        fmts = [t.fmt for t in f.tensors.values()]
        assert fmts.count("i2_s") == 7 * f.get("bitnet-25.block_count")
        assert f.tensor("token_embd.weight").fmt == "f16"
        assert {t.fmt for t in f.tensors.values() if len(t.shape) == 1} == {"f32"}
        assert "bitnet-25.attention.key_length" not in f.metadata
        assert not any(k.startswith("bitnet-b1.58.") for k in f.metadata)


def test_bitnet_25_loads_as_bitnet_b158_and_computes_the_same_logits(files):
    canon, p = files
    with GGUFFile(p) as f, GGUFFile(canon) as g:
        a, b = Config.from_gguf(f), Config.from_gguf(g)
    assert a.arch == "bitnet-b1.58" and a == b  # every hyper-parameter read from the bitnet-25.* keys
    tokens = np.random.default_rng(3).integers(0, 512, 12)
    out = []
    for path in (canon, p):
        m = Model(path, ctx=32, notice=None)
        out.append(np.vstack([m.forward(tokens[:8], logits="all")] + [m.forward([t])[None] for t in tokens[8:]]))
    assert np.array_equal(out[0], out[1])
    assert np.isfinite(out[0]).all() and np.ptp(out[0]) > 0


def test_published_name_and_prefix_must_agree(tmp_path, files):
    """The keys are read under the file's own architecture name: a file that says bitnet-25 but
    keeps bitnet-b1.58.* keys is missing its keys, and says so."""
    canon, _ = files
    p = as_bitnet_cpp_writes(canon, tmp_path / "b158.gguf", arch="bitnet-b1.58")
    with GGUFFile(p) as f:
        assert Config.from_gguf(f).arch == "bitnet-b1.58"
        meta = {k: MetaValue(f.metadata_types[k][0], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
        specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)) for t in f.tensors.values()]
    meta["general.architecture"] = "bitnet-25"
    write_gguf(tmp_path / "mixed.gguf", meta, specs)
    with pytest.raises(ModelError, match="bitnet-25.embedding_length"):
        Model(tmp_path / "mixed.gguf", notice=None)


def _logits(path, tokens, prompt=8):
    m = Model(path, ctx=64, notice=None)
    return np.vstack([m.forward(tokens[:prompt], logits="all")] + [m.forward([t])[None] for t in tokens[prompt:]])


def _distance(a, exact):
    """Mean over positions of the relative L2 distance of logits a to the exact ones."""
    return float(np.mean(np.linalg.norm(a - exact, axis=1) / np.linalg.norm(exact, axis=1)))


def test_default_i2_s_rounding_is_as_close_to_float64_as_bitnet_cpp_s(files):
    """Against the float64 forward without activation quantization (model_reference.Ref), pylowbit's
    logits with the default I2_S rounding are no further off than bitnet.cpp's rule applied in
    the reference; the power-of-two scale (set_i2s_act_scale("pow2")) is further off."""
    import pylowbit as lb
    from model_reference import Ref

    canon, _ = files
    tokens = np.random.default_rng(4).integers(0, 512, 24)
    exact = Ref(canon, act_quant=False).logits(tokens)
    bitnet = _distance(Ref(canon, i2s_rule="s8").logits(tokens), exact)
    ours = _distance(_logits(canon, tokens), exact)
    before = lb.set_i2s_act_scale("pow2")
    try:
        pow2 = _distance(_logits(canon, tokens), exact)
    finally:
        lb.set_i2s_act_scale(before)
    # equal but for float32 vs float64 rounding (and the odd activation code on a rounding tie)
    assert ours <= bitnet * (1 + 1e-2), (ours, bitnet)
    assert pow2 > ours, (pow2, ours)
