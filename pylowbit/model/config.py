"""Model hyper-parameters read from GGUF metadata: one dataclass, one switch per architecture."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

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
    "qwen35":       (True,    True,   False,    False,     "silu",   False),
}
# Names other tools write for an architecture above; their keys keep the file's own prefix
# ("bitnet-25.block_count").  bitnet.cpp's 2B4T converter (utils/convert-ms-to-gguf-bitnet.py)
# writes bitnet-25, its later files and llama.cpp's own bitnet-b1.58; bitnet.cpp runs both alike.
ARCH_ALIASES = {"bitnet-25": "bitnet-b1.58"}
# qwen35 (Gated-DeltaNet + gated attention): layer i is recurrent unless (i + 1) % interval == 0,
# when the file gives no explicit attention.recurrent_layers.
QWEN35_ATTENTION_INTERVAL = 4


@dataclass(frozen=True)
class SSMConfig:
    """A Gated-DeltaNet layer's sizes (qwen35.ssm.*): d = state_size is the head dim of both the K
    and the V heads; V head h reads K head h % n_k_heads (llama.cpp's tiled order)."""
    conv_kernel: int  # K: taps of the causal depthwise conv
    state_size: int  # d
    n_v_heads: int  # time_step_rank
    n_k_heads: int  # group_count

    @property
    def key_dim(self) -> int:  # D_k: q and k widths
        return self.state_size * self.n_k_heads

    @property
    def value_dim(self) -> int:  # D_v = inner_size: v, z and ssm_out's input widths
        return self.state_size * self.n_v_heads

    @property
    def conv_channels(self) -> int:  # C: attn_qkv's outputs, q | k | v
        return 2 * self.key_dim + self.value_dim
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
    # qwen35 only: which layers are Gated-DeltaNet ones, their sizes, the attention output gate
    # (attn_q holds query and gate interleaved per head) and the multi-section RoPE's sections
    recurrent: tuple = ()
    ssm: SSMConfig | None = None
    attn_gate: bool = False
    rope_sections: tuple = ()

    def is_recurrent(self, il: int) -> bool:
        return bool(self.recurrent) and self.recurrent[il]

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
        prefix = arch  # the metadata keys' prefix is the name the file gives
        arch = ARCH_ALIASES.get(arch, arch)
        if arch not in ARCHS:
            raise ModelError(f"unsupported architecture {prefix!r} (supported: "
                             f"{', '.join([*ARCHS, *ARCH_ALIASES])})")
        neox, qk_norm, sub_norms, post_norms, act, embed_scale = ARCHS[arch]

        def pos_int(key, default: int | None = None, lo=1):
            # absurd values are refused here, before anything is sized from them; a key without
            # a default is required (f.get raises for a missing one)
            k = f"{prefix}.{key}"
            v = default if default is not None and k not in f.metadata else f.get(k, int)
            if not lo <= v <= 1 << 24:
                raise ModelError(f"{prefix}.{key} = {v} is out of range")
            return v

        try:
            d = pos_int("embedding_length")
            n_head = pos_int("attention.head_count")
            n_head_kv = pos_int("attention.head_count_kv", n_head)
            head_dim = pos_int("attention.key_length", d // n_head)
            v_head_dim = pos_int("attention.value_length", head_dim)
            rope_dim = pos_int("rope.dimension_count", head_dim)
            eps = f.get(f"{prefix}.attention.layer_norm_rms_epsilon", float, 1e-5)
            rope_base = f.get(f"{prefix}.rope.freq_base", float, 10000.0)
            rope_scale = 1.0
            if f.get(f"{prefix}.rope.scaling.type", str, "none") == "linear":
                rope_scale = f.get(f"{prefix}.rope.scaling.factor", float, 1.0)
            elif f.get(f"{prefix}.rope.scaling.type", str, "none") not in ("none",):
                kind = f.get(f"{prefix}.rope.scaling.type")
                raise ModelError(f"{prefix}.rope.scaling.type {kind!r} is not supported")
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
        if arch == "qwen35":
            cfg = _qwen35(f, cfg, pos_int)
        return cfg


def _qwen35(f: GGUFFile, cfg: Config, pos_int) -> Config:
    """The hybrid's own keys (llama.cpp requires every ssm.* key, the rope sections and the
    epsilon), checked against each other: the graph would silently assume what is checked here."""
    def need(key):
        if f"qwen35.{key}" not in f.metadata:
            raise ModelError(f"qwen35.{key}: missing (required for qwen35)")

    try:
        for key in ("attention.layer_norm_rms_epsilon", "ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                    "ssm.time_step_rank", "ssm.group_count", "rope.dimension_sections"):
            need(key)
        ssm = SSMConfig(conv_kernel=pos_int("ssm.conv_kernel"), state_size=pos_int("ssm.state_size"),
                        n_v_heads=pos_int("ssm.time_step_rank"), n_k_heads=pos_int("ssm.group_count"))
        inner = pos_int("ssm.inner_size")
        sections = np.asarray(f.get("qwen35.rope.dimension_sections")).reshape(-1)  # 4 ints or a scalar
        sections = sections.tolist() if sections.dtype.kind in "iu" else None
        if "qwen35.attention.recurrent_layers" in f.metadata:
            flags = np.asarray(f.get("qwen35.attention.recurrent_layers", list))
            if flags.ndim != 1 or flags.dtype.kind not in "biu" or len(flags) != cfg.n_layer:
                raise ModelError(f"qwen35.attention.recurrent_layers: expected {cfg.n_layer} booleans, "
                                 f"got {flags.size} values of type {flags.dtype}")
            recurrent = tuple(bool(b) for b in flags)
        else:
            interval = pos_int("full_attention_interval", QWEN35_ATTENTION_INTERVAL)
            recurrent = tuple((il + 1) % interval != 0 for il in range(cfg.n_layer))
    except GGUFError as e:
        raise ModelError(str(e)) from None
    if inner != ssm.value_dim:
        raise ModelError(f"qwen35.ssm.inner_size {inner} is not ssm.state_size {ssm.state_size} x "
                         f"ssm.time_step_rank {ssm.n_v_heads}")
    if ssm.n_v_heads % ssm.n_k_heads:
        raise ModelError(f"qwen35.ssm.time_step_rank {ssm.n_v_heads} (V heads) is not a multiple of "
                         f"ssm.group_count {ssm.n_k_heads} (K heads)")
    if ssm.conv_kernel < 2:
        raise ModelError(f"qwen35.ssm.conv_kernel {ssm.conv_kernel} must be >= 2")
    if not isinstance(sections, list) or len(sections) not in (1, 4) or \
            not all(isinstance(v, int) and 0 <= v <= 1 << 16 for v in sections):
        raise ModelError("qwen35.rope.dimension_sections: expected 4 non-negative integers")
    sections = tuple(sections) + (0,) * (4 - len(sections))
    if sum(sections[:3]) == 0:
        raise ModelError("qwen35.rope.dimension_sections: the first three sections are all zero")
    if cfg.head_dim != cfg.v_head_dim:
        raise ModelError(f"qwen35: attention.key_length {cfg.head_dim} != value_length {cfg.v_head_dim}")
    if not any(recurrent):
        raise ModelError("qwen35: no recurrent layer (check full_attention_interval / recurrent_layers)")
    return replace(cfg, recurrent=recurrent, ssm=ssm, attn_gate=True, rope_sections=sections)
