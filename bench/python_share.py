"""Python's share of a decoded token (issue #5: time outside the C kernels <= 10 % of a token at the
BitNet b1.58 2B shape).

Every function of pylowbit's C extension modules the decoder calls (_lowbit: the head's product
and the embedding rows' codec; _ops: the final norm and the layer loop _ops.Decoder.run) is wrapped
with a timer; a token's Python time is the calling thread's CPU time for the token less its CPU time inside those calls
(CPU time, not wall time: on a shared machine a descheduled moment would count as Python).  The
wrappers' own cost (two clock reads and a Python call each, measured here on an empty function) is
counted as Python, so the share is an upper bound.  Tokens with and without the wrappers alternate;
the share is stated against the plain tokens' time: the calling thread's CPU time with one thread
(it runs the kernels itself), the wall time with more.

    python bench/python_share.py [--preset bitnet-2b] [--type tq2_0] [-t 1] [-n 32]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pylowbit import _lowbit, _ops
from pylowbit.benchmark import synthetic_model
from pylowbit.model import Model

MODULES = (_lowbit, _ops)


class Timers:
    def __init__(self):
        self.inside = 0.0
        self.calls = 0
        self.saved = []

    def install(self):
        for mod in MODULES:
            for name in dir(mod):
                fn = getattr(mod, name)
                if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                    continue
                self.saved.append((mod, name, fn))
                setattr(mod, name, self._wrap(fn))

    def install_layers(self, model):
        """Times the model's one-call layer loop (a method of an extension type, which can't be
        patched on the type): the model is handed a stand-in whose run is wrapped."""
        layers = model._decoder()
        stand_in = type("TimedLayers", (), {"run": staticmethod(self._wrap(layers.run))})()
        model._decoder = lambda: stand_in
        self.saved.append((model, "_decoder", None))

    def uninstall(self):
        for obj, name, fn in self.saved:
            if fn is None:
                del obj.__dict__[name]  # the instance attribute: back to the class's method
            else:
                setattr(obj, name, fn)
        self.saved = []

    def _wrap(self, fn):
        clock = time.thread_time

        def timed(*a, **k):
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                self.inside += clock() - t0
                self.calls += 1
        return timed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="bitnet-2b")
    ap.add_argument("--type", default="tq2_0")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-n", type=int, default=32, help="tokens of each kind (default 32)")
    args = ap.parse_args()

    path = synthetic_model(args.preset, args.type)
    model = Model(path, ctx=2 * args.n + 16, threads=args.threads)
    model.forward([1, 2, 3, 4], pos=0, logits="last")  # warm: weights resident, pool started
    timers = Timers()

    # the wrappers' own cost per call: a timed call of a function that does nothing
    noop = timers._wrap(lambda: None)
    t0 = time.thread_time()
    for _ in range(100000):
        noop()
    per_call = (time.thread_time() - t0) / 100000
    timers.inside = timers.calls = 0

    plain, timed, python = [], [], []
    tok = 5
    for i in range(2 * args.n):
        wrapped = i % 2 == 1
        if wrapped:
            timers.install()
            timers.install_layers(model)
            inside0, calls0 = timers.inside, timers.calls
        t0, c0 = time.perf_counter(), time.thread_time()
        logits = model.forward([tok])
        dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
        if wrapped:
            timers.uninstall()
            timed.append(cpu if args.threads == 1 else dt)
            python.append(cpu - (timers.inside - inside0))
            calls = timers.calls - calls0
        else:
            plain.append(cpu if args.threads == 1 else dt)
        tok = int(np.argmax(logits))

    med = statistics.median
    print(f"{path.name}, {args.threads} thread(s), {args.n} + {args.n} decode tokens, alternating")
    what = "calling thread's CPU time" if args.threads == 1 else "wall time"
    print(f"token time, plain:        {1e3 * med(plain):8.2f} ms (median, {what})")
    print(f"token time, timed calls:  {1e3 * med(timed):8.2f} ms ({calls} C calls a token, "
          f"{1e6 * per_call:.2f} us of timer cost each)")
    print(f"Python time a token:      {1e3 * med(python):8.2f} ms (timer cost included: upper bound)")
    print(f"Python share:             {100 * med(python) / med(plain):8.2f} % of a plain token "
          f"(without the timer cost: {100 * (med(python) - calls * per_call) / med(plain):.2f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
