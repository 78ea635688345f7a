"""`pylowbit bench`: tokens/s (prompt and generation) on a built-in synthetic model or any GGUF,
with the share of the memory-bandwidth roofline and, with --vs llama.cpp, the ratio to llama.cpp
measured in the same run on the same file."""
from __future__ import annotations

import sys


def _int_list(s: str) -> list[int]:
    try:
        vals = [int(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"expected a comma-separated list of integers, got {s!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise ValueError(f"expected positive integers, got {s!r}")
    return vals


def add_parser(sub):
    from pylowbit.benchmark import BENCH_TYPES, PRESETS

    p = sub.add_parser("bench", help="tokens/s on a synthetic model or a GGUF file",
                       description=__doc__)
    p.add_argument("-m", "--model", metavar="FILE", help="GGUF file to benchmark (default: a "
                   "synthetic model of --preset, written once into the cache directory)")
    p.add_argument("--preset", default="bitnet-2b", choices=list(PRESETS),
                   help="shape of the synthetic model (default: bitnet-2b = BitNet b1.58 2B4T)")
    p.add_argument("--type", default=None, metavar="LIST",
                   help=f"comma-separated weight formats of synthetic models ({', '.join(BENCH_TYPES)}); "
                        "default tq2_0 (i2_s for bitnet-2b-f16, as the published file)")
    from pylowbit import get_threads

    p.add_argument("-t", "--threads", default=",".join(sorted({"1", str(get_threads())}, key=int)),
                   metavar="LIST", help="comma-separated thread counts (default: 1 and the library's "
                   "default, one per physical performance core; see pylowbit info)")
    p.add_argument("-p", "--n-prompt", type=int, default=64, metavar="N",
                   help="prompt test: N tokens in one batch (0 skips it; default 64)")
    p.add_argument("-n", "--n-gen", type=int, default=16, metavar="N",
                   help="generation test: N tokens one by one (0 skips it; default 16)")
    # two by default, so that the first `pylowbit bench` after install stays short; the published
    # results pass -r 3
    p.add_argument("-r", "--repetitions", type=int, default=2, metavar="N",
                   help="repetitions of each test, after one warm-up (default 2; the results in "
                        "docs/PERFORMANCE.md use -r 3)")
    p.add_argument("--vs", choices=["llama.cpp", "torch"], help="also run llama-cpp-python (llama.cpp) "
                   "or a transformers model holding pylowbit.torch layers (torch: llama files; needs "
                   "torch and transformers) on the same file, interleaved, and add a ratio column")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of a table")
    out.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument("--plot", metavar="FILE", help="also draw the results into FILE (.png, .svg, .pdf; "
                   "needs pip install \"pylowbit[plot]\"; a saved --json: python -m pylowbit.plot)")
    return p


def main(args) -> int:
    from rich.console import Console

    from pylowbit import benchmark

    if args.plot:  # matplotlib and the file name checked before minutes of measuring
        from pylowbit.plot import check_target
        check_target(args.plot)
    result = benchmark.run(args.model, preset=args.preset, types=args.type, threads=_int_list(args.threads),
                           n_prompt=args.n_prompt, n_gen=args.n_gen, reps=args.repetitions, vs=args.vs,
                           console=Console(stderr=True))
    if args.json:
        print(result.to_json())
    elif args.csv:
        print(result.to_csv(), end="")
    else:
        print_table(*result)
    if args.plot:
        from pylowbit.plot import machine_description, plot
        plot(tuple(result), args.plot, machine=machine_description())
    return 0


def print_table(rows, info) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="pylowbit bench", title_justify="left")
    for col, just in [("model", "left"), ("format", "left"), ("size", "right"), ("engine", "left"),
                      ("threads", "right"), ("test", "left"), ("t/s", "right"),
                      ("roofline", "right"), (f"vs {info.get('vs') or 'llama.cpp'}", "right"), ("peak RSS", "right"),
                      ("load", "right")]:
        t.add_column(col, justify=just)
    for r in rows:
        t.add_row(r.model, r.format, f"{r.size_bytes / 2**30:.2f} GiB", r.engine, str(r.threads),
                  r.test, f"{r.tokens_per_s:.2f} ± {r.stdev:.2f}",
                  "-" if r.roofline_share is None else f"{100 * r.roofline_share:.0f} %",
                  "-" if (r.vs_llama_cpp or r.vs_torch) is None else f"{r.vs_llama_cpp or r.vs_torch:.2f}x",
                  f"{r.peak_rss_bytes / 2**30:.2f} GiB", f"{r.load_s:.1f} s")
    c = Console(width=None if sys.stdout.isatty() else 160)
    c.print(t)
    spread = info["bandwidth_range_bytes_per_s"]  # set with the mean, thread count by thread count
    bw = ", ".join(f"{k} thread{'s' if k > 1 else ''}: {v / 1e9:.1f} GB/s "
                   f"({spread[k][0] / 1e9:.1f}-{spread[k][1] / 1e9:.1f})"
                   for k, v in info["bandwidth_bytes_per_s"].items())
    if bw:
        c.print(f"read bandwidth measured in this run, probed before and after every generation run: {bw} "
                f"(mean, and the probes' range); roofline share = a run's bytes per second (the weights, "
                f"and a recurrent model's state read and written) / the better of its two probes, averaged over the repetitions")
    c.print(f"{info['reps']} repetitions, mean ± stdev")
    if len({r.model for r in rows}) > 1 or len({r.engine for r in rows}) > 1:
        c.print("peak RSS: the whole process's while the row ran, with every model measured alongside "
                "it loaded (files and engines are interleaved repetition by repetition, unless the files "
                "do not fit in memory together: then each is measured in turn)")
