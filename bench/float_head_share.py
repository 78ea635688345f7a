"""The float LM head's own share of the read bandwidth: the F16 / BF16 GEMV alone at the 2B4T head's
shape (128256 x 2560, 656 MB: far beyond the caches), timed in alternation with liblowbit's read
probe (`pylowbit bench`'s roofline) on the same thread count, so drift on a shared machine hits
both alike.  share = (matrix bytes / GEMV time) / probe bandwidth, per round; rounds report the
probe taken right before and after each GEMV (the better of the two, as `pylowbit bench` does).

    python bench/float_head_share.py [--type f16,bf16] [-t 1] [-r 5] [--isa avx512vnni]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", default="f16", help="comma-separated: f16, bf16")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=128256)
    ap.add_argument("--cols", type=int, default=2560)
    ap.add_argument("--isa", default=None, help="PYLOWBIT_ISA for this run")
    ap.add_argument("--kernels", default=None,
                    help="comma-separated kernel names (pylowbit info --kernels) to alternate "
                         "round by round, e.g. gemv_f16_avx512_l2pf,gemv_f16_avx512; default: "
                         "the one the dispatcher picks")
    args = ap.parse_args()
    if args.isa:
        os.environ["PYLOWBIT_ISA"] = args.isa
    import pylowbit as lb
    from pylowbit import _lowbit
    from pylowbit.benchmark import probe_buffer

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, args.cols), dtype=np.float32)
    y = np.empty((1, args.rows), dtype=np.float32)
    probe = probe_buffer(512 << 20)
    _lowbit.stream_read(probe, args.threads)

    def probe_bw() -> float:
        t0 = time.perf_counter()
        _lowbit.stream_read(probe, args.threads)
        return probe.nbytes / (time.perf_counter() - t0)

    print(f"isa {lb.isa_active()}, {args.rows} x {args.cols}, {args.threads} thread(s)")
    for name in args.type.split(","):
        tid = _lowbit.type_from_name(name)
        w = rng.standard_normal(args.rows * args.cols, dtype=np.float32)
        if name == "f16":
            wb = w.astype(np.float16).view(np.uint8)
        else:  # bf16: the upper halves of float32
            wb = (w.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
        del w
        kernels = args.kernels.split(",") if args.kernels else [None]
        kernels = [k for k in kernels if k is None or name in k.split("_")]
        _lowbit.gemm(wb, tid, args.rows, args.cols, x, y, args.threads)
        shares = {k: [] for k in kernels}
        gbs = {k: [] for k in kernels}
        probes = []
        before = probe_bw()
        for _ in range(args.rounds):
            for k in kernels:
                _lowbit.prefer_kernel(k)
                t0 = time.perf_counter()
                _lowbit.gemm(wb, tid, args.rows, args.cols, x, y, args.threads)
                bw = wb.nbytes / (time.perf_counter() - t0)
                after = probe_bw()
                shares[k].append(bw / max(before, after))
                gbs[k].append(bw / 1e9)
                probes.append(after / 1e9)
                before = after
        _lowbit.prefer_kernel(None)
        for k in kernels:
            s, g = shares[k], gbs[k]
            print(f"{name} {k or _lowbit.kernel_selected(lb.isa_active(), name, 'file', 'float_gemv')}:"
                  f" GEMV {statistics.mean(g):.2f} GB/s ({min(g):.2f}-{max(g):.2f}), share of the "
                  f"probe {statistics.mean(s):.0%} ({min(s):.0%}-{max(s):.0%})")
        print(f"  probes {min(probes):.2f}-{max(probes):.2f} GB/s")
        del wb


if __name__ == "__main__":
    main()
