"""Weights of a GGUF model: matrices as pylowbit QTensors over the mapped file (zero copy), norm
vectors as float32, and decode-at-load for types without a pylowbit kernel."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Callable

import numpy as np

from ..gguf import TYPES, GGUFFile, TensorInfo
from .config import Config, ModelError
from .hadamard import Rotation

# Types liblowbit has GEMV/GEMM kernels for: used straight from the mapped file.
KERNEL_FORMATS = {"f32", "f16", "q8_0", "tq1_0", "tq2_0", "i2_s", "q1_0", "q2_0", "pq2_0", "ptq1_0"}
FOREIGN_POLICIES = ("q8_0", "f16", "f32")


def _lb():
    import pylowbit as lb

    return lb


def _gguf_dequantize(data: np.ndarray, tid: int, shape) -> np.ndarray:
    """Decode a type pylowbit has no kernel for through gguf-py's numpy dequantizers."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    try:
        qt = GGMLQuantizationType(tid)
    except ValueError:
        raise ModelError(f"no decoder for GGML type {TYPES[tid].name}") from None
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    out = dequantize(np.asarray(data).reshape(rows, -1), qt)
    return np.ascontiguousarray(out, dtype=np.float32).reshape(shape)


def dequantize_info(t: TensorInfo) -> np.ndarray:
    """float32 copy of any tensor (reference paths and small vectors)."""
    if t.fmt == "f32":
        return np.frombuffer(t.data, dtype="<f4").reshape(t.shape).astype(np.float32)
    if t.fmt == "f16":
        return np.frombuffer(t.data, dtype="<f2").reshape(t.shape).astype(np.float32)
    if t.fmt in KERNEL_FORMATS:
        return np.asarray(_lb().dequantize(t.data, t.fmt, t.shape), dtype=np.float32).reshape(t.shape)
    return _gguf_dequantize(t.data, t.type_id, t.shape)


class Linear:
    """y[T, rows] = x[T, cols] . W^T; W a QTensor.  A folded rotation rotates x first."""

    def __init__(self, name: str, w, rot: Rotation | None = None):
        self.name = name
        self.w = w
        self.rot = rot
        self.rows, self.cols = w.shape

    def __call__(self, x: np.ndarray, threads: int | None = None) -> np.ndarray:
        # x: (T, cols) float32
        if self.rot is not None:
            x = self.rot.rotate(x)
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.shape[0] == 1:
            return self.w.gemv(x[0], threads=threads)[None, :]
        return self.w.gemm(x, threads=threads)


class Embedding:
    """Row lookup from the mapped table, decoding only the rows asked for."""

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

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.rows):
            raise ModelError(f"token id out of range 0..{self.rows - 1}")
        raw = self.table[tokens]  # (T, row_bytes) gathered bytes
        shape = (len(tokens), self.cols)
        fmt = self.t.fmt
        if fmt == "f32":
            x = raw.view("<f4").astype(np.float32)
        elif fmt == "f16":
            x = raw.view("<f2").astype(np.float32)
        elif fmt == "i2_s":  # per-tensor scale lives in the tail: re-attach it to the gathered rows
            buf = np.concatenate([raw.reshape(-1), self.tail])
            x = np.asarray(_lb().dequantize(buf, fmt, shape), dtype=np.float32).reshape(shape)
        elif fmt in KERNEL_FORMATS:
            x = np.asarray(_lb().dequantize(np.ascontiguousarray(raw).reshape(-1), fmt, shape),
                           dtype=np.float32).reshape(shape)
        else:
            x = _gguf_dequantize(raw, self.t.type_id, shape)
        if self.rot is not None:
            x = self.rot.unrotate_embedding(x)
        return x


def _stderr_notice(msg: str) -> None:
    print(msg, file=sys.stderr)


class Weights:
    """All tensors of one model.  layers[i] is a dict: 'attn_q' -> Linear, 'attn_norm' -> ndarray..."""

    MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

    def __init__(self, f: GGUFFile, cfg: Config, rot: Rotation | None, foreign: str = "q8_0",
                 notice: Callable[[str], None] | None = _stderr_notice, pack: bool = True):
        self.pack = pack
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
        q_w, kv_w, v_w = cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim, cfg.n_head_kv * cfg.v_head_dim
        shapes = {
            "attn_q": (q_w, cfg.d_model), "attn_k": (kv_w, cfg.d_model), "attn_v": (v_w, cfg.d_model),
            "attn_output": (cfg.d_model, cfg.n_head * cfg.v_head_dim),
            "ffn_gate": (cfg.n_ff, cfg.d_model), "ffn_up": (cfg.n_ff, cfg.d_model), "ffn_down": (cfg.d_model, cfg.n_ff),
        }
        vecs = {"attn_norm": cfg.d_model, "ffn_norm": cfg.d_model}
        if cfg.qk_norm:
            vecs.update(attn_q_norm=cfg.head_dim, attn_k_norm=cfg.head_dim)
        if cfg.sub_norms:
            vecs.update(attn_sub_norm=cfg.d_model, ffn_sub_norm=cfg.n_ff)
        if cfg.post_norms:
            vecs.update(post_attention_norm=cfg.d_model, post_ffw_norm=cfg.d_model)
        self.layers = []
        for i in range(cfg.n_layer):
            layer = {k: self.linear(f"blk.{i}.{k}.weight", s) for k, s in shapes.items()}
            layer.update({k: self.vector(f"blk.{i}.{k}.weight", n) for k, n in vecs.items()})
            self.layers.append(layer)
        if self._converted and notice is not None:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(self._converted.items()))
            notice(f"notice: no pylowbit kernel for {kinds} tensors: decoded at load and kept as {foreign}")

    def vector(self, name: str, n: int) -> np.ndarray:
        t = self.f.tensor(name)
        if t.shape != (n,):
            raise ModelError(f"{name} has shape {t.shape}, expected ({n},)")
        return dequantize_info(t)

    def linear(self, name: str, shape: tuple[int, int], rotated: bool | None = None) -> Linear:
        lb = _lb()
        t = self.f.tensor(name)
        if tuple(t.shape) != tuple(shape):
            raise ModelError(f"{name} has shape {t.shape}, expected {shape}")
        if t.fmt in KERNEL_FORMATS:
            w = lb.QTensor(t.data, t.fmt, t.shape)
            if self.pack and lb.packing_pays_off():
                # Repack once into the row-interleaved layout decoding streams fastest; the mapped
                # pages are then dropped so that peak memory stays near the file size (the tied
                # embedding table is still read by the lookup and stays mapped).
                w = w.pack()
                if w.is_packed and name != "token_embd.weight":
                    self.f.release(t)
        else:
            self._converted[t.fmt] += 1
            x = _gguf_dequantize(t.data, t.type_id, t.shape)
            fmt = self.foreign if (self.foreign != "q8_0" or t.shape[-1] % 32 == 0) else "f32"
            w = lb.quantize(x, fmt)
            del x
            self.f.release(t)
        if rotated is None:
            rotated = self.rot is not None and name in self.rot.weight_names
        return Linear(name, w, self.rot if rotated else None)
