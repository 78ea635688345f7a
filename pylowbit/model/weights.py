"""Weights of a GGUF model: matrices as pylowbit QTensors over the mapped file (zero copy), norm
vectors as float32, and decode-at-load for types without a pylowbit kernel (model.tensors)."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Callable

import numpy as np

from .. import _lowbit
from .. import core as lb
from ..gguf import TYPES, GGUFFile, TensorInfo
from .config import Config, ModelError
from .hadamard import Rotation
# Re-exported: the linears and the tensor decoding were part of this module.
from .linear import GatedFFN, GroupedHeads, Linear, LinearGroup, prep_name  # noqa: F401
from .tensors import (FOREIGN_POLICIES, KERNEL_FORMATS, _gguf_dequantize, anon_array, bf16_to_f32,  # noqa: F401
                      convert_foreign, dequantize_info, round_bf16)


class Embedding:
    """Row lookup from the mapped table, decoding only the rows asked for; or, once use_packed
    gave it the tied head's packed copy, from that copy's rows in the file layout."""

    def __init__(self, t: TensorInfo, rot: Rotation | None):
        self.t = t
        self.rows, self.cols = t.shape
        self.rot = rot if (rot is not None and t.name in rot.inverse_names) else None
        ti = TYPES[t.type_id]
        if t.fmt == "i2_s":
            self.row_bytes = self.cols // 4
            self.tail = np.asarray(t.data[-32:])
        else:
            self.row_bytes = self.cols // ti.block_size * ti.type_size
        self.table = np.asarray(t.data[: self.rows * self.row_bytes]).reshape(self.rows, self.row_bytes)
        self.packed = None

    def use_packed(self, w) -> bool:
        """Read rows from w (the tied head: a PackedTensor of this table) instead of the mapped
        table, so that the table's pages can be released: whether it does (packed, not I2_S)."""
        if not getattr(w, "is_packed", False) or self.t.fmt == "i2_s" or w.shape != (self.rows, self.cols):
            return False
        self.packed, self.table = w, None
        return True

    def _rows(self, tokens: np.ndarray) -> np.ndarray:
        """The (checked) tokens' rows of file bytes"""
        if self.packed is not None:
            return self.packed.unpack_rows(tokens)
        return self.table[tokens[0]:tokens[0] + 1] if tokens.size == 1 else self.table[tokens]

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if tokens.size == 1:  # a decode step: one id checked and one row sliced, in plain Python
            tok = int(tokens[0])
            if not 0 <= tok < self.rows:
                raise ModelError(f"token id {tok} out of range 0..{self.rows - 1}")
        else:
            if tokens.size and (tokens.min() < 0 or tokens.max() >= self.rows):
                bad = tokens[(tokens < 0) | (tokens >= self.rows)][0]
                raise ModelError(f"token id {bad} out of range 0..{self.rows - 1}")
        raw = self._rows(tokens)  # (T, row_bytes) gathered bytes
        shape = (len(tokens), self.cols)
        fmt = self.t.fmt
        if fmt == "f32":
            x = raw.view("<f4").astype(np.float32)
        elif fmt == "f16":
            x = raw.view("<f2").astype(np.float32)
        elif fmt == "i2_s":  # per-tensor scale lives in the tail: re-attach it to the gathered rows
            buf = np.concatenate([raw.reshape(-1), self.tail])
            x = np.asarray(lb.dequantize(buf, fmt, shape), dtype=np.float32).reshape(shape)
        elif fmt in KERNEL_FORMATS:  # whole rows of whole blocks: the codec directly
            x = _lowbit.dequantize(np.ascontiguousarray(raw).reshape(-1), self.t.type_id,
                                   shape[0] * shape[1]).reshape(shape)
        else:
            x = _gguf_dequantize(raw, self.t.type_id, shape)
        if self.rot is not None:
            x = self.rot.unrotate_embedding(x)
        return x


def stderr_notice(msg: str) -> None:
    print(msg, file=sys.stderr)


class Weights:
    """All tensors of one model.  layers[i] is a dict: 'attn_q' -> Linear, 'attn_norm' -> ndarray...,
    and the groups the decoder calls: 'attn_in' (q, k, v), 'gdn_in' and 'ffn_glu' (act(gate) * up)."""

    MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

    def __init__(self, f: GGUFFile, cfg: Config, rot: Rotation | None, foreign: str = "q8_0",
                 notice: Callable[[str], None] | None = stderr_notice, pack: bool = True):
        self.pack = pack
        self.on_matrix_change: Callable[[], None] | None = None  # set by the model: its decoder is stale
        if foreign not in FOREIGN_POLICIES:
            raise ValueError(f"foreign must be one of {FOREIGN_POLICIES}, got {foreign!r}")
        self.f, self.cfg, self.rot, self.foreign = f, cfg, rot, foreign
        self._converted: Counter = Counter()
        self.token_embd = Embedding(f.tensor("token_embd.weight"), rot)
        if self.token_embd.cols != cfg.d_model:
            raise ModelError(f"token_embd.weight has width {self.token_embd.cols}, model width is {cfg.d_model}")
        self.output_norm = self.vector("output_norm.weight", cfg.d_model)
        if "output.weight" in f.tensors:
            self.output = self.linear("output.weight", (cfg.vocab_size, cfg.d_model))
        else:  # tied head: the embedding table, rotated input if the table is stored rotated
            self.output = self.linear("token_embd.weight", (cfg.vocab_size, cfg.d_model),
                                      rotated=self.token_embd.rot is not None)
            # the lookup reads the head's packed copy: one copy of the table in memory
            if self.token_embd.use_packed(self.output.w):
                f.release(self.token_embd.t)
        self.layers = [self._gdn_layer(i) if cfg.is_recurrent(i) else self._attention_layer(i)
                       for i in range(cfg.n_layer)]
        if self._converted and notice is not None:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(self._converted.items()))
            notice(f"notice: no pylowbit kernel for {kinds} tensors: decoded at load and kept as {foreign}")

    def _ffn(self, i: int, layer: dict) -> None:
        """The feed-forward half every block kind shares: its norm, gate / up / down, act(gate) * up."""
        cfg, p = self.cfg, f"blk.{i}."
        d, ff = cfg.d_model, cfg.n_ff
        # qwen35 names the pre-FFN norm post_attention_norm (its only second norm)
        layer["ffn_norm"] = self.vector(p + ("post_attention_norm" if cfg.arch == "qwen35" else "ffn_norm")
                                        + ".weight", d)
        for k, shape in (("ffn_gate", (ff, d)), ("ffn_up", (ff, d)), ("ffn_down", (d, ff))):
            layer[k] = self.linear(f"{p}{k}.weight", shape)
        if cfg.sub_norms:
            layer["ffn_sub_norm"] = self.vector(p + "ffn_sub_norm.weight", ff)
        if cfg.post_norms:
            layer["post_ffw_norm"] = self.vector(p + "post_ffw_norm.weight", d)
        layer["ffn_glu"] = GatedFFN(layer["ffn_gate"], layer["ffn_up"], cfg.ffn_act)

    def _attention_layer(self, i: int) -> dict:
        cfg, p, d = self.cfg, f"blk.{i}.", self.cfg.d_model
        H, Hkv, hd, vd = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim
        q_rows = H * hd * (2 if cfg.attn_gate else 1)  # gated: query and gate interleaved per head
        shapes = {"attn_q": (q_rows, d), "attn_k": (Hkv * hd, d), "attn_v": (Hkv * vd, d),
                  "attn_output": (d, H * vd)}
        layer = {k: self.linear(f"{p}{k}.weight", s) for k, s in shapes.items()}
        layer["attn_norm"] = self.vector(p + "attn_norm.weight", d)
        if cfg.qk_norm:
            layer.update(attn_q_norm=self.vector(p + "attn_q_norm.weight", hd),
                         attn_k_norm=self.vector(p + "attn_k_norm.weight", hd))
        if cfg.sub_norms:
            layer["attn_sub_norm"] = self.vector(p + "attn_sub_norm.weight", d)
        if cfg.post_norms:
            layer["post_attention_norm"] = self.vector(p + "post_attention_norm.weight", d)
        layer["attn_in"] = LinearGroup(layer["attn_q"], layer["attn_k"], layer["attn_v"])
        self._ffn(i, layer)
        return layer

    def _gdn_layer(self, i: int) -> dict:
        """A Gated-DeltaNet layer (QWEN35.md 3.4): the input projections, conv taps, gates' constants,
        the gated norm and ssm_out.  ssm_alpha / ssm_beta read the unrotated input."""
        cfg, p, d, s = self.cfg, f"blk.{i}.", self.cfg.d_model, self.cfg.ssm
        layer = {"attn_norm": self.vector(p + "attn_norm.weight", d)}
        for k, rows in (("attn_qkv", s.conv_channels), ("attn_gate", s.value_dim), ("ssm_beta", s.n_v_heads),
                        ("ssm_alpha", s.n_v_heads)):
            layer[k] = self.linear(f"{p}{k}.weight", (rows, d))
        layer["ssm_out"] = self.linear(p + "ssm_out.weight", (d, s.value_dim))
        if layer["ssm_out"].rot is not None and self.rot.gdn_v_grouped:
            if layer["ssm_out"].prepare is not None:
                raise ModelError(f"{p}ssm_out.weight: a BF16 matrix cannot take a folded rotation")
            layer["ssm_out"].prepare = GroupedHeads(s)
        layer["ssm_conv1d"] = self.vector(p + "ssm_conv1d.weight", (s.conv_channels, s.conv_kernel), f32_only=True)
        layer["ssm_a"] = self.vector(p + "ssm_a", s.n_v_heads, f32_only=True)
        layer["ssm_dt"] = self.vector(p + "ssm_dt.bias", s.n_v_heads, f32_only=True)
        layer["ssm_norm"] = self.vector(p + "ssm_norm.weight", s.state_size)
        proj = (layer["attn_qkv"], layer["attn_gate"], layer["ssm_beta"], layer["ssm_alpha"])
        if all(lin.rot is proj[0].rot and lin.prepare is proj[0].prepare for lin in proj):
            layer["gdn_in"] = (LinearGroup(*proj),)  # one call for the four
        else:  # alpha / beta read the unrotated input (and BF16 ones a rounded copy)
            layer["gdn_in"] = (LinearGroup(*proj[:2]), LinearGroup(*proj[2:]))
        self._ffn(i, layer)
        return layer

    def _matrix_changed(self) -> None:
        if self.on_matrix_change is not None:
            self.on_matrix_change()

    def all_linears(self):
        """Every Linear of the model, the head first (tests wrap them to record their inputs)."""
        yield self.output
        for layer in self.layers:
            yield from (v for v in layer.values() if isinstance(v, Linear))

    def vector(self, name: str, n, f32_only: bool = False) -> np.ndarray:
        """A small float32 tensor of shape (n,) (or n itself when a tuple).  f32_only: the tensor
        must be stored as F32 (llama.cpp has no other kernel for it: a wrong type is a bad file)."""
        t = self.f.tensor(name)
        shape = tuple(n) if isinstance(n, tuple) else (n,)
        if tuple(t.shape) != shape:
            raise ModelError(f"{name} has shape {t.shape}, expected {shape}")
        if f32_only and t.fmt != "f32":
            raise ModelError(f"{name} has type {t.fmt}, expected f32")
        return np.ascontiguousarray(dequantize_info(t), dtype=np.float32)

    def linear(self, name: str, shape: tuple[int, int], rotated: bool | None = None) -> Linear:
        t = self.f.tensor(name)
        if tuple(t.shape) != tuple(shape):
            raise ModelError(f"{name} has shape {t.shape}, expected {shape}")
        if t.fmt in KERNEL_FORMATS:
            w = lb.QTensor(t.data, t.fmt, t.shape)
            if self.pack and lb.packing_pays_off():
                # Repack once into the row-interleaved layout decoding streams fastest; the mapped
                # pages are then dropped so that peak memory stays near the file size (a tied
                # embedding table once the lookup reads the packed copy: __init__).
                w = w.pack()
                if w.is_packed and name != "token_embd.weight":
                    self.f.release(t)
        else:
            self._converted[t.fmt] += 1
            fmt = self.foreign if (self.foreign != "q8_0" or t.shape[-1] % 32 == 0) else "f32"
            w = lb.QTensor(convert_foreign(t, fmt), fmt, t.shape)
            self.f.release(t)
        if rotated is None:
            rotated = self.rot is not None and name in self.rot.weight_names
        lin = Linear(name, w, self.rot if rotated else None, on_change=self._matrix_changed)
        if t.fmt == "bf16":
            lin.prepare = round_bf16
        return lin
