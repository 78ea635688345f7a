"""The decoder: one forward pass for llama / qwen3 / bitnet-b1.58 / gemma3 / qwen35, switched by
Config.  A layer is an attention block (qwen35: gated attention) or a Gated-DeltaNet block, each
followed by the shared feed-forward block.  The layers run in C, one call for all of them
(native/src/decoder.c through _ops.Decoder, which documents the shapes); this module looks up the
embedding rows, hands the C loop its weights, caches, states and RoPE tables, and computes the
head.  The float64 numpy reference these must match is tests/model_reference.py.

Shapes: T = tokens in this call, d = d_model.  Prompts go through GEMM (T > 1); generation through
GEMV (T = 1).  docs/PERFORMANCE.md#decoder-layer-loop has what the C loop saves.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

import numpy as np

from .. import _ops as ops
from ..gguf import GGUFFile
from .config import Config, ModelError
from .hadamard import parse_rotation
from .linear import GatedFFN, LinearGroup, prep_name
from .tensors import anon_array
from .weights import Weights, stderr_notice

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
        conv, ssm = self.shapes(cfg)
        layers = [il for il in range(cfg.n_layer) if cfg.is_recurrent(il)]
        self.conv = {il: anon_array(conv, np.float32) for il in layers}
        self.ssm = {il: anon_array(ssm, np.float32) for il in layers}

    @staticmethod
    def shapes(cfg: Config) -> tuple[tuple, tuple]:
        """A recurrent layer's (conv, ssm) state shapes, both float32."""
        s = cfg.ssm
        return (s.conv_channels, s.conv_kernel - 1), (s.n_v_heads, s.state_size, s.state_size)

    @classmethod
    def nbytes_for(cls, cfg: Config) -> int:
        """The state's bytes for a model of cfg (0 without recurrent layers), before allocating it."""
        if cfg.ssm is None:
            return 0
        per_layer = sum(4 * int(np.prod(shape)) for shape in cls.shapes(cfg))
        return per_layer * sum(cfg.is_recurrent(il) for il in range(cfg.n_layer))

    def reset(self) -> None:
        for a in (*self.conv.values(), *self.ssm.values()):
            a.fill(0)

    def snapshot(self) -> dict:
        """A copy of the state: restore() puts it back, so a sequence can resume from the position it
        was taken at (the state itself cannot be rewound)."""
        return {key: {il: a.copy() for il, a in part.items()}
                for key, part in (("conv", self.conv), ("ssm", self.ssm))}

    def restore(self, snap: dict) -> None:
        """Copy a snapshot() back in place (the C decoder holds these arrays' pointers)."""
        for key, part in (("conv", self.conv), ("ssm", self.ssm)):
            for il, a in part.items():
                np.copyto(a, snap[key][il])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.conv.values(), *self.ssm.values()))


class Model:
    def __init__(self, path, ctx: int | None = None, threads: int | None = None, foreign: str = "q8_0",
                 notice: Callable[[str], None] | None = stderr_notice):
        if threads is not None and (not isinstance(threads, (int, np.integer)) or threads < 1):
            raise ValueError(f"threads must be >= 1, got {threads}")  # (0 is not "default": say None)
        if ctx is not None and int(ctx) <= 0:
            raise ModelError(f"context length must be positive, got {ctx}")
        self.file = GGUFFile(path)
        try:
            self.cfg = cfg = Config.from_gguf(self.file)
            self.rot = parse_rotation(self.file, cfg)
            self.w = Weights(self.file, cfg, self.rot, foreign=foreign, notice=notice)
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
        # the distinct RoPEs, in layer order: a layer's index of its cos / sin tables in a run
        self._distinct_ropes = list(dict.fromkeys(rope for rope, _ in self._attn))
        self._dec, self._dec_for = None, None  # the layer loop (_decoder) and the cache / state it writes
        self.w.on_matrix_change = self._forget_decoder
        self._rope_tables = {}  # RoPE (base, scale) -> cos, sin tables of positions 0.. (_rope_rows)
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

    def rewind(self, n: int, state: dict | None = None) -> None:
        """Go back to the first n cached positions (later K / V are overwritten as the sequence goes
        on).  A recurrent model cannot go back by itself: it needs `state`, the snapshot
        (RecurrentState.snapshot) taken when exactly those n positions had run."""
        if not 0 <= n <= self.cache.n:
            raise ModelError(f"cannot rewind to position {n}: {self.cache.n} positions are cached")
        if self.state is not None:
            if n == 0:
                self.reset()
                return
            if state is None:
                raise ModelError("a recurrent state cannot be rewound without a snapshot of it")
            self.state.restore(state)
        self.cache.n = n

    def _decoder(self) -> ops.Decoder:
        """The layers as one _ops.Decoder, made at the first forward and again after a matrix was
        swapped (Weights.on_matrix_change) or the KV cache / recurrent state replaced: it holds
        their pointers."""
        if self._dec is None or self._dec_for[0] is not self.cache or self._dec_for[1] is not self.state:
            cfg, s = self.cfg, self.cfg.ssm
            config = dict(d_model=cfg.d_model, n_ff=cfg.n_ff, n_head=cfg.n_head, n_head_kv=cfg.n_head_kv,
                          head_dim=cfg.head_dim, v_head_dim=cfg.v_head_dim, ctx=self.ctx,
                          rope_half=cfg.rope_dim // 2, rope_neox=cfg.rope_neox, eps=cfg.eps,
                          attn_scale=cfg.attn_scale, ffn_act=ops.ACTIVATIONS[cfg.ffn_act],
                          ssm_k_heads=s.n_k_heads if s else 0, ssm_v_heads=s.n_v_heads if s else 0,
                          ssm_state=s.state_size if s else 0, ssm_conv=s.conv_kernel if s else 0)
            self._dec = ops.Decoder(config, [self._layer_spec(il) for il in range(cfg.n_layer)])
            self._dec_for = (self.cache, self.state)
        return self._dec

    def _forget_decoder(self) -> None:
        self._dec = None

    def _layer_spec(self, il: int) -> dict:
        """Layer il's weights, norms, cache or state, as _ops.Decoder takes them."""
        cfg, L = self.cfg, self.w.layers[il]
        spec = dict(attn_norm=L["attn_norm"], post_attn_norm=L.get("post_attention_norm"), ffn_norm=L["ffn_norm"],
                    ffn_glu=_group_spec(L["ffn_glu"]), ffn_sub_norm=L.get("ffn_sub_norm"),
                    ffn_down=_group_spec(L["ffn_down"]), post_ffw_norm=L.get("post_ffw_norm"))
        if cfg.is_recurrent(il):
            spec.update(kind="gdn", gdn_in=[_group_spec(g) for g in L["gdn_in"]], conv_w=L["ssm_conv1d"],
                        conv_state=self.state.conv[il], ssm_a=L["ssm_a"], ssm_dt=L["ssm_dt"],
                        ssm_state=self.state.ssm[il], ssm_norm=L["ssm_norm"], out=_group_spec(L["ssm_out"]))
            if cfg.post_norms:
                raise ModelError("post-norms around a Gated-DeltaNet block are not defined")
            return spec
        rope, window = self._attn[il]
        spec.update(kind="gated_attention" if cfg.attn_gate else "attention", qkv=_group_spec(L["attn_in"]),
                    q_norm=L.get("attn_q_norm"), k_norm=L.get("attn_k_norm"), rope=self._distinct_ropes.index(rope),
                    window=window, k_cache=self.cache.k[il], v_cache=self.cache.v[il],
                    attn_sub_norm=L.get("attn_sub_norm"), out=_group_spec(L["attn_output"]))
        return spec

    def _rope_rows(self, rope, pos: int, T: int):
        """cos / sin rows of positions pos..pos+T-1 for RoPE `rope`: views of one table per RoPE,
        grown (doubling, up to the context) as positions are reached, so a decode step computes
        no trigonometry.  Each row is rope_tables' own for its position."""
        tab = self._rope_tables.get(rope)
        if tab is None or len(tab[0]) < pos + T:
            n = min(self.ctx, max(pos + T, 2 * (len(tab[0]) if tab is not None else 32)))
            tab = self._rope_tables[rope] = rope_tables(np.arange(n), self.cfg.rope_dim, *rope, self.cfg.rope_sections)
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

        x = w.token_embd(tokens)  # (T, d)
        if cfg.embed_scale != 1.0:
            x *= np.float32(cfg.embed_scale)
        tables = [self._rope_rows(rope, pos, T) for rope in self._distinct_ropes]
        self._decoder().run(x, pos, [c for c, _ in tables], [s for _, s in tables], th)
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

    def head(self, h: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Logits (T, vocab) from final normed hidden states (T, d), into `out` (T, vocab) float32 if given."""
        return self.w.output(np.ascontiguousarray(h, dtype=np.float32), self.threads, out)


def _group_spec(g) -> tuple:
    """A Linear / LinearGroup / GatedFFN as _ops.Decoder takes it: (host, matrices or None, rows,
    cols, glu, input preparation, rotation block, signs).  Matrices None (one is not a liblowbit
    matrix, or the linears differ in their input transform): the C loop calls g itself."""
    lins = g.linears if isinstance(g, LinearGroup) else (g,)
    rot, prep = lins[0].rot, lins[0].prepare
    native = all(lin.m is not None and lin.rot is rot and lin.prepare is prep for lin in lins)
    return (g, tuple(lin.m for lin in lins) if native else None, tuple(lin.rows for lin in lins), lins[0].cols,
            isinstance(g, GatedFFN), prep_name(prep), rot.block if rot is not None else 0,
            rot.signs_for(lins[0].cols) if rot is not None else None)


def load_model(path: str | os.PathLike, **kw) -> Model:
    return Model(path, **kw)
