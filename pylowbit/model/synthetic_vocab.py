"""The synthetic models' tokenizer: a small BPE vocabulary learnt from a built-in corpus (GPT-2 byte
level, or SentencePiece style for gemma3), padded to the model's vocab_size, and chat templates."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

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
