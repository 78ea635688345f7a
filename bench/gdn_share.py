"""The recurrent layers' and the attention's share of a decoded token and of a prompt (issue 22:
Gated-DeltaNet work - conv, delta rule, gated norm - <= 5 % of a decode token at Bonsai 2 27B's
shape and <= 10 % of a 64-token prompt).

The C calls of each part are wrapped with a timer, as bench/python_share.py times the Python part:

- recurrent ops: _ops.ssm_conv, l2_norm, gdn_gates, gated_delta_rule, gated_rms_norm_silu;
- recurrent layer less its matrix products: the whole Model._gdn less the time in its four input
  projections and ssm_out (the ops above plus the Python slicing between them);
- attention ops: _ops.attention (KV store and attention over the cache), rope, sigmoid_mul.

Runs with and without the timers alternate, and each share is stated against the plain runs' time
(median): the calling thread's CPU time with one thread (it runs every kernel itself), the wall time
with more.  The timers' own cost counts inside the parts, so the shares are upper bounds.

    python bench/gdn_share.py [--preset bonsai2-27b] [--type ptq1_0] [-t 1] [-n 16] [-p 64] [-r 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

from pylowbit import _ops
from pylowbit.benchmark import synthetic_model
from pylowbit.model import Model
from pylowbit.model import forward as forward_mod

RECURRENT_OPS = ("ssm_conv", "l2_norm", "gdn_gates", "gated_delta_rule", "gated_rms_norm_silu")
ATTENTION_OPS = ("attention", "rope", "sigmoid_mul")


class PartTimers:
    """Wraps named functions of _ops and the model's recurrent layer with accumulating timers."""

    def __init__(self, model: Model, clock):
        self.model, self.clock = model, clock
        self.spent = {"recurrent ops": 0.0, "recurrent layer less matmuls": 0.0, "attention ops": 0.0}
        self._saved = []
        self._in_gdn_matmul = 0.0

    def _timed(self, fn, part):
        clock, spent = self.clock, self.spent

        def timed(*a, **k):
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                spent[part] += clock() - t0
        return timed

    def install(self):
        ops = forward_mod.ops  # the module object the decoder calls through (pylowbit._ops)
        assert ops is _ops
        for names, part in ((RECURRENT_OPS, "recurrent ops"), (ATTENTION_OPS, "attention ops")):
            for name in names:
                fn = getattr(ops, name)
                self._saved.append((ops, name, fn))
                setattr(ops, name, self._timed(fn, part))
        # the recurrent layer as a whole, less its projections: those run inside _gdn through the
        # layer's LinearGroups and its ssm_out Linear, timed here and subtracted
        model, clock, spent = self.model, self.clock, self.spent
        gdn = model._gdn
        matmul = [0.0]

        def timed_group(call):
            def inner(*a, **k):
                t0 = clock()
                try:
                    return call(*a, **k)
                finally:
                    matmul[0] += clock() - t0
            return inner

        def timed_gdn(il, L, h, ws):
            saved = dict(L)
            L["gdn_in"] = tuple(timed_group(g) for g in saved["gdn_in"])
            L["ssm_out"] = timed_group(saved["ssm_out"])
            m0, t0 = matmul[0], clock()
            try:
                return gdn(il, L, h, ws)
            finally:
                spent["recurrent layer less matmuls"] += (clock() - t0) - (matmul[0] - m0)
                L.update(saved)

        model._gdn = timed_gdn
        self._saved.append((model, "_gdn", None))

    def uninstall(self):
        for obj, name, fn in self._saved:
            if fn is None:
                del obj.__dict__[name]
            else:
                setattr(obj, name, fn)
        self._saved = []


def measure(model: Model, run, reps: int, clock) -> tuple[float, dict]:
    """Median plain time of run() and the median time of each part in the timed runs
    (plain and timed runs alternate)."""
    plain, parts = [], {}
    for i in range(2 * reps):
        timers = PartTimers(model, clock) if i % 2 else None
        if timers:
            timers.install()
        t0 = clock()
        try:
            run()
        finally:
            dt = clock() - t0
            if timers:
                timers.uninstall()
        if timers:
            for k, v in timers.spent.items():
                parts.setdefault(k, []).append(v)
        else:
            plain.append(dt)
    return statistics.median(plain), {k: statistics.median(v) for k, v in parts.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="bonsai2-27b")
    ap.add_argument("--type", default="ptq1_0")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-n", type=int, default=16, help="decode tokens per run (default 16)")
    ap.add_argument("-p", type=int, default=64, help="prompt tokens (default 64; 0 skips)")
    ap.add_argument("-r", type=int, default=2, help="runs of each kind, timed and plain (default 2)")
    args = ap.parse_args()

    path = synthetic_model(args.preset, args.type)
    model = Model(path, ctx=args.p + args.n + 16, threads=args.threads)
    if model.state is None:
        raise SystemExit(f"{path.name} has no recurrent layers")
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    what = "calling thread's CPU time" if args.threads == 1 else "wall time"
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

    print(f"{path.name}, {args.threads} thread(s), {args.r} plain + {args.r} timed runs of each, "
          f"shares of the plain runs' median ({what})")
    for label, run, n_tok, skip in (("decode", decode, args.n, args.n < 1), ("prompt", prefill, args.p, args.p < 1)):
        if skip:
            continue
        total, parts = measure(model, run, args.r, clock)
        print(f"{label} ({n_tok} tokens): {1e3 * total / n_tok:9.2f} ms a token")
        for k, v in parts.items():
            print(f"  {k:30s} {1e3 * v / n_tok:9.2f} ms a token   {100 * v / total:6.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
