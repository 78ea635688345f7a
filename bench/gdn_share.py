"""The recurrent layers' share of a decoded token and of a prompt: the Gated-DeltaNet work (conv,
L2 norms, gates, delta rule, gated norm: what runs between a recurrent layer's input projections
and its ssm_out) against the whole forward pass, on a qwen35 model (by default Bonsai 2 27B's shape).

The C layer loop times that part itself (`_ops.decoder_timing`, lowbit_decoder_timing in
lowbit/decoder.h: a monotonic clock read around it in each Gated-DeltaNet block); the token's time
is the wall time of Model.forward, head and embedding included.  Runs with and without the timer
alternate, and the share is the timed runs' recurrent time over the plain runs' median.

    python bench/gdn_share.py [--preset bonsai2-27b] [--type ptq1_0] [-m FILE] [-t 1] [-n 16] [-p 64] [-r 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

from pylowbit import _ops
from pylowbit.benchmark import synthetic_model
from pylowbit.model import Model


def measure(run, reps: int) -> tuple[float, float]:
    """(median wall time of the plain runs, median recurrent time of the timed runs)."""
    plain, recurrent = [], []
    for i in range(2 * reps):
        timed = i % 2 == 1
        _ops.decoder_timing(timed)
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        r, _ = _ops.decoder_timing(False)
        (recurrent.append(r) if timed else plain.append(dt))
    return statistics.median(plain), statistics.median(recurrent)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", help="a qwen35 GGUF file (default: the synthetic preset's)")
    ap.add_argument("--preset", default="bonsai2-27b")
    ap.add_argument("--type", default="ptq1_0")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-n", type=int, default=16, help="decode tokens per run (default 16)")
    ap.add_argument("-p", type=int, default=64, help="prompt tokens (default 64; 0 skips)")
    ap.add_argument("-r", type=int, default=2, help="runs of each kind, timed and plain (default 2)")
    args = ap.parse_args()

    path = args.model or synthetic_model(args.preset, args.type)
    model = Model(path, ctx=args.p + args.n + 16, threads=args.threads)
    if model.state is None:
        raise SystemExit(f"{path} has no recurrent layers")
    vocab = model.vocab_size
    prompt = [(7 * j + 11) % (vocab - 10) + 10 for j in range(max(args.p, 4))]
    model.forward(prompt[:4], pos=0, logits="last")  # warm: weights resident, pool started

    def decode():
        model.reset()
        for i in range(args.n):
            model.forward([prompt[i % len(prompt)]])

    def prefill():
        model.reset()
        model.forward(prompt[:args.p], pos=0)

    print(f"{path}, {args.threads} thread(s), {args.r} plain + {args.r} timed runs of each")
    for label, run, n_tok in (("decode", decode, args.n), ("prompt", prefill, args.p)):
        if n_tok < 1:
            continue
        total, rec = measure(run, args.r)
        print(f"{label} ({n_tok} tokens): {1e3 * total / n_tok:9.2f} ms a token, recurrent part "
              f"{1e3 * rec / n_tok:7.2f} ms = {100 * rec / total:5.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
