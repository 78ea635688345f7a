"""The decoder: one forward pass for llama / qwen3 / bitnet-b1.58 / gemma3, switched by Config.

Shapes: T = tokens in this call, S = cached positions so far + T, d = d_model, H/Hkv = query/KV
heads, hd = head dim.  Prompts go through GEMM (T > 1); generation through GEMV (T = 1).
"""

from __future__ import annotations

import math
import mmap
import os
import threading

import numpy as np

from ..gguf import GGUFFile
from .config import Config, ModelError
from .hadamard import parse_rotation
from .weights import Weights

DEFAULT_CTX = 4096


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    # x: (..., n); normalised over the last axis, then scaled by w (n,)
    ms = np.square(x).sum(axis=-1, keepdims=True)  # (sum instead of np.mean: per-token call overhead)
    ms *= np.float32(1.0 / x.shape[-1])
    ms += np.float32(eps)
    return x / np.sqrt(ms, out=ms) * w


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * (x + np.float32(0.044715) * x * x * x)))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def relu2(x: np.ndarray) -> np.ndarray:
    r = np.maximum(x, 0)
    return r * r


ACTS = {"silu": silu, "relu2": relu2, "gelu": gelu_tanh}


def rope_tables(positions: np.ndarray, dim: int, base: float, scale: float):
    """cos/sin (T, dim/2) for the rotated dims, computed in float64 then rounded once."""
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = (positions.astype(np.float64) / scale)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, neox: bool) -> np.ndarray:
    # x: (T, heads, hd); the first 2 * cos.shape[1] dims rotate.  NEOX pairs (i, i + dim/2),
    # normal (GPT-J) pairs (2i, 2i + 1).
    half = cos.shape[1]
    out = x.copy()
    c, s = cos[:, None, :], sin[:, None, :]
    if neox:
        a, b = x[..., :half], x[..., half:2 * half]
        out[..., :half] = a * c - b * s
        out[..., half:2 * half] = a * s + b * c
    else:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = a * c - b * s
        out[..., 1:2 * half:2] = a * s + b * c
    return out


def _lazy_zeros(shape) -> np.ndarray:
    """float32 zeros in an anonymous mapping: pages cost memory only once written.  (np.zeros asks
    for transparent huge pages on large arrays, so writing one position of each head would commit
    2 MB per head: the whole cache of a 4k context at once.)"""
    n = int(np.prod(shape))
    return np.frombuffer(mmap.mmap(-1, max(4 * n, 1)), np.float32, count=n).reshape(shape)


class KVCache:
    """K and V per layer as (Hkv, ctx, hd) float32, paid for as positions are written."""

    def __init__(self, cfg: Config, ctx: int):
        self.ctx = ctx
        self.k = [_lazy_zeros((cfg.n_head_kv, ctx, cfg.head_dim)) for _ in range(cfg.n_layer)]
        self.v = [_lazy_zeros((cfg.n_head_kv, ctx, cfg.v_head_dim)) for _ in range(cfg.n_layer)]
        self.n = 0  # positions filled


class Model:
    def __init__(self, path, ctx: int | None = None, threads: int | None = None, foreign: str = "q8_0",
                 notice=...):
        self.file = GGUFFile(path)
        self.cfg = cfg = Config.from_gguf(self.file)
        self.rot = parse_rotation(self.file)
        kw = {} if notice is ... else {"notice": notice}
        self.w = Weights(self.file, cfg, self.rot, foreign=foreign, **kw)
        self.threads = threads
        self.ctx = int(ctx) if ctx else min(cfg.ctx_train, DEFAULT_CTX)
        if self.ctx <= 0:
            raise ModelError(f"context length must be positive, got {self.ctx}")
        self.cache = KVCache(cfg, self.ctx)
        # A model carries its KV cache: two threads stepping it at once would interleave positions.
        # The second caller gets a clear error instead (separate models run concurrently fine).
        self._in_use = threading.Lock()

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    def reset(self) -> None:
        self.cache.n = 0

    def forward(self, tokens, pos: int | None = None, logits: str | int = "last") -> np.ndarray:
        """Run tokens at positions pos.. (default: right after the cache).  logits: "last" -> (vocab,),
        "all" -> (T, vocab), an int i -> (T - i, vocab) for tokens[i:], "none" -> None,
        "hidden" -> the final normed hidden states (T, d) (turn them into logits with .head())."""
        if not self._in_use.acquire(blocking=False):
            raise RuntimeError("this model is already running forward() in another thread; "
                               "use one model per thread")
        try:
            return self._forward(tokens, pos, logits)
        finally:
            self._in_use.release()

    def _forward(self, tokens, pos, logits):
        cfg, w, cache, th = self.cfg, self.w, self.cache, self.threads
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        T = len(tokens)
        pos = cache.n if pos is None else int(pos)
        if T == 0:
            raise ModelError("forward() needs at least one token")
        if pos < 0 or pos > cache.n:
            raise ModelError(f"position {pos} is past the {cache.n} cached positions")
        if pos + T > self.ctx:
            raise ModelError(f"context full: {pos} + {T} tokens exceed the context length {self.ctx}")
        S = pos + T
        H, Hkv, hd, vd = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim
        g = H // Hkv
        positions = np.arange(pos, S)

        x = w.token_embd(tokens)  # (T, d)
        if cfg.embed_scale != 1.0:
            x *= np.float32(cfg.embed_scale)
        # causal mask, and the sliding-window one: key j visible to query i iff j <= i (and i - j < window)
        qi, kj = positions[:, None], np.arange(S)[None, :]
        causal = kj <= qi
        masks = {False: np.where(causal, 0, -np.inf).astype(np.float32)}
        if cfg.sliding_window:
            masks[True] = np.where(causal & (qi - kj < cfg.sliding_window), 0, -np.inf).astype(np.float32)
        ropes = {}
        act = ACTS[cfg.ffn_act]

        for il, L in enumerate(w.layers):
            # --- attention
            h = rms_norm(x, L["attn_norm"], cfg.eps)
            q = L["attn_q"](h, th).reshape(T, H, hd)
            k = L["attn_k"](h, th).reshape(T, Hkv, hd)
            v = L["attn_v"](h, th).reshape(T, Hkv, vd)
            if cfg.qk_norm:
                q = rms_norm(q, L["attn_q_norm"], cfg.eps)
                k = rms_norm(k, L["attn_k_norm"], cfg.eps)
            rope = cfg.layer_rope(il)
            if rope not in ropes:
                ropes[rope] = rope_tables(positions, cfg.rope_dim, *rope)
            q = apply_rope(q, *ropes[rope], cfg.rope_neox)
            k = apply_rope(k, *ropes[rope], cfg.rope_neox)
            cache.k[il][:, pos:S] = k.transpose(1, 0, 2)
            cache.v[il][:, pos:S] = v.transpose(1, 0, 2)
            K, V = cache.k[il][:, :S], cache.v[il][:, :S]  # (Hkv, S, hd)
            qg = q.reshape(T, Hkv, g, hd).transpose(1, 2, 0, 3)  # (Hkv, g, T, hd)
            scores = np.matmul(qg, K.transpose(0, 2, 1)[:, None]) * np.float32(cfg.attn_scale)  # (Hkv, g, T, S)
            scores += masks[cfg.is_swa(il)]
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            o = np.matmul(scores, V[:, None])  # (Hkv, g, T, vd)
            o = o.transpose(2, 0, 1, 3).reshape(T, H * vd)
            if cfg.sub_norms:
                o = rms_norm(o, L["attn_sub_norm"], cfg.eps)
            o = L["attn_output"](o, th)
            if cfg.post_norms:
                o = rms_norm(o, L["post_attention_norm"], cfg.eps)
            x = x + o
            # --- feed-forward: act(gate) * up -> down
            h = rms_norm(x, L["ffn_norm"], cfg.eps)
            m = act(L["ffn_gate"](h, th)) * L["ffn_up"](h, th)
            if cfg.sub_norms:
                m = rms_norm(m, L["ffn_sub_norm"], cfg.eps)
            o = L["ffn_down"](m, th)
            if cfg.post_norms:
                o = rms_norm(o, L["post_ffw_norm"], cfg.eps)
            x = x + o
        cache.n = S

        if logits == "none":
            return None
        if logits == "hidden":
            return rms_norm(x, w.output_norm, cfg.eps)
        if logits == "last":
            x = x[-1:]
        elif logits != "all":
            x = x[int(logits):]
        out = self.head(rms_norm(x, w.output_norm, cfg.eps))
        return out[0] if logits == "last" else out

    def head(self, h: np.ndarray) -> np.ndarray:
        """Logits (T, vocab) from final normed hidden states (T, d)."""
        return self.w.output(np.ascontiguousarray(h, dtype=np.float32), self.threads)


def load_model(path: str | os.PathLike, **kw) -> Model:
    return Model(path, **kw)
