"""Model hyper-parameters read from GGUF metadata: one dataclass, one switch per architecture."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..gguf import GGUFError, GGUFFile


class ModelError(ValueError):
    """The file is a valid GGUF but not a model this decoder can run (the message says why)."""


# Per-architecture switches.  Everything else in the forward pass is shared.
ARCHS = {
    #               rope_neox qk_norm sub_norms post_norms ffn_act   embed_scale
    "llama":        (False,   False,  False,    False,     "silu",   False),
    "qwen3":        (True,    True,   False,    False,     "silu",   False),
    "bitnet-b1.58": (True,    False,  True,     False,     "relu2",  False),
    "gemma3":       (True,    True,   False,    True,      "gelu",   True),
}
# gemma3 local (sliding-window) layers use this RoPE base whatever the file says for global layers
# (llama.cpp hard-codes it too); every 6th layer is global unless the file gives a pattern.
GEMMA3_LOCAL_ROPE_BASE = 10000.0
GEMMA3_SWA_PATTERN = 6


@dataclass
class Config:
    arch: str
    n_layer: int
    d_model: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int  # keys and queries
    v_head_dim: int
    vocab_size: int
    eps: float
    rope_base: float
    rope_base_local: float
    rope_dim: int
    rope_scale: float  # linear position scaling (1 = none)
    rope_neox: bool
    ctx_train: int
    sliding_window: int  # 0 = none
    swa_pattern: int  # layer il uses the window when il % swa_pattern < swa_pattern - 1
    qk_norm: bool
    sub_norms: bool
    post_norms: bool
    ffn_act: str
    embed_scale: float
    attn_scale: float

    def is_swa(self, il: int) -> bool:
        return self.sliding_window > 0 and (self.swa_pattern <= 1 or il % self.swa_pattern < self.swa_pattern - 1)

    def layer_rope(self, il: int) -> tuple[float, float]:
        """(base, linear scale) of layer il: gemma3's local layers keep base 10000 and no scaling."""
        if self.arch == "gemma3" and self.is_swa(il):
            return self.rope_base_local, 1.0
        return self.rope_base, self.rope_scale

    @classmethod
    def from_gguf(cls, f: GGUFFile) -> "Config":
        try:
            arch = f.get("general.architecture", str)
        except GGUFError as e:
            raise ModelError(str(e)) from None
        if arch not in ARCHS:
            raise ModelError(f"unsupported architecture {arch!r} (supported: {', '.join(ARCHS)})")
        neox, qk_norm, sub_norms, post_norms, act, embed_scale = ARCHS[arch]

        def pos_int(key, default=..., lo=1):
            # absurd values are refused here, before anything is sized from them
            v = default if default is not ... and f"{arch}.{key}" not in f.metadata else f.get(f"{arch}.{key}", int)
            if not lo <= v <= 1 << 24:
                raise ModelError(f"{arch}.{key} = {v} is out of range")
            return v

        try:
            d = pos_int("embedding_length")
            n_head = pos_int("attention.head_count")
            n_head_kv = pos_int("attention.head_count_kv", n_head)
            head_dim = pos_int("attention.key_length", d // n_head)
            v_head_dim = pos_int("attention.value_length", head_dim)
            rope_dim = pos_int("rope.dimension_count", head_dim)
            eps = f.get(f"{arch}.attention.layer_norm_rms_epsilon", float, 1e-5)
            rope_base = f.get(f"{arch}.rope.freq_base", float, 10000.0)
            rope_scale = 1.0
            if f.get(f"{arch}.rope.scaling.type", str, "none") == "linear":
                rope_scale = f.get(f"{arch}.rope.scaling.factor", float, 1.0)
            elif f.get(f"{arch}.rope.scaling.type", str, "none") not in ("none",):
                raise ModelError(f"{arch}.rope.scaling.type {f.get(f'{arch}.rope.scaling.type')!r} is not supported")
            window = pos_int("attention.sliding_window", 0, lo=0)
            cfg = cls(
                arch=arch,
                n_layer=pos_int("block_count"),
                d_model=d,
                n_ff=pos_int("feed_forward_length"),
                n_head=n_head,
                n_head_kv=n_head_kv,
                head_dim=head_dim,
                v_head_dim=v_head_dim,
                vocab_size=f.tensor("token_embd.weight").shape[0],
                eps=eps,
                rope_base=rope_base,
                rope_base_local=GEMMA3_LOCAL_ROPE_BASE if arch == "gemma3" else rope_base,
                rope_dim=rope_dim,
                rope_scale=rope_scale,
                rope_neox=neox,
                ctx_train=pos_int("context_length", 4096),
                sliding_window=window if arch == "gemma3" else 0,
                swa_pattern=pos_int("attention.sliding_window_pattern", GEMMA3_SWA_PATTERN),
                qk_norm=qk_norm,
                sub_norms=sub_norms,
                post_norms=post_norms,
                ffn_act=act,
                embed_scale=math.sqrt(d) if embed_scale else 1.0,
                attn_scale=1.0 / math.sqrt(head_dim),
            )
        except GGUFError as e:
            raise ModelError(str(e)) from None
        if n_head % n_head_kv:
            raise ModelError(f"{arch}: head_count {n_head} is not a multiple of head_count_kv {n_head_kv}")
        if rope_dim > head_dim or rope_dim % 2:
            raise ModelError(f"{arch}: rope dimension {rope_dim} must be even and <= head dim {head_dim}")
        if not (eps > 0 and rope_base > 0 and rope_scale > 0):
            raise ModelError(f"{arch}: epsilon, rope base and scale must be positive")
        return cfg
