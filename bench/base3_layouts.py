"""TQ1_0 / PTQ1_0 in the dense base-3 packed layout against the 2-bit one, in one process.

    python bench/base3_layouts.py [--threads 1] [--rounds 5] [--mb 768] [--fmt ptq1_0,tq1_0]
        [--shapes 6912x2560,...]

For each format and shape, copies of one random matrix are packed both ways (PYLOWBIT_BASE3=1 and
=0, each >= --mb MB of packed bytes, so that a pass over the copies streams from DRAM) and their
GEMVs timed pass by pass, the two layouts alternated, with the read probe (liblowbit's read loop
over 512 MB, as `pylowbit bench` measures its roofline) before and after each round.  Prints the
share of the file-byte roofline (file bytes / GEMV time / the better probe) of each layout, median
over rounds, and the ratio new / old.  One thread is timed in thread CPU time (robust to other
processes on a shared machine), more in wall time.
"""
import argparse
import os
import statistics
import time

import numpy as np

import pylowbit as lb
from pylowbit.benchmark import probe_buffer, read_bandwidth

SHAPES = [(6912, 2560), (2560, 6912), (17408, 5120), (5120, 17408), (5120, 6144)]
SCALE_AT = {"tq1_0": (54, 52), "ptq1_0": (28, 26)}


def random_weights(fmt, rows, cols, seed=0):
    """Random code bytes with sane fp16 scales (the codes a file could hold)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 243, lb.tensor_nbytes(fmt, rows * cols), dtype=np.uint8)
    size, at = SCALE_AT[fmt]
    blocks = data.reshape(-1, size)
    d = rng.uniform(0.25, 2, blocks.shape[0]).astype(np.float16)
    blocks[:, at:at + 2] = d.view(np.uint8).reshape(-1, 2)
    return lb.QTensor(data, fmt, (rows, cols))


def packed_copies(w, dense, total_bytes):
    os.environ["PYLOWBIT_BASE3"] = "1" if dense else "0"
    first = w.pack()
    n = max(2, -(-total_bytes // first.packed_nbytes))
    return [first] + [w.pack() for _ in range(n - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb", type=int, default=768)
    ap.add_argument("--fmt", default="ptq1_0,tq1_0")
    ap.add_argument("--shapes", default=",".join(f"{r}x{c}" for r, c in SHAPES),
                    help="comma-separated ROWSxCOLS")
    args = ap.parse_args()
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    probe = probe_buffer(512 << 20)
    print(f"isa {lb.isa_active()}, {args.threads} thread(s), >= {args.mb} MB of copies per layout")
    print("fmt     shape          packed/file (dense, 2-bit)  share dense  share 2-bit  dense/2-bit")
    for fmt in args.fmt.split(","):
        for rows, cols in (tuple(map(int, sh.split("x"))) for sh in args.shapes.split(",")):
            w = random_weights(fmt, rows, cols)
            x = np.random.default_rng(1).standard_normal(cols).astype(np.float32)
            layouts = [packed_copies(w, d, args.mb << 20) for d in (True, False)]
            ref = w.gemv(x)
            for copies in layouts:
                assert np.array_equal(copies[0].gemv(x, threads=args.threads), ref)
            shares = [[], []]
            for _ in range(args.rounds):
                bw = read_bandwidth(args.threads, reps=3, clock=clock, buf=probe)
                times = []
                for copies in layouts:
                    t0 = clock()
                    for p in copies:
                        p.gemv(x, threads=args.threads)
                    times.append((clock() - t0) / len(copies))
                bw = max(bw, read_bandwidth(args.threads, reps=3, clock=clock, buf=probe))
                for i, t in enumerate(times):
                    shares[i].append(w.data.nbytes / t / bw)
            med = [statistics.median(s) for s in shares]
            ratio = statistics.median(a / b for a, b in zip(*shares))
            sizes = [c[0].packed_nbytes / w.data.nbytes for c in layouts]
            print(f"{fmt:7} {rows:5} x {cols:<5}  {sizes[0]:.3f}, {sizes[1]:.3f}"
                  f"                {med[0]:.2f}         {med[1]:.2f}         {ratio:.2f}x",
                  flush=True)
            del layouts


if __name__ == "__main__":
    main()
