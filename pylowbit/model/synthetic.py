"""Synthetic GGUF models: random weights in any format, a working tokenizer, optional folded rotation.

Used by the tests (tiny presets, every architecture x format) and by `pylowbit bench` (the BitNet
b1.58 2B shape).  Generation streams tensor by tensor: each tensor is made, packed and written
before the next one exists, so memory stays near one tensor.  Every tensor draws from its own
generator seeded by (seed, name), so two files with the same seed hold the same underlying weights
whatever else differs (format, rotation): that is what lets a test compare them.
"""

from __future__ import annotations

import json
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from ..gguf import TYPES, MetaValue, TensorSpec, ValueType, type_id, write_gguf
from .config import ARCHS
from .hadamard import AXIS, TRANSFORM, fwht_numpy

TERNARY = ("tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0")
FLOAT = ("q8_0", "f16", "f32")
WEIGHT_FORMATS = TERNARY + FLOAT

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

_CORPUS = (
    "The quick brown fox jumps over the lazy dog. A small model reads the text and writes it back. "
    "Ternary weights take the values minus one, zero and plus one, times a scale for each block. "
    "The capital of France is Paris, and the capital of Italy is Rome. Numbers like 12, 345 and 6789 "
    "are split into digits. She said: \"it's here, isn't it?\" and they'll see what we've done.\n"
    "Hadamard rotations spread outliers across a block so that low-bit codes lose less. "
)

CHAT_TEMPLATES = {
    "llama3": ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
               "{{ m['content'] }}<|eot_id|>{% endfor %}"
               "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"),
    "chatml": ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
               "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    "gemma": ("{{ bos_token }}{% for m in messages %}<start_of_turn>"
              "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
              "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"),
}


# ---------------------------------------------------------------------------------------------
# tokenizer vocabularies

@lru_cache(maxsize=None)
def _trained(kind: str, budget: int):
    """Vocabulary pieces and merges learnt from the built-in corpus (deterministic)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if kind == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=budget, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        trainer = trainers.BpeTrainer(vocab_size=budget, show_progress=False)
    tok.train_from_iterator([_CORPUS] * 4, trainer)
    model = json.loads(tok.to_str())["model"]
    pieces = [p for p, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    return pieces, merges


def tokenizer_metadata(arch: str, vocab_size: int) -> dict:
    """GGUF tokenizer.* keys for a vocabulary of exactly vocab_size tokens."""
    if arch == "gemma3":  # SentencePiece style, like the real gemma3 files
        head = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
        head_types = [3, 3, 3, 2, 3, 3]
        byte_toks = [f"<0x{b:02X}>" for b in range(256)]
        budget = vocab_size - len(head) - 256
        if budget < 1:
            raise ValueError(f"vocab_size {vocab_size} is too small for a SentencePiece vocabulary")
        pieces, _ = _trained("spm", min(budget, 400))
        fill = [f"<unused{i}>" for i in range(budget - len(pieces))]
        tokens = head + byte_toks + pieces + fill
        types = head_types + [6] * 256 + [1] * len(pieces) + [3] * len(fill)
        scores = [-1000.0] * len(head) + [0.0] * 256 + [-float(i) for i in range(len(pieces))] + [-1000.0] * len(fill)
        return {
            "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": np.array(scores, np.float32),
            "tokenizer.ggml.token_type": np.array(types, np.int32),
            "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
            "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
            "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": False,
            "tokenizer.ggml.add_space_prefix": False,
            "tokenizer.chat_template": CHAT_TEMPLATES["gemma"],
        }
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                "<|im_start|>", "<|im_end|>"]
    budget = vocab_size - len(specials)
    if budget < 256:
        raise ValueError(f"vocab_size {vocab_size} is too small for a byte-level vocabulary")
    pieces, merges = _trained("gpt2", min(budget, 600))
    fill = [f"<|reserved_special_token_{i}|>" for i in range(budget - len(pieces))]
    tokens = pieces + specials + fill
    types = [1] * len(pieces) + [3] * len(specials) + [3] * len(fill)
    qwen = arch in ("qwen3", "qwen35")
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": {"qwen3": "qwen2", "qwen35": "qwen35"}.get(arch, "llama-bpe"),
        "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": np.array(types, np.int32),
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": len(pieces), "tokenizer.ggml.eos_token_id": len(pieces) + 1,
        "tokenizer.ggml.add_bos_token": not qwen,
        "tokenizer.chat_template": CHAT_TEMPLATES["chatml" if qwen else "llama3"],
    }


# ---------------------------------------------------------------------------------------------
# weights

def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _signs(seed: int, width: int) -> np.ndarray:
    return np.where(_rng(seed, f"prism.signs.{width}").random(width) < 0.5, -1.0, 1.0).astype(np.float32)


def random_matrix(seed: int, name: str, rows: int, cols: int, ternary: bool) -> np.ndarray:
    """float32 (rows, cols).  Ternary: codes in {-1,0,1} times an fp16-exact scale per row (per
    tensor for I2_S is handled by the caller), so the block quantizers reproduce it exactly."""
    rng = _rng(seed, name)
    if ternary:
        codes = rng.integers(-1, 2, size=(rows, cols), dtype=np.int8)
        scale = (0.5 + rng.random(rows, dtype=np.float32)) * np.float32(1.5 / np.sqrt(cols))
        scale = scale.astype(np.float16).astype(np.float32)
        return codes.astype(np.float32) * scale[:, None]
    return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(1.0 / np.sqrt(cols))


# Random ternary codes straight to packed bytes, for files too large for a float32 pass (a 27B
# model is ~27 G weights).  A random byte indexes a table of valid code bytes: 2-bit formats get 4
# base-3 digits (of the byte mod 81) as codes 0..2 (3 never appears); base-3 formats the byte
# ceil(q * 256 / 243) of 5 trits (q = byte mod 243) or, in a 4-trit qh byte, of 4 trits then * 3.
# The byte-to-weight order does not matter for uniformly random codes.
def _code_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b = np.arange(256)
    q4 = b % 81
    digits = [(q4 // 3 ** n) % 3 for n in range(4)]
    two_bit = sum(d << (2 * n) for n, d in enumerate(digits)).astype(np.uint8)
    trit5 = (((b % 243) * 256 + 242) // 243).astype(np.uint8)
    trit4 = ((q4 * 3 * 256 + 242) // 243).astype(np.uint8)
    return two_bit, trit5, trit4


_TWO_BIT, _TRIT5, _TRIT4 = _code_tables()
# fmt -> (weights a block, bytes a block, fp16 scale offset, (start, end) of 4-trit qh bytes or None);
# every other byte of a block is a code byte of the format's kind (docs/FORMATS.md layouts)
_BLOCKS = {
    "q2_0": (64, 18, 0, None), "pq2_0": (128, 34, 0, None), "tq2_0": (256, 66, 64, None),
    "tq1_0": (256, 54, 52, (48, 52)), "ptq1_0": (128, 28, 26, (24, 26)),
}
CODE_CHUNK_BYTES = 1 << 24  # bytes generated at a time: memory stays ~3x this


def ternary_scale(cols: int) -> np.float16:
    """The one scale of a random-code tensor: keeps a product's output ~ its input in size."""
    return np.float16(1.5 / np.sqrt(cols))


def random_ternary_bytes(seed: int, name: str, rows: int, cols: int, fmt: str):
    """Yields a random ternary (rows, cols) tensor's GGUF bytes in fmt, a chunk of rows at a time:
    uniform codes in {-1, 0, +1}, every block scaled by ternary_scale(cols)."""
    rng = _rng(seed, name)
    scale = np.frombuffer(np.array([ternary_scale(cols)], "<f2").tobytes(), np.uint8)
    if fmt == "i2_s":  # codes of the whole tensor, then the fp32 scale padded to 32 bytes
        total = rows * cols // 4
        for o in range(0, total, CODE_CHUNK_BYTES):
            yield _TWO_BIT[np.frombuffer(rng.bytes(min(CODE_CHUNK_BYTES, total - o)), np.uint8)]
        tail = np.zeros(32, np.uint8)
        tail[:4] = np.frombuffer(np.array([np.float32(ternary_scale(cols))], "<f4").tobytes(), np.uint8)
        yield tail
        return
    if fmt not in _BLOCKS:
        raise ValueError(f"no random-code writer for {fmt!r} (known: i2_s, {', '.join(_BLOCKS)})")
    per_block, nbytes, at, qh = _BLOCKS[fmt]
    if cols % per_block:
        raise ValueError(f"{name}: width {cols} is not a multiple of the {fmt} block of {per_block} weights")
    row_blocks = cols // per_block
    step = max(1, CODE_CHUNK_BYTES // (row_blocks * nbytes))
    lut = _TWO_BIT if qh is None else _TRIT5
    for r0 in range(0, rows, step):
        n = min(step, rows - r0) * row_blocks
        raw = np.frombuffer(rng.bytes(n * nbytes), np.uint8).reshape(n, nbytes)
        out = lut[raw]
        if qh is not None:
            out[:, qh[0]:qh[1]] = _TRIT4[raw[:, qh[0]:qh[1]]]
        out[:, at:at + 2] = scale
        yield out


def pack_i2_s_ternary(seed: int, name: str, rows: int, cols: int) -> np.ndarray:
    """A random ternary I2_S tensor built from codes directly, as one array."""
    return np.concatenate(list(random_ternary_bytes(seed, name, rows, cols, "i2_s")))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of float32 values, rounded to nearest even (finite values)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def pack(x: np.ndarray, fmt: str) -> np.ndarray:
    """Raw GGUF bytes of x in fmt."""
    if fmt == "bf16":
        return bf16_bits(x).view(np.uint8).reshape(-1)
    if fmt == "f32":
        return np.ascontiguousarray(x, dtype="<f4").view(np.uint8).reshape(-1)
    if fmt == "f16":
        return np.ascontiguousarray(x, dtype="<f2").view(np.uint8).reshape(-1)
    import pylowbit as lb

    return np.asarray(lb.quantize(np.ascontiguousarray(x, dtype=np.float32), fmt).data).reshape(-1)


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


def _check_widths(mats, fmt: str, embed_fmt: str, preset: str) -> None:
    """Every row must be whole blocks of its type (256 weights for TQ1_0/TQ2_0, 128 for I2_S...)."""
    for name, _, cols in mats:
        f = embed_fmt if name == "token_embd.weight" else fmt
        block = TYPES[type_id(f)].block_size
        if cols % block:
            raise ValueError(f"preset {preset!r}: {name} has width {cols}, not a multiple of the "
                             f"{f} block of {block} weights")


def write_synthetic_model(path, arch: str | None = None, fmt: str = "tq2_0", preset: str | None = None,
                          seed: int = 0, rotation_block: int | None = None, sign_mode: str = "explicit",
                          embed_fmt: str | None = None, gdn_v_grouped: bool = True, random_codes: bool = False,
                          progress: Callable[[int, int, str], None] | None = None, **overrides) -> Path:
    """Write a runnable GGUF model with random weights.  arch defaults to the preset's (llama for
    the dense presets, qwen35 for qwen35-tiny / bonsai2-27b) and preset to the arch's tiny one.
    rotation_block folds a Hadamard rotation of that block size into every foldable weight (and the
    embedding, inversely) and writes the prism.hadamard.* keys; for qwen35 gdn_v_grouped says
    whether ssm_out was folded in grouped V-head order (written as prism.hadamard.gdn_v_grouped).
    random_codes writes every ternary matrix (the embedding too, when ternary) as random codes
    straight to packed bytes (random_ternary_bytes), with no float32 pass: fast enough for a 27B
    file.  The codes are random in the stored basis, so a rotation is only declared (metadata and
    signs), not folded, and files of different formats hold unrelated weights."""
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weight format {fmt!r} (known: {', '.join(WEIGHT_FORMATS)})")
    if random_codes and fmt not in TERNARY:
        raise ValueError(f"random_codes needs a ternary format ({', '.join(TERNARY)}), got {fmt!r}")
    arch, preset = _arch_and_preset(arch, preset)
    s = synthetic_spec(arch, preset, **overrides)
    meta, mats, vecs, others = _qwen35_layout(s) if arch == "qwen35" else _dense_layout(arch, s)
    meta["general.name"] = f"synthetic {arch} {preset} {fmt}"
    meta.update(tokenizer_metadata(arch, s["vocab_size"]))
    embed_fmt = embed_fmt or ("f32" if fmt == "f32" else "f16")
    ternary = fmt in TERNARY
    _check_widths(mats, fmt, embed_fmt, preset)

    # ssm_out's fold in grouped order: W_stored row = H(s * P(w_row)), so that
    # W_stored . H(s * P(x)) = P(w) . P(x) = w . x for the tiled-order x the recurrence produces
    col_perm = {}
    if arch == "qwen35" and rotation_block and gdn_v_grouped:
        idx = grouped_from_tiled(s["ssm_state"], s["ssm_groups"], s["ssm_heads"])
        col_perm = {n: idx for n, _, _ in mats if n.endswith(".ssm_out.weight")}

    folded = [n for n, _, _ in mats if n != "token_embd.weight"]
    signs = {}
    if rotation_block:
        B = int(rotation_block)
        widths = sorted({c for _, _, c in mats})
        if any(w % B for w in widths):
            raise ValueError(f"rotation block {B} does not divide every input width {widths}")
        if sign_mode == "explicit":
            signs = {w: _signs(seed, w) for w in widths}
        meta.update({
            "prism.hadamard.version": 1, "prism.hadamard.block_size": B,
            "prism.hadamard.transform": TRANSFORM, "prism.hadamard.axis": AXIS,
            "prism.hadamard.sign_mode": sign_mode,
            "prism.hadamard.weight_names": folded,
            "prism.hadamard.inverse_weight_names": ["token_embd.weight"],
        })
        if sign_mode == "explicit":
            meta["prism.hadamard.sign_widths"] = MetaValue(ValueType.ARRAY, widths, ValueType.INT32)
            meta["prism.hadamard.sign_values"] = np.concatenate([signs[w] for w in widths]).astype(np.float32)
        if arch == "qwen35":
            meta["prism.hadamard.gdn_v_grouped"] = bool(gdn_v_grouped)

    def make_matrix(name, rows, cols):
        """Yields the tensor's bytes in row blocks, so a 128k-row embedding never exists as float32 whole."""
        is_embd = name == "token_embd.weight"
        f = embed_fmt if is_embd else fmt
        if random_codes and f in TERNARY:
            yield from random_ternary_bytes(seed, name, rows, cols, f)
            return
        if not is_embd and fmt == "i2_s" and not rotation_block:
            yield pack_i2_s_ternary(seed, name, rows, cols)  # codes straight to bytes: no float pass
            return
        step = rows if f == "i2_s" else max(1, (1 << 22) // cols)  # I2_S has one scale per tensor
        for r0 in range(0, rows, step):
            n = min(step, rows - r0)
            part = f"{name}#{r0}" if r0 else name  # the first block keeps the tensor's own stream
            if is_embd:
                x = _rng(seed, part).standard_normal((n, cols), dtype=np.float32)
                if arch == "gemma3":
                    x *= np.float32(1.0 / np.sqrt(cols))  # the forward pass scales it back up by sqrt(d)
            else:
                x = random_matrix(seed, part, n, cols, ternary)
                if fmt == "i2_s":
                    x = np.sign(x) * np.float32(np.abs(x).max())
            if rotation_block:
                if name in col_perm:
                    x = x[:, col_perm[name]]
                # W' = W S H (rows: H(s*w)); the embedding table likewise, since e = s * (H z) undoes it
                x = fwht_numpy(x.astype(np.float64), int(rotation_block), signs.get(cols)).astype(np.float32)
            yield pack(x, f)

    def make_vector(name, n):
        return (1.0 + 0.1 * _rng(seed, name).standard_normal(n)).astype("<f4").view(np.uint8)

    def make_other(name, f, shape, values):
        x = np.asarray(values(_rng(seed, name), shape), dtype=np.float32)
        return pack(x, f)

    tensors = []
    for name, rows, cols in mats:
        f = embed_fmt if name == "token_embd.weight" else fmt
        tensors.append(TensorSpec(name, type_id(f), (rows, cols),
                                  (lambda n=name, r=rows, c=cols: make_matrix(n, r, c))))
    for name, n in vecs:
        tensors.append(TensorSpec(name, 0, (n,), (lambda nm=name, k=n: make_vector(nm, k))))
    for name, f, shape, values in others:
        tensors.append(TensorSpec(name, type_id(f), shape,
                                  (lambda nm=name, ff=f, sh=shape, v=values: make_other(nm, ff, sh, v))))
    return write_gguf(path, meta, tensors, progress=progress)
