"""The synthetic models' shapes: presets (tiny ones for the tests, real models' shapes for the bench)
and the tensor layout of each architecture (metadata, matrices, norm vectors, other tensors)."""

from __future__ import annotations

import numpy as np

from ..gguf import MetaValue, ValueType
from .config import ARCHS

PRESETS = {
    # Smallest shape every format fits: widths are multiples of 256 (TQ1_0/TQ2_0 blocks).
    "tiny": dict(n_layer=2, d_model=256, n_ff=512, n_head=4, n_head_kv=2, head_dim=64, vocab_size=512,
                 ctx=256, rope_base=10000.0, eps=1e-5, sliding_window=8, swa_pattern=2),
    # BitNet b1.58 2B4T (docs/FORMATS.md): the bench shape, ~1.2 GB in I2_S.
    "bitnet-2b": dict(n_layer=30, d_model=2560, n_ff=6912, n_head=20, n_head_kv=5, head_dim=128,
                      vocab_size=128256, ctx=4096, rope_base=500000.0, eps=1e-5, sliding_window=0, swa_pattern=6),
}
# qwen35 (QWEN35.md): Gated-DeltaNet layers and gated attention layers.  The tiny shape has both kinds
# (attention every full_attention_interval-th layer), every input width a multiple of 256, and
# r = ssm_heads / ssm_groups = 3 so that the tiled -> grouped head permutation is no involution;
# ssm_out's and attn_output's input widths are equal (ssm_state * ssm_heads = n_head * head_dim, as
# in Bonsai 2) and differ from d_model, so they share one sign vector that no other weight uses.
QWEN35_PRESETS = {
    "qwen35-tiny": dict(n_layer=4, d_model=256, n_ff=512, n_head=6, n_head_kv=2, head_dim=128, vocab_size=512,
                        ctx=256, rope_base=1e7, eps=1e-6, rope_dim=16, rope_sections=(3, 3, 2, 0), ssm_conv=4,
                        ssm_state=128, ssm_groups=2, ssm_heads=6, full_attention_interval=2,
                        recurrent_layers=None),
    # PrismML Bonsai 2 27B (QWEN35.md section 6): the shape only; its file is ~7 GB
    "bonsai2-27b": dict(n_layer=64, d_model=5120, n_ff=17408, n_head=24, n_head_kv=4, head_dim=256,
                        vocab_size=248320, ctx=262144, rope_base=1e7, eps=1e-6, rope_dim=64,
                        rope_sections=(11, 11, 10, 0), ssm_conv=4, ssm_state=128, ssm_groups=16, ssm_heads=48,
                        full_attention_interval=4, recurrent_layers=None),
}
PRESETS.update(QWEN35_PRESETS)
PRESET_ARCH = {name: "qwen35" for name in QWEN35_PRESETS}  # presets not listed serve the dense archs
GENERATOR_ARCHS = tuple(dict.fromkeys([*ARCHS, "qwen35"]))


def _arch_and_preset(arch: str | None, preset: str | None) -> tuple[str, str]:
    """A qwen35 preset implies arch qwen35 and arch qwen35 defaults to qwen35-tiny; otherwise
    llama and tiny, as before."""
    if arch is None:
        arch = PRESET_ARCH.get(preset, "llama")
    if preset is None:
        preset = "qwen35-tiny" if arch == "qwen35" else "tiny"
    if arch not in GENERATOR_ARCHS:
        raise ValueError(f"unknown architecture {arch!r} (known: {', '.join(GENERATOR_ARCHS)})")
    if preset in PRESETS and PRESET_ARCH.get(preset, "dense") != ("qwen35" if arch == "qwen35" else "dense"):
        raise ValueError(f"preset {preset!r} is not a shape of architecture {arch!r}")
    return arch, preset


def synthetic_spec(arch: str | None = None, preset: str | None = None, **overrides) -> dict:
    arch, preset = _arch_and_preset(arch, preset)
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    spec = dict(PRESETS[preset])
    unknown = set(overrides) - set(spec)
    if unknown:
        raise ValueError(f"unknown synthetic model parameters: {sorted(unknown)}")
    spec.update(overrides)
    if arch == "gemma3" and preset == "tiny" and "n_head_kv" not in overrides:
        spec["n_head_kv"] = 1
    return spec


def qwen35_layer_kinds(spec: dict) -> list[bool]:
    """True for a Gated-DeltaNet (recurrent) layer: attention.recurrent_layers when given, else every
    layer but each full_attention_interval-th (llama.cpp's rule: GDN iff (i + 1) % interval != 0)."""
    L = spec["n_layer"]
    if spec["recurrent_layers"] is not None:
        kinds = [bool(k) for k in spec["recurrent_layers"]]
        if len(kinds) != L:
            raise ValueError(f"recurrent_layers has {len(kinds)} entries, n_layer is {L}")
        return kinds
    interval = spec["full_attention_interval"]
    if interval < 1:
        raise ValueError(f"full_attention_interval {interval} must be >= 1")
    return [(i + 1) % interval != 0 for i in range(L)]


def imrope_component(sections, pair: int) -> int:
    """Which of IMROPE's 4 position components rotates pair `pair` (0..n_rot/2-1): ggml interleaves
    t, h, w by pair index mod 3 while each section lasts, the rest takes e.  Text tokens have the
    positions (p, p, p, 0), so a pair on component 3 is left unrotated."""
    sector = pair % sum(sections)
    for c in range(3):
        if sector % 3 == c and sector < 3 * sections[c]:
            return c
    return 3


def _qwen35_layout(s: dict):
    """(metadata, fmt matrices (name, rows, cols), norm vectors (name, n), other tensors
    (name, ggml type name, numpy shape, maker)) of a qwen35 model; numpy shapes are ne reversed."""
    E, F, H, Hkv, D, L = s["d_model"], s["n_ff"], s["n_head"], s["n_head_kv"], s["head_dim"], s["n_layer"]
    d, Hk, Hv, K = s["ssm_state"], s["ssm_groups"], s["ssm_heads"], s["ssm_conv"]
    Dk, Dv = d * Hk, d * Hv
    C = 2 * Dk + Dv
    sections = [int(v) for v in s["rope_sections"]]
    n_rot = s["rope_dim"]
    if Hv % Hk:
        raise ValueError(f"qwen35: ssm_heads {Hv} is not a multiple of ssm_groups {Hk}")
    if H % Hkv:
        raise ValueError(f"qwen35: n_head {H} is not a multiple of n_head_kv {Hkv}")
    if n_rot % 2 or not 0 < n_rot <= D:
        raise ValueError(f"qwen35: rope_dim {n_rot} must be even and in 1..head_dim {D}")
    if len(sections) != 4 or min(sections) < 0 or sum(sections) != n_rot // 2:
        raise ValueError(f"qwen35: rope_sections {sections} must be 4 counts summing to rope_dim / 2 = {n_rot // 2}")
    if any(imrope_component(sections, i) == 3 for i in range(n_rot // 2)):
        raise ValueError(f"qwen35: rope_sections {sections} leave some pairs on IMROPE's 4th component "
                         f"(position 0 for text: unrotated)")
    kinds = qwen35_layer_kinds(s)

    a = "qwen35"
    meta = {
        "general.architecture": a, "general.name": "",
        f"{a}.block_count": L, f"{a}.context_length": s["ctx"], f"{a}.embedding_length": E,
        f"{a}.feed_forward_length": F, f"{a}.attention.head_count": H, f"{a}.attention.head_count_kv": Hkv,
        f"{a}.attention.key_length": D, f"{a}.attention.value_length": D,
        f"{a}.rope.freq_base": float(s["rope_base"]), f"{a}.attention.layer_norm_rms_epsilon": float(s["eps"]),
        f"{a}.rope.dimension_count": n_rot,
        f"{a}.rope.dimension_sections": MetaValue(ValueType.ARRAY, sections, ValueType.INT32),
        f"{a}.ssm.conv_kernel": K, f"{a}.ssm.inner_size": Dv, f"{a}.ssm.state_size": d,
        f"{a}.ssm.time_step_rank": Hv, f"{a}.ssm.group_count": Hk,
    }
    if s["recurrent_layers"] is not None:
        meta[f"{a}.attention.recurrent_layers"] = MetaValue(ValueType.ARRAY, kinds, ValueType.BOOL)
    else:
        meta[f"{a}.full_attention_interval"] = s["full_attention_interval"]

    mats = [("token_embd.weight", s["vocab_size"], E), ("output.weight", s["vocab_size"], E)]
    vecs = [("output_norm.weight", E)]
    others = []
    for i, recurrent in enumerate(kinds):
        p = f"blk.{i}."
        vecs += [(p + "attn_norm.weight", E), (p + "post_attention_norm.weight", E)]
        if recurrent:
            mats += [(p + "attn_qkv.weight", C, E), (p + "attn_gate.weight", Dv, E), (p + "ssm_out.weight", E, Dv)]
            vecs += [(p + "ssm_norm.weight", d)]
            others += [
                # depthwise causal conv: numpy (C, K), tap K-1 on the current input; output std ~ input std
                (p + "ssm_conv1d.weight", "f32", (C, K), lambda r, n: 0.5 * r.standard_normal(n)),
                # log-decay g = ssm_a * softplus(alpha x + dt): per-token decay exp(g) within ~(0.1, 0.97)
                (p + "ssm_dt.bias", "f32", (Hv,), lambda r, n: r.uniform(-1.0, 1.0, n)),
                (p + "ssm_a", "f32", (Hv,), lambda r, n: -np.exp(r.uniform(-2.0, 0.5, n))),
                (p + "ssm_alpha.weight", "bf16", (Hv, E), lambda r, n: r.standard_normal(n) * (0.5 / np.sqrt(E))),
                (p + "ssm_beta.weight", "bf16", (Hv, E), lambda r, n: r.standard_normal(n) / np.sqrt(E)),
            ]
        else:
            mats += [(p + "attn_q.weight", 2 * H * D, E), (p + "attn_k.weight", Hkv * D, E),
                     (p + "attn_v.weight", Hkv * D, E), (p + "attn_output.weight", E, H * D)]
            vecs += [(p + "attn_q_norm.weight", D), (p + "attn_k_norm.weight", D)]
        mats += [(p + "ffn_gate.weight", F, E), (p + "ffn_up.weight", F, E), (p + "ffn_down.weight", E, F)]
    return meta, mats, vecs, others


def grouped_from_tiled(d: int, n_k: int, n_v: int) -> np.ndarray:
    """Index map P of prism.hadamard.gdn_v_grouped: P(x)[f_g] = x[idx[f_g]] moves the d-wide V head
    block in tiled slot rho * n_k + kappa to grouped slot kappa * r + rho (r = n_v / n_k)."""
    r = n_v // n_k
    blocks = [rho * n_k + kappa for kappa in range(n_k) for rho in range(r)]
    return (np.asarray(blocks)[:, None] * d + np.arange(d)[None, :]).reshape(-1)


def _dense_layout(arch: str, s: dict):
    d, ff, H, Hkv, hd, V, L = (s["d_model"], s["n_ff"], s["n_head"], s["n_head_kv"], s["head_dim"],
                               s["vocab_size"], s["n_layer"])
    tied = arch in ("bitnet-b1.58", "gemma3")
    meta: dict = {
        "general.architecture": arch, "general.name": "",
        f"{arch}.block_count": L, f"{arch}.context_length": s["ctx"], f"{arch}.embedding_length": d,
        f"{arch}.feed_forward_length": ff, f"{arch}.attention.head_count": H,
        f"{arch}.attention.head_count_kv": Hkv, f"{arch}.attention.key_length": hd,
        f"{arch}.attention.value_length": hd, f"{arch}.rope.freq_base": float(s["rope_base"]),
        f"{arch}.attention.layer_norm_rms_epsilon": float(s["eps"]),
    }
    if arch == "gemma3" and s["sliding_window"]:
        meta[f"{arch}.attention.sliding_window"] = s["sliding_window"]
        meta[f"{arch}.attention.sliding_window_pattern"] = s["swa_pattern"]

    # (name, rows, cols) of every matrix, then vectors
    mats = [("token_embd.weight", V, d)]
    if not tied:
        mats.append(("output.weight", V, d))
    vecs = [("output_norm.weight", d)]
    for i in range(L):
        p = f"blk.{i}."
        mats += [(p + "attn_q.weight", H * hd, d), (p + "attn_k.weight", Hkv * hd, d),
                 (p + "attn_v.weight", Hkv * hd, d), (p + "attn_output.weight", d, H * hd),
                 (p + "ffn_gate.weight", ff, d), (p + "ffn_up.weight", ff, d), (p + "ffn_down.weight", d, ff)]
        vecs += [(p + "attn_norm.weight", d), (p + "ffn_norm.weight", d)]
        if arch in ("qwen3", "gemma3"):
            vecs += [(p + "attn_q_norm.weight", hd), (p + "attn_k_norm.weight", hd)]
        if arch == "bitnet-b1.58":
            vecs += [(p + "attn_sub_norm.weight", d), (p + "ffn_sub_norm.weight", ff)]
        if arch == "gemma3":
            vecs += [(p + "post_attention_norm.weight", d), (p + "post_ffw_norm.weight", d)]
    return meta, mats, vecs, []


def synthetic_layout(arch: str | None = None, preset: str | None = None, fmt: str = "tq2_0",
                     embed_fmt: str | None = None, **overrides) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (ggml type name, numpy shape) of every tensor write_synthetic_model would write,
    without writing anything (the shapes of presets too large to write in a test)."""
    arch, preset = _arch_and_preset(arch, preset)
    s = synthetic_spec(arch, preset, **overrides)
    _, mats, vecs, others = _qwen35_layout(s) if arch == "qwen35" else _dense_layout(arch, s)
    embed_fmt = embed_fmt or ("f32" if fmt == "f32" else "f16")
    out = {n: (embed_fmt if n == "token_embd.weight" else fmt, (r, c)) for n, r, c in mats}
    out.update({n: ("f32", (k,)) for n, k in vecs})
    out.update({n: (t, shape) for n, t, shape, _ in others})
    return out
