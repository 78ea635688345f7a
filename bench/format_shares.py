"""Each packed format's GEMV against the read probe, shape by shape, in one process.

    python bench/format_shares.py [--threads 1] [--rounds 3] [--mb 640]
        [--fmt tq1_0,tq2_0,i2_s,q2_0,pq2_0,ptq1_0] [--shapes 6912x2560,...]

For each format and shape, copies of one quantized random matrix (>= --mb MB of packed bytes, so
that a pass streams from DRAM) are cycled GEMV by GEMV, with liblowbit's read probe (the loop
`pylowbit bench` takes its roofline from) right before and after each round.  Printed, median
over rounds: the share of the file-byte roofline (file bytes / GEMV time / the better probe) in
wall time (probe in wall time) and, on one thread, in thread CPU time (the probe's too: robust to
other processes taking the core), the packed /
file byte ratio, and the in-cache speed (one copy, repeated) as G weights/s against what the
probe's bandwidth needs at the file's density: below 1 the kernel is compute-bound, not
bandwidth-bound.
"""
import argparse
import statistics
import time

import numpy as np

import pylowbit as lb
from pylowbit.benchmark import probe_buffer, read_bandwidth

FORMATS = "tq1_0,tq2_0,i2_s,q2_0,pq2_0,ptq1_0"
SHAPES = "6912x2560,2560x6912,5120x17408,17408x5120,6144x5120"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mb", type=int, default=640)
    ap.add_argument("--fmt", default=FORMATS)
    ap.add_argument("--shapes", default=SHAPES, help="comma-separated ROWSxCOLS")
    args = ap.parse_args()
    t = args.threads
    probe = probe_buffer(512 << 20)
    print(f"isa {lb.isa_active()}, {t} thread(s), >= {args.mb} MB of copies")
    print("fmt     shape          packed/file  share wall  share cpu  probe GB/s  "
          "cache Gw/s  cache/needed")
    rng = np.random.default_rng(0)
    for rows, cols in (tuple(map(int, sh.split("x"))) for sh in args.shapes.split(",")):
        w32 = rng.standard_normal((rows, cols), dtype=np.float32)
        x = rng.standard_normal(cols).astype(np.float32)
        for fmt in args.fmt.split(","):
            w = lb.quantize(w32, fmt)
            first = w.pack()
            n = max(2, -(-(args.mb << 20) // first.packed_nbytes))
            copies = [first] + [w.pack() for _ in range(n - 1)]
            ref = w.gemv(x)
            assert np.array_equal(first.gemv(x, threads=t), ref)
            wall, cpu, bws = [], [], []
            for _ in range(args.rounds):
                bw = read_bandwidth(t, reps=3, buf=probe)
                bc = read_bandwidth(t, reps=3, buf=probe, clock=time.thread_time) if t == 1 else 0
                t0, c0 = time.perf_counter(), time.thread_time()
                for p in copies:
                    p.gemv(x, threads=t)
                tw, tc = time.perf_counter() - t0, time.thread_time() - c0
                bw = max(bw, read_bandwidth(t, reps=3, buf=probe))
                if t == 1:
                    bc = max(bc, read_bandwidth(t, reps=3, buf=probe, clock=time.thread_time))
                bws.append(bw)
                wall.append(w.data.nbytes * n / tw / bw)
                cpu.append(w.data.nbytes * n / tc / bc if t == 1 else float("nan"))
            reps = max(8, int(2e9 // (rows * cols)))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(reps):
                    first.gemv(x, threads=t)
                best = min(best, (time.perf_counter() - t0) / reps)
            cache_wps = rows * cols / best
            needed = statistics.median(bws) / (w.data.nbytes / (rows * cols))
            print(f"{fmt:7} {rows:5} x {cols:<5}  {first.packed_nbytes / w.data.nbytes:.3f}"
                  f"        {statistics.median(wall):.2f}        {statistics.median(cpu):.2f}"
                  f"       {statistics.median(bws) / 1e9:5.1f}       {cache_wps / 1e9:5.1f}"
                  f"       {cache_wps / needed:.2f}", flush=True)
            del copies, first


if __name__ == "__main__":
    main()
