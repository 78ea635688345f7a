"""Packed GEMM throughput (G multiply-accumulates/s) of every repacked format, optionally side by
side with another build of liblowbit (e.g. main's), in one run:

    python bench/bench_gemm.py [--baseline /path/to/other/liblowbit.so] [--batch 64]
                               [--shape 6912x2560] [--threads 1,2] [--rounds 5] [--isa avx2[,avxvnni]]
                               [--dram 512]

Both libraries get the same file bytes (pylowbit.quantize of one random matrix), repack them and
run lowbit_matrix_gemm (activation quantization included, as the decoder calls it) on the same
activations; their outputs are compared bit for bit (unless the libraries' activation groups for
the format differ, as PQ2_0's did before it moved to 128-groups).  Timings are interleaved (A, B, B, A, ...)
and the best round is kept: one thread in thread CPU time (robust to other processes on a shared
machine), two threads in wall time.  With --dram MB, each library also packs copies of the
matrix totalling >= MB megabytes and a timed call is one GEMM on each copy in turn (the prompt path
of a model far larger than L3: no weight is in cache when read); the "L3" rows reuse one matrix.
Not collected by pytest (no test functions): a script.
"""
import argparse
import atexit
import ctypes
import os
import shutil
import tempfile
import time

import numpy as np

import pylowbit as lb

PACKED = ["tq2_0", "i2_s", "pq2_0", "q2_0", "tq1_0", "ptq1_0"]


class Lib:
    """The few C entry points this benchmark needs, from one liblowbit.so."""

    def __init__(self, path, isa):
        self.path = path
        self.c = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        c = self.c
        c.lowbit_matrix_pack.restype = ctypes.c_void_p
        c.lowbit_matrix_pack.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        c.lowbit_matrix_free.argtypes = [ctypes.c_void_p]
        c.lowbit_matrix_gemm.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_void_p, ctypes.c_int]
        c.lowbit_type_from_name.argtypes = [ctypes.c_char_p]
        c.lowbit_act_group.restype = ctypes.c_int64
        c.lowbit_isa_from_name.argtypes = [ctypes.c_char_p]
        if isa and c.lowbit_set_isa(c.lowbit_isa_from_name(isa.encode())) != 0:
            raise SystemExit(f"{path}: cannot run variant {isa}")

    def pack(self, fmt, data, rows, cols):
        st = ctypes.c_int(0)
        m = self.c.lowbit_matrix_pack(self.c.lowbit_type_from_name(fmt.encode()),
                                      data.ctypes.data, rows, cols, 1, ctypes.byref(st))
        if not m:
            raise RuntimeError(f"{self.path}: pack {fmt} failed ({st.value})")
        return m

    def act_group(self, fmt):
        return self.c.lowbit_act_group(self.c.lowbit_type_from_name(fmt.encode()))

    def gemm(self, m, x, y, threads):
        st = self.c.lowbit_matrix_gemm(m, x.ctypes.data, x.shape[0], y.ctypes.data, threads)
        if st:
            raise RuntimeError(f"{self.path}: gemm failed ({st})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="another liblowbit.so to compare with")
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(lb.__file__), "liblowbit.so"),
                    help="the library under test (default: the installed pylowbit's)")
    ap.add_argument("--formats", default=",".join(PACKED))
    ap.add_argument("--shape", default="6912x2560", help="rows x cols of the weight matrix")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isa", default=None,
                    help="force a variant in both libraries, or BASE,NEW: one each (two variants of "
                         "one build side by side: --baseline the same .so copied to another path)")
    ap.add_argument("--dram", type=int, default=0, metavar="MB",
                    help="also time a cycled set of copies totalling >= MB (0: L3 regime only)")
    args = ap.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    isa_base, _, isa_new = (args.isa or "").partition(",")
    libs = [("new", Lib(args.lib, isa_new or isa_base or None))]
    if args.baseline:
        base = args.baseline
        if os.path.realpath(base) == os.path.realpath(args.lib):
            # one path loads one library (ctypes hands back its handle): a variant set in one
            # would be the other's too, so the baseline runs from a copy
            tmp = tempfile.mkdtemp()
            atexit.register(shutil.rmtree, tmp, True)
            base = os.path.join(tmp, "liblowbit-base.so")
            shutil.copyfile(args.lib, base)
        libs.insert(0, ("base", Lib(base, isa_base or None)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, cols), dtype=np.float32)
    print(f"{rows} x {cols}, batch {args.batch}; G MAC/s (1 thread: thread CPU time, more: wall)")
    head = "".join(f"{name + ' ' + t + 't':>11}" for t in args.threads.split(",") for name, _ in libs)
    ratios = "".join(f"{'new/base ' + t + 't':>15}" for t in args.threads.split(",")) if args.baseline else ""
    regimes = ["L3"] + (["DRAM"] if args.dram else [])
    copies = -(-(args.dram << 20) // (rows * cols // 4))  # packed codes: 2 bits per weight
    if args.dram:
        print(f"DRAM: {copies} packed copies per library, >= {args.dram} MB, cycled")
    print(f"{'format':13}{head}{ratios}")
    for fmt in args.formats.split(","):
        w = lb.quantize(rng.standard_normal((rows, cols), dtype=np.float32), fmt)
        data = np.ascontiguousarray(w.data)
        for regime in regimes:
            n = copies if regime == "DRAM" else 1
            mats = [(name, lib, [lib.pack(fmt, data, rows, cols) for _ in range(n)]) for name, lib in libs]
            ys = {name: np.empty((args.batch, rows), np.float32) for name, _ in libs}
            cells, gm = [], {}
            for t in (int(v) for v in args.threads.split(",")):
                clock = time.thread_time if t == 1 else time.perf_counter
                best = {name: float("inf") for name, _ in libs}
                for name, lib, ms in mats:  # warm-up
                    lib.gemm(ms[0], x, ys[name], t)
                for r in range(args.rounds):
                    # A, B then B, A: whichever runs second in a round measured up to ~1.1x
                    # faster in the DRAM regime (same library in both slots)
                    for name, lib, ms in (mats if r % 2 == 0 else mats[::-1]):
                        t0 = clock()
                        for m in ms:
                            lib.gemm(m, x, ys[name], t)
                        best[name] = min(best[name], clock() - t0)
                for name, _, _ in mats:
                    gm[name, t] = n * rows * cols * args.batch / best[name] / 1e9
                    cells.append(f"{gm[name, t]:11.1f}")
                # libraries that quantize the activations differently for the type (PQ2_0 / PTQ1_0
                # moved from group 32 to 128) agree only approximately: timed, not compared
                same_acts = len({lib.act_group(fmt) for _, lib in libs}) == 1
                if args.baseline and same_acts and not np.array_equal(ys["base"].view(np.uint32),
                                                                      ys["new"].view(np.uint32)):
                    raise SystemExit(f"{fmt}: the two libraries disagree")
            if args.baseline:
                cells += [f"{gm['new', t] / gm['base', t]:15.2f}" for t in (int(v) for v in args.threads.split(","))]
            label = f"{fmt} {regime}" if args.dram else fmt
            note = "" if same_acts else "  (activation groups differ: outputs not compared)"
            print(f"{label:13}" + "".join(cells) + note, flush=True)
            for _, lib, ms in mats:
                for m in ms:
                    lib.c.lowbit_matrix_free(m)

if __name__ == "__main__":
    main()
