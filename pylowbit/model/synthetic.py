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

from ..gguf import MetaValue, TensorSpec, ValueType, type_id, write_gguf
from .config import ARCHS
from .hadamard import AXIS, TRANSFORM, fwht_numpy

TERNARY = ("tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0")
FLOAT = ("q8_0", "f16", "f32")
WEIGHT_FORMATS = TERNARY + FLOAT

PRESETS = {
    # Smallest shape every format fits: widths are multiples of 256 (TQ1_0/TQ2_0 blocks).
    "tiny": dict(n_layer=2, d_model=256, n_ff=512, n_head=4, n_head_kv=2, head_dim=64, vocab_size=512,
                 ctx=256, rope_base=10000.0, eps=1e-5, sliding_window=8, swa_pattern=2),
    # BitNet b1.58 2B4T (FORMATS.md): the bench shape, ~1.2 GB in I2_S.
    "bitnet-2b": dict(n_layer=30, d_model=2560, n_ff=6912, n_head=20, n_head_kv=5, head_dim=128,
                      vocab_size=128256, ctx=4096, rope_base=500000.0, eps=1e-5, sliding_window=0, swa_pattern=6),
}

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
    qwen = arch == "qwen3"
    return {
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2" if qwen else "llama-bpe",
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


def pack_i2_s_ternary(seed: int, name: str, rows: int, cols: int) -> np.ndarray:
    """Random ternary I2_S tensor built from codes directly (FORMATS.md x86 layout): byte p of each
    128-weight group holds weights p, p+32, p+64, p+96 at shifts 6, 4, 2, 0; then the fp32 scale
    padded to 32 bytes."""
    rng = _rng(seed, name)
    codes = rng.integers(0, 3, size=(rows * cols // 128, 4, 32), dtype=np.uint8)  # 0,1,2 = -1,0,+1
    packed = (codes[:, 0] << 6) | (codes[:, 1] << 4) | (codes[:, 2] << 2) | codes[:, 3]
    scale = np.float32(np.float16(1.5 / np.sqrt(cols)))
    tail = np.zeros(32, np.uint8)
    tail[:4] = np.frombuffer(np.array([scale], "<f4").tobytes(), np.uint8)
    return np.concatenate([packed.reshape(-1), tail])


def pack(x: np.ndarray, fmt: str) -> np.ndarray:
    """Raw GGUF bytes of x in fmt."""
    if fmt == "f32":
        return np.ascontiguousarray(x, dtype="<f4").view(np.uint8).reshape(-1)
    if fmt == "f16":
        return np.ascontiguousarray(x, dtype="<f2").view(np.uint8).reshape(-1)
    import pylowbit as lb

    return np.asarray(lb.quantize(np.ascontiguousarray(x, dtype=np.float32), fmt).data).reshape(-1)


def synthetic_spec(arch: str, preset: str = "tiny", **overrides) -> dict:
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r} (known: {', '.join(ARCHS)})")
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


def write_synthetic_model(path, arch: str = "llama", fmt: str = "tq2_0", preset: str = "tiny", seed: int = 0,
                          rotation_block: int | None = None, sign_mode: str = "explicit",
                          embed_fmt: str | None = None, progress: Callable[[int, int, str], None] | None = None,
                          **overrides) -> Path:
    """Write a runnable GGUF model with random weights.  rotation_block folds a Hadamard rotation of
    that block size into every foldable weight (and the embedding, inversely) and writes the
    prism.hadamard.* keys."""
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weight format {fmt!r} (known: {', '.join(WEIGHT_FORMATS)})")
    s = synthetic_spec(arch, preset, **overrides)
    d, ff, H, Hkv, hd, V, L = (s["d_model"], s["n_ff"], s["n_head"], s["n_head_kv"], s["head_dim"],
                               s["vocab_size"], s["n_layer"])
    tied = arch in ("bitnet-b1.58", "gemma3")
    embed_fmt = embed_fmt or ("f32" if fmt == "f32" else "f16")
    ternary = fmt in TERNARY

    meta: dict = {
        "general.architecture": arch,
        "general.name": f"synthetic {arch} {preset} {fmt}",
        f"{arch}.block_count": L, f"{arch}.context_length": s["ctx"], f"{arch}.embedding_length": d,
        f"{arch}.feed_forward_length": ff, f"{arch}.attention.head_count": H,
        f"{arch}.attention.head_count_kv": Hkv, f"{arch}.attention.key_length": hd,
        f"{arch}.attention.value_length": hd, f"{arch}.rope.freq_base": float(s["rope_base"]),
        f"{arch}.attention.layer_norm_rms_epsilon": float(s["eps"]),
    }
    if arch == "gemma3" and s["sliding_window"]:
        meta[f"{arch}.attention.sliding_window"] = s["sliding_window"]
        meta[f"{arch}.attention.sliding_window_pattern"] = s["swa_pattern"]
    meta.update(tokenizer_metadata(arch, V))

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

    def make_matrix(name, rows, cols):
        """Yields the tensor's bytes in row blocks, so a 128k-row embedding never exists as float32 whole."""
        is_embd = name == "token_embd.weight"
        f = embed_fmt if is_embd else fmt
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
                # W' = W S H (rows: H(s*w)); the embedding table likewise, since e = s * (H z) undoes it
                x = fwht_numpy(x.astype(np.float64), int(rotation_block), signs.get(cols)).astype(np.float32)
            yield pack(x, f)

    def make_vector(name, n):
        return (1.0 + 0.1 * _rng(seed, name).standard_normal(n)).astype("<f4").view(np.uint8)

    tensors = []
    for name, rows, cols in mats:
        f = embed_fmt if name == "token_embd.weight" else fmt
        tensors.append(TensorSpec(name, type_id(f), (rows, cols),
                                  (lambda n=name, r=rows, c=cols: make_matrix(n, r, c))))
    for name, n in vecs:
        tensors.append(TensorSpec(name, 0, (n,), (lambda nm=name, k=n: make_vector(nm, k))))
    return write_gguf(path, meta, tensors, progress=progress)
