"""The decoder: one forward pass for llama / qwen3 / bitnet-b1.58 / gemma3 / qwen35, switched by
Config.  A layer is an attention block or (qwen35) a Gated-DeltaNet block, each followed by the
shared feed-forward block.

Shapes: T = tokens in this call, S = cached positions so far + T, d = d_model, H/Hkv = query/KV
heads, hd = head dim.  Prompts go through GEMM (T > 1); generation through GEMV (T = 1).  Everything
between the matrix products (norms, RoPE, attention over the KV cache, activations, residual adds)
is one liblowbit call each (pylowbit._ops): as numpy, time outside the kernels was ~23 % of a
decode token at the BitNet 2B shape, ~5-6 % with them in C (bench/python_share.py), ~1 % with the
layer loop in C too (below).  Matrices that read the same input run as one call
and one thread-pool job (weights.LinearGroup: q/k/v; GatedFFN: gate/up with the activation applied
per row tile on every thread): ~120 pool dispatches a token instead of ~210, and four Python calls
fewer per layer.  When every layer matrix is a liblowbit one and none has a folded rotation, the
whole layer loop is one call (_ops.DecoderLayers: the same C calls, the same bits), so that a
2-thread decode step's other thread no longer waits on the interpreter; the Python loop
(_python_layers) stays the reference and the path of the other models.  The float64 numpy
reference these must match is tests/model_reference.py.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .. import _ops as ops
from ..gguf import GGUFFile
from .config import Config, ModelError
from .hadamard import parse_rotation
from .weights import Linear, Weights, anon_array

DEFAULT_CTX = 4096


def rope_tables(positions: np.ndarray, dim: int, base: float, scale: float, sections: tuple = ()):
    """cos/sin (T, dim/2) for the rotated dims, computed in float64 then rounded once.  sections:
    the interleaved multi-section RoPE (qwen35) as llama.cpp applies it to text, where each token's
    position components are (p, p, p, 0): pair i takes p unless its sector falls to the fourth
    component, which leaves it unrotated."""
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    if sections:
        inv = inv * imrope_text_pairs(dim // 2, sections)
    ang = (positions.astype(np.float64) / scale)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def imrope_text_pairs(half: int, sections: tuple) -> np.ndarray:
    """1.0 where rotated pair i of the interleaved multi-section RoPE takes one of the three text
    position components, 0.0 where it takes the fourth (llama.cpp's IMROPE sector rule)."""
    s0, s1, s2, _ = sections
    sector = np.arange(half) % sum(sections)
    text = (((sector % 3 == 0) & (sector < 3 * s0)) | ((sector % 3 == 1) & (sector < 3 * s1)) |
            ((sector % 3 == 2) & (sector < 3 * s2)))
    return text.astype(np.float64)


class KVCache:
    """K and V per attention layer as (Hkv, ctx, hd) float32, paid for as positions are written
    (None for a recurrent layer, which keeps a RecurrentState instead)."""

    def __init__(self, cfg: Config, ctx: int):
        self.ctx = ctx
        attn = [not cfg.is_recurrent(il) for il in range(cfg.n_layer)]
        self.k = [anon_array((cfg.n_head_kv, ctx, cfg.head_dim), np.float32) if a else None for a in attn]
        self.v = [anon_array((cfg.n_head_kv, ctx, cfg.v_head_dim), np.float32) if a else None for a in attn]
        self.n = 0  # positions filled

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.k + self.v if a is not None)


class RecurrentState:
    """A sequence's Gated-DeltaNet state per recurrent layer (QWEN35.md 5): the last K - 1 raw
    attn_qkv outputs per channel, conv (C, K - 1), and the delta-rule state, ssm (Hv, d, d) with
    ssm[h, j, i] = S[i][j] (i the key coordinate).  Zero for a new sequence; it cannot be rewound."""

    def __init__(self, cfg: Config):
        s = cfg.ssm
        layers = [il for il in range(cfg.n_layer) if cfg.is_recurrent(il)]
        self.conv = {il: anon_array((s.conv_channels, s.conv_kernel - 1), np.float32) for il in layers}
        self.ssm = {il: anon_array((s.n_v_heads, s.state_size, s.state_size), np.float32) for il in layers}

    def reset(self) -> None:
        for a in (*self.conv.values(), *self.ssm.values()):
            a.fill(0)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.conv.values(), *self.ssm.values()))


class Model:
    def __init__(self, path, ctx: int | None = None, threads: int | None = None, foreign: str = "q8_0",
                 notice=...):
        if threads is not None and (not isinstance(threads, (int, np.integer)) or threads < 1):
            raise ValueError(f"threads must be >= 1, got {threads}")  # (0 is not "default": say None)
        if ctx is not None and int(ctx) <= 0:
            raise ModelError(f"context length must be positive, got {ctx}")
        self.file = GGUFFile(path)
        try:
            self.cfg = cfg = Config.from_gguf(self.file)
            self.rot = parse_rotation(self.file, cfg)
            kw = {} if notice is ... else {"notice": notice}
            self.w = Weights(self.file, cfg, self.rot, foreign=foreign, **kw)
        except BaseException:
            self.file.close()  # a refused file is unmapped now, not at garbage collection
            raise
        self.threads = None if threads is None else int(threads)
        self.ctx = int(ctx) if ctx is not None else min(cfg.ctx_train, DEFAULT_CTX)  # both checked > 0
        self.cache = KVCache(cfg, self.ctx)
        self.state = RecurrentState(cfg) if cfg.ssm is not None else None
        # per layer: (RoPE (base, scale), attention window or 0), looked up once, not per token
        self._attn = [(cfg.layer_rope(il), cfg.sliding_window if cfg.is_swa(il) else 0)
                      for il in range(cfg.n_layer)]
        self._layers, self._layers_key = None, None  # the one-call layer loop (_layer_loop)
        self._rope = {}  # RoPE (base, scale) -> cos, sin tables of positions 0.. (_rope_rows)
        self._bufs1 = None  # the layer loop's scratch for one token, reused step to step
        # A model carries its KV cache: two threads stepping it at once would interleave positions.
        # The second caller gets a clear error instead (separate models run concurrently fine).
        self._in_use = threading.Lock()

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    def memory_summary(self) -> str:
        """One line: the sequence memory this model holds besides its weights (as llama.cpp logs it)."""
        cfg, mib = self.cfg, 1 / (1 << 20)
        n_attn = sum(k is not None for k in self.cache.k)
        line = f"KV cache {self.cache.nbytes * mib:.2f} MiB (f32, ctx {self.ctx}, {n_attn} layers)"
        if self.state is not None:
            line += (f", recurrent state {self.state.nbytes * mib:.2f} MiB "
                     f"(f32, {cfg.n_layer - n_attn} Gated-DeltaNet layers)")
        return line

    def reset(self) -> None:
        self.cache.n = 0
        if self.state is not None:
            self.state.reset()

    def _layer_loop(self):
        """The layers as one _ops.DecoderLayers call (the same C calls as _python_layers, so the
        same bits, without the interpreter between them), or None when a layer needs the Python
        loop: a folded rotation, or a matrix that is not a liblowbit one.  Remade when a linear's
        matrix is swapped or the KV cache replaced (it holds their pointers)."""
        if self.state is not None:  # the one-call loop knows attention layers only
            return None
        key = (Linear.generation, self.cache)  # the cache itself (compared by identity), not its id
        if self._layers_key != key:
            self._layers, self._layers_key = None, key
            layers = []
            for il, L in enumerate(self.w.layers):
                lins = [L[k] for k in ops.MATRIX_NAMES]
                if any(lin.m is None or lin.rot is not None for lin in lins):
                    return None
                layers.append((tuple(lin.m for lin in lins), tuple(L.get(k) for k in ops.NORM_NAMES),
                               self.cache.k[il], self.cache.v[il], self._attn[il][1]))
            cfg = self.cfg
            self._layers = ops.DecoderLayers(layers, cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim,
                                             cfg.eps, cfg.attn_scale, cfg.rope_neox,
                                             ops.ACTIVATIONS[cfg.ffn_act])
        return self._layers

    def _rope_rows(self, rope, pos: int, T: int):
        """cos / sin rows of positions pos..pos+T-1 for RoPE `rope`: views of one table per RoPE,
        grown (doubling, up to the context) as positions are reached, so a decode step computes
        no trigonometry.  Each row is rope_tables' own for its position."""
        tab = self._rope.get(rope)
        if tab is None or len(tab[0]) < pos + T:
            n = min(self.ctx, max(pos + T, 2 * (len(tab[0]) if tab is not None else 32)))
            tab = self._rope[rope] = rope_tables(np.arange(n), self.cfg.rope_dim, *rope, self.cfg.rope_sections)
        return tab[0][pos:pos + T], tab[1][pos:pos + T]

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
        if self.state is not None and pos != cache.n:
            if pos != 0:
                raise ModelError(f"a recurrent state cannot go back to position {pos} from {cache.n}: "
                                 "reset() and run the prefix again")
            self.reset()
        if pos + T > self.ctx:
            raise ModelError(f"context full: {pos} + {T} tokens exceed the context length {self.ctx}")
        S = pos + T
        H, Hkv, hd, vd = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim

        x = w.token_embd(tokens)  # (T, d)
        if cfg.embed_scale != 1.0:
            x *= np.float32(cfg.embed_scale)
        layers = self._layer_loop()
        if layers is not None:
            tables = {rope: self._rope_rows(rope, pos, T) for rope in {r for r, _ in self._attn}}
            bufs = self._bufs1 if T == 1 else None
            if bufs is None:
                ws = w.workspace(T)
                bufs = (np.empty((T, cfg.d_model), np.float32), *ws["attn_in"],
                        np.empty((T, H * vd), np.float32), ws["d_model"], *ws["ffn_glu"])
                if T == 1:
                    self._bufs1 = bufs
            layers.run(x, pos, [tables[r][0] for r, _ in self._attn], [tables[r][1] for r, _ in self._attn],
                       bufs, th or 0)
        else:
            self._python_layers(x, pos)
        cache.n = S

        if logits == "none":
            return None
        if logits == "hidden":
            return ops.rms_norm(x, w.output_norm, cfg.eps)
        if logits == "last":
            x = x[-1:]
        elif logits != "all":
            x = x[int(logits):]
        out = self.head(ops.rms_norm(np.ascontiguousarray(x), w.output_norm, cfg.eps))
        return out[0] if logits == "last" else out

    def _python_layers(self, x, pos):
        """The layers, op by op from Python: x (T, d) in place.  The reference of _layer_loop, and
        the path of models it cannot take (folded rotations, recurrent layers)."""
        cfg, w = self.cfg, self.w
        T = x.shape[0]
        ropes = {}
        ws = w.workspace(T)  # the matrix products' outputs, reused by every layer
        norm, add, eps = ops.rms_norm, ops.add, cfg.eps
        for il, (L, (rope, window)) in enumerate(zip(w.layers, self._attn)):
            h = norm(x, L["attn_norm"], eps)
            if cfg.is_recurrent(il):
                o = self._gdn(il, L, h, ws)
            else:
                if rope not in ropes:
                    ropes[rope] = self._rope_rows(rope, pos, T)
                o = self._attention(il, L, h, pos, ropes[rope], window, ws)
            add(x, o, x)
            self._ffn(L, x, ws)

    def _attention(self, il, L, h, pos, rope, window, ws):
        """Self-attention over the KV cache of layer il: (T, d) normed input -> (T, d) output."""
        cfg, th = self.cfg, self.threads
        T, eps, norm = h.shape[0], cfg.eps, ops.rms_norm
        H, Hkv, hd, vd = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim
        q, k, v = L["attn_in"](h, th, ws["attn_in"])  # one C call, one thread-pool job for the three
        gate = None
        if cfg.attn_gate:  # per head: hd query values, then hd gate values
            qg = q.reshape(T, H, 2, hd)
            q, gate = np.ascontiguousarray(qg[:, :, 0]), np.ascontiguousarray(qg[:, :, 1])
        q, k, v = q.reshape(T, H, hd), k.reshape(T, Hkv, hd), v.reshape(T, Hkv, vd)
        if cfg.qk_norm:
            norm(q, L["attn_q_norm"], eps, q)
            norm(k, L["attn_k_norm"], eps, k)
        cos, sin = rope
        ops.rope(q, cos, sin, cfg.rope_neox)
        ops.rope(k, cos, sin, cfg.rope_neox)
        # stores k, v at pos.. in the cache, then attends over positions 0..S-1
        o = ops.attention(q, k, v, self.cache.k[il], self.cache.v[il], pos, window, cfg.attn_scale, None, th or 0)
        if gate is not None:
            ops.sigmoid_mul(o, gate, o)
        o = o.reshape(T, H * vd)
        if cfg.sub_norms:
            norm(o, L["attn_sub_norm"], eps, o)
        o = L["attn_output"](o, th, ws["d_model"])
        if cfg.post_norms:
            norm(o, L["post_attention_norm"], eps, o)
        return o

    def _gdn(self, il, L, h, ws):
        """Gated-DeltaNet layer il (QWEN35.md 3.4): (T, d) normed input -> (T, d) output, advancing
        the layer's recurrent state by T tokens."""
        cfg, th, s = self.cfg, self.threads, self.cfg.ssm
        T, d = h.shape[0], s.state_size
        outs = [o for g, wg in zip(L["gdn_in"], ws["gdn_in"]) for o in g(h, th, wg)]
        qkv, z, b, a = outs
        y = ops.ssm_conv(qkv, L["ssm_conv1d"], self.state.conv[il])  # (T, C): conv then SiLU
        dk = s.key_dim
        q = ops.l2_norm(np.ascontiguousarray(y[:, :dk]).reshape(T, s.n_k_heads, d), cfg.eps)
        k = ops.l2_norm(np.ascontiguousarray(y[:, dk:2 * dk]).reshape(T, s.n_k_heads, d), cfg.eps)
        v = np.ascontiguousarray(y[:, 2 * dk:]).reshape(T, s.n_v_heads, d)
        beta, g = ops.gdn_gates(b, a, L["ssm_a"], L["ssm_dt"])
        o = ops.gated_delta_rule(q, k, v, g, beta, self.state.ssm[il], threads=th or 0)
        o = ops.gated_rms_norm_silu(o, L["ssm_norm"], z.reshape(T, s.n_v_heads, d), cfg.eps, o)
        return L["ssm_out"](o.reshape(T, s.value_dim), th, ws["d_model"])

    def _ffn(self, L, x, ws):
        """x += the feed-forward block of layer L (its norm, act(gate) * up, down), in place."""
        cfg, th, eps, norm = self.cfg, self.threads, self.cfg.eps, ops.rms_norm
        h = norm(x, L["ffn_norm"], eps)
        m = L["ffn_glu"](h, th, ws["ffn_glu"])  # gate, up and the activation in one C call
        if cfg.sub_norms:
            norm(m, L["ffn_sub_norm"], eps, m)
        o = L["ffn_down"](m, th, ws["d_model"])
        if cfg.post_norms:
            norm(o, L["post_ffw_norm"], eps, o)
        ops.add(x, o, x)

    def head(self, h: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Logits (T, vocab) from final normed hidden states (T, d), into `out` (T, vocab) float32 if given."""
        return self.w.output(np.ascontiguousarray(h, dtype=np.float32), self.threads, out)


def load_model(path: str | os.PathLike, **kw) -> Model:
    return Model(path, **kw)
