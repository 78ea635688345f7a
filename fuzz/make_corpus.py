"""Writes the fuzzers' seed corpus: small valid GGUF models of every architecture, written by the
project's own synthetic-model code (usage: python fuzz/make_corpus.py DIR)."""
import sys
from pathlib import Path

from pylowbit.model.synthetic import write_synthetic_model

# Small enough for a fuzzer to mutate quickly (a few KB to tens of KB), varied enough to reach every
# branch of the loader: each architecture, block and float formats, a folded rotation.
SEEDS = [
    ("llama", "q8_0", {}),
    ("qwen3", "f16", {}),
    ("gemma3", "q8_0", {}),
    ("bitnet-b1.58", "q8_0", {}),
    ("llama", "q2_0", {}),
    ("llama", "q8_0", {"rotation_block": 32}),
    ("qwen35", "q8_0", {}),
    ("qwen35", "q8_0", {"rotation_block": 32}),
]
SHAPE = dict(n_layer=1, d_model=64, n_ff=128, n_head=2, n_head_kv=1, head_dim=32, vocab_size=300, ctx=64)
# qwen35: a Gated-DeltaNet layer and a gated attention layer, 6 V heads on 2 K heads
QWEN35_SHAPE = dict(SHAPE, n_layer=2, n_head=3, rope_dim=8, rope_sections=(2, 1, 1, 0), ssm_state=16, ssm_groups=2,
                    ssm_heads=6, full_attention_interval=2)


def main(out: str) -> None:
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    for i, (arch, fmt, extra) in enumerate(SEEDS):
        path = d / f"seed-{i}-{arch}-{fmt}{'-rot' if extra else ''}.gguf"
        shape = QWEN35_SHAPE if arch == "qwen35" else SHAPE
        write_synthetic_model(path, arch=arch, fmt=fmt, embed_fmt="f16", **extra, **shape)
        print(path, path.stat().st_size)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus")
