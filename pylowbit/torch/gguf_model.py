"""`load_gguf(path)`: a llama-architecture GGUF file as a transformers `LlamaForCausalLM` whose
linear layers are `pylowbit.torch.Linear`s holding the file's bytes (no dequantization), the
model `pylowbit bench --vs torch` runs beside pylowbit's own decoder on the same file.

Needs transformers (`pip install "pylowbit[torch]" transformers`).  The token embedding and the
norms become float tensors (transformers' Embedding and RMSNorm); every matrix stays in its GGUF
format.  llama.cpp's converter permutes the rows of attn_q / attn_k for its interleaved RoPE;
transformers rotates half-split pairs, so those rows are put back in transformers' order (whole
rows of bytes move: each row of a GGUF matrix is its own run of blocks).
"""
from __future__ import annotations

import numpy as np
import torch

from pylowbit.core import dequantize, format_info
from pylowbit.gguf import open_gguf
from pylowbit.model.config import Config
from pylowbit.torch.linear import Linear
from pylowbit.torch.quantize import quantize_

_PROJECTIONS = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def _unpermute_rows(t, n_head: int):
    """The GGUF bytes of attn_q / attn_k with rows in transformers' order: GGUF row
    h*hd + 2i + j holds transformers' row h*hd + j*hd/2 + i."""
    rows, cols = t.shape
    info = format_info(t.type_id)
    row_bytes = cols // info.block_size * info.type_size
    data = np.asarray(t.data, dtype=np.uint8).reshape(-1)
    body, tail = data[:rows * row_bytes], data[rows * row_bytes:]  # tail: I2_S's tensor scale
    hd = rows // n_head
    order = np.arange(rows).reshape(n_head, hd // 2, 2).transpose(0, 2, 1).reshape(-1)
    return np.concatenate([body.reshape(rows, row_bytes)[order].reshape(-1), tail])


class _Bytes:  # what Linear.from_gguf reads: shape, type_id, data
    def __init__(self, shape, type_id, data):
        self.shape, self.type_id, self.data = shape, type_id, data


def load_gguf(path, dtype: torch.dtype = torch.float32, repack: bool = True, **quantize_kw):
    """A transformers LlamaForCausalLM of the llama GGUF file at `path`: its matrices as
    pylowbit.torch.Linear (the file's bytes; with `repack`, the decode layout in their place, as
    quantize_(repack=True)), embeddings and norms in `dtype`; then quantize_'s fusions and
    threads rule (`quantize_kw` goes to it).  Raises ValueError for another architecture."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise ImportError("pylowbit.torch.load_gguf needs transformers: pip install transformers") from None
    f = open_gguf(path)
    try:
        cfg = Config.from_gguf(f)
        if cfg.arch != "llama" or cfg.rope_neox or cfg.head_dim != cfg.v_head_dim:
            raise ValueError(f"load_gguf reads llama-architecture files; {path} is {cfg.arch!r}")
        hf = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.n_ff,
                         num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
                         num_key_value_heads=cfg.n_head_kv, head_dim=cfg.head_dim,
                         rms_norm_eps=cfg.eps, rope_theta=cfg.rope_base,
                         max_position_embeddings=cfg.ctx_train,
                         tie_word_embeddings="output.weight" not in f.tensors)
        with torch.device("meta"):
            model = LlamaForCausalLM(hf)
        model.to_empty(device="cpu")
        model.model.rotary_emb.__init__(hf)  # meta-initialized buffers: recompute

        def floats(name, shape):
            t = f.tensors[name]
            return torch.from_numpy(np.ascontiguousarray(
                dequantize(t.data, t.type_id, tuple(t.shape)).reshape(shape))).to(dtype)

        def linear(name, n_head=None):
            t = f.tensors[name]
            if n_head is not None:
                t = _Bytes(tuple(t.shape), t.type_id, _unpermute_rows(t, n_head))
            layer = Linear.from_gguf(t, dtype=dtype)
            return layer.repack() if repack else layer

        with torch.no_grad():
            model.model.embed_tokens.weight.copy_(floats("token_embd.weight", (cfg.vocab_size, cfg.d_model)))
            model.model.norm.weight.copy_(floats("output_norm.weight", (cfg.d_model,)))
            for il, block in enumerate(model.model.layers):
                block.input_layernorm.weight.copy_(floats(f"blk.{il}.attn_norm.weight", (cfg.d_model,)))
                block.post_attention_layernorm.weight.copy_(floats(f"blk.{il}.ffn_norm.weight", (cfg.d_model,)))
                for short, long in _PROJECTIONS.items():
                    heads = {"attn_q": cfg.n_head, "attn_k": cfg.n_head_kv}.get(short)
                    model.set_submodule(f"model.layers.{il}.{long}", linear(f"blk.{il}.{short}.weight", heads))
            if "output.weight" in f.tensors:
                model.lm_head = linear("output.weight")
            else:  # tied: the embedding's own format, as pylowbit's decoder multiplies it
                model.lm_head = linear("token_embd.weight")
    finally:
        f.close()
    return quantize_(model.to(dtype).eval(), **quantize_kw)
