"""Gated-DeltaNet delta rule at the Bonsai 2 27B shape (d = 128, Hk = 16, Hv = 48, 48 GDN layers).

    python bench/bench_gdn.py                 # decode GB/s vs probes, prompt sequential vs chunked
    python bench/bench_gdn.py --threads 1 --rounds 9

Decode: one token through 48 layers' states (48 x 48 x 128 x 128 float32 = 144 MiB), each read and
written once, so its traffic is 2 x 144 MiB.  Next to it, in the same run and on the same number of
threads, two probes over the same 144 MiB: an in-place scale (numpy multiply, the delta rule's
read-modify-write pattern without its arithmetic) and a copy into a second buffer (memcpy-like:
read one, write the other).  Each contender runs interleaved round by round; the best round counts,
and the table gives GB/s and the delta rule's ratio to each probe.

Prompt: one layer's T = 64 and T = 512 tokens, sequential against chunked (gated_delta_rule's
`chunked`), interleaved the same way, tokens per second and the ratio.
"""
import argparse
import threading
import time

import numpy as np

from pylowbit import _ops as ops

D, HK, HV, LAYERS = 128, 16, 48, 48


def best_of(rounds, contenders):
    """{name: best seconds} of each zero-argument callable, interleaved round by round."""
    best = {name: float("inf") for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def on_threads(n, fn, parts):
    """Run fn(part) for each part, one Python thread each (numpy releases the GIL in ufuncs)."""
    if n == 1:
        for p in parts:
            fn(p)
        return
    ts = [threading.Thread(target=fn, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def inputs(T, rng):
    def l2(a):
        return (a / np.sqrt((a * a).sum(-1, keepdims=True) + 1e-6)).astype(np.float32)
    q, k = l2(rng.standard_normal((T, HK, D))), l2(rng.standard_normal((T, HK, D)))
    v = rng.standard_normal((T, HV, D)).astype(np.float32)
    g = (-np.abs(rng.standard_normal((T, HV))) * 0.1).astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.standard_normal((T, HV))))).astype(np.float32)
    return q, k, v, g, beta


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    nt, rng = args.threads, np.random.default_rng(0)

    # ---- decode: one token, 48 layers
    states = (rng.standard_normal((LAYERS, HV, D, D)) * 0.01).astype(np.float32)
    other = np.empty_like(states)
    tok = inputs(1, rng)
    out = np.empty((1, HV, D), np.float32)
    nbytes = states.nbytes
    halves = np.array_split(np.arange(LAYERS), nt)

    def decode():
        for layer in range(LAYERS):
            ops.gated_delta_rule(*tok, states[layer], out=out, threads=nt)

    def scale():
        on_threads(nt, lambda ls: np.multiply(states[ls[0]:ls[-1] + 1], 1.0, out=states[ls[0]:ls[-1] + 1]),
                   halves)

    def copy():
        on_threads(nt, lambda ls: np.copyto(other[ls[0]:ls[-1] + 1], states[ls[0]:ls[-1] + 1]), halves)

    best = best_of(args.rounds, {"delta rule": decode, "in-place scale": scale, "copy": copy})
    print(f"decode, 1 token x {LAYERS} layers, state {nbytes / 2**20:.0f} MiB read + written, "
          f"{nt} thread(s), best of {args.rounds}")
    gbps = {name: 2 * nbytes / s / 1e9 for name, s in best.items()}
    for name, s in best.items():
        print(f"  {name:16s} {s * 1e3:8.2f} ms  {gbps[name]:6.1f} GB/s")
    print(f"  delta rule / in-place scale: {gbps['delta rule'] / gbps['in-place scale']:.2f}   "
          f"delta rule / copy: {gbps['delta rule'] / gbps['copy']:.2f}")
    del states, other

    # ---- prompt: one layer
    state0 = (rng.standard_normal((HV, D, D)) * 0.01).astype(np.float32)
    for T in (64, 512):
        x = inputs(T, rng)
        st = state0.copy()
        o = np.empty((T, HV, D), np.float32)
        rounds = max(2, args.rounds // (2 if T > 64 else 1))
        best = best_of(rounds, {
            "sequential": lambda: ops.gated_delta_rule(*x, st, out=o, threads=nt, chunked=False),
            "chunked": lambda: ops.gated_delta_rule(*x, st, out=o, threads=nt, chunked=True),
        })
        print(f"prompt T = {T}, one layer, {nt} thread(s): sequential {T / best['sequential']:8.0f} tok/s, "
              f"chunked {T / best['chunked']:8.0f} tok/s, chunked / sequential speed "
              f"{best['sequential'] / best['chunked']:.2f}")


if __name__ == "__main__":
    main()
