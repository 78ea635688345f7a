"""`pylowbit quantize IN.gguf OUT.gguf --type T`: repack, quantize and Hadamard-rotate GGUF files.

Between low-bit formats (TQ1_0 TQ2_0 I2_S Q1_0 Q2_0 PQ2_0 PTQ1_0, and to Q8_0/F32/F16) the codes are
repacked and checked exact; a conversion that would change any value is refused with what would be
lost, unless --allow-lossy.  From float or other types (F32 F16 BF16 Q8_0 Q4_K Q6_K ...) the
weights are quantized: owners' absmax rule for the ternary formats, a per-block scale search for
Q2_0/PQ2_0.  Norms and 1-D tensors stay as they are (or --keep FLOAT_TYPE); token_embd stays as it
is unless --keep names its type.  --rotate B folds a blockwise Walsh-Hadamard rotation with random
signs into the quantized weights and writes the prism.hadamard.* metadata.  The output appears only
when complete; the input is never written.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def add_parser(sub):
    from ..convert import TARGETS

    p = sub.add_parser("quantize", help="convert / repack / rotate a GGUF file",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="input GGUF file")
    p.add_argument("output", help="output GGUF file (never the input)")
    p.add_argument("--type", "-t", required=True, type=str.lower, choices=TARGETS, metavar="TYPE",
                   help=f"target type for weight matrices: {', '.join(TARGETS)}")
    p.add_argument("--rotate", type=int, default=None, metavar="B",
                   help="fold a normalized Walsh-Hadamard rotation of block B (power of two dividing "
                        "every folded input width) into the quantized weights")
    p.add_argument("--keep", type=str.lower, choices=TARGETS, default=None, metavar="TYPE",
                   help="type for token_embd, for matrices whose rows do not fit --type, and (float "
                        "types only) for 1-D tensors; default: leave them as they are")
    p.add_argument("--only", default=None, metavar="REGEX",
                   help="convert only the weight matrices whose names match (e.g. 'ffn_down'); "
                        "the others stay as they are")
    p.add_argument("--allow-lossy", action="store_true",
                   help="re-quantize low-bit tensors that cannot be repacked exactly")
    p.add_argument("--seed", type=int, default=0, help="seed of the rotation's random signs (default 0)")
    p.add_argument("--method", choices=("auto", "absmax", "search"), default="auto",
                   help="block scales when quantizing from float: auto = MSE scale search for "
                        "Q2_0/PQ2_0, owners' absmax for the ternary formats; absmax = owners' rule "
                        "everywhere; search = MSE search for TQ1_0/TQ2_0/PTQ1_0 too (I2_S: always absmax)")
    p.add_argument("--absmax", dest="method", action="store_const", const="absmax",
                   help="same as --method absmax")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--report", metavar="TEXT", default=None,
                   help="then print the new file's KL divergence against the input on a sample of "
                        "TEXT (llama-perplexity's statistics; .gz is decompressed)")
    p.add_argument("--report-ctx", type=int, default=512, metavar="N", help="--report chunk length (default 512)")
    p.add_argument("--report-chunks", type=int, default=4, metavar="N",
                   help="--report chunks from the start of TEXT (default 4: 1020 scored tokens at -c 512)")
    p.add_argument("--threads", type=int, default=None, help="--report kernel threads")
    return p


def report(args) -> None:
    """The new file's KL divergence against its input on the first --report-chunks chunks of TEXT."""
    from .. import eval
    from ..eval.kld_stats import side_by_side

    ctx, chunks = args.report_ctx, args.report_chunks
    t0 = time.perf_counter()

    def progress(i, n, acc, floor):
        print(f"[{i}/{n}] {acc.running()}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    r = eval.kl_divergence(args.output, base_model=args.input, text=args.report, ctx=ctx, chunks=chunks,
                           max_tokens=ctx * chunks, threads=args.threads, progress=progress)
    print(f"KL divergence of {args.output} against {args.input} ({args.report}, ctx {ctx}):")
    print(side_by_side({"new vs input": r.stats}))


def main(args) -> int:
    from ..convert import convert

    if args.report is not None:
        from .run import check_threads_ctx

        check_threads_ctx(args.threads, args.report_ctx, min_ctx=4)
        if args.report_chunks < 1:
            raise ValueError(f"--report-chunks must be >= 1, got {args.report_chunks}")
        if not os.path.isfile(args.report):
            raise FileNotFoundError(f"--report text file not found: {args.report}")

    kw = dict(rotate=args.rotate, keep=args.keep, allow_lossy=args.allow_lossy, seed=args.seed,
              method=args.method, only=args.only)
    if args.quiet:
        convert(args.input, args.output, args.type, **kw)
        if args.report is not None:
            report(args)
        return 0
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    err = Console(stderr=True)
    with Progress(TextColumn("{task.description:<32.32}"), BarColumn(), DownloadColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err) as bar:
        task = bar.add_task("checking", total=None)

        def progress(done, total, name):
            bar.update(task, completed=done, total=total, description=name)

        result = convert(args.input, args.output, args.type, progress=progress,
                         notice=lambda m: err.print(m, markup=False, highlight=False), **kw)
        bar.update(task, description="done")
    counts = {}
    for src, dst, how in result["tensors"].values():
        counts[(src, dst, how)] = counts.get((src, dst, how), 0) + 1
    for (src, dst, how), n in sorted(counts.items()):
        err.print(f"  {n:4d} x {src:>6s} -> {dst:<6s} {how}", highlight=False)
    if result["rotated"]:
        err.print(f"  rotation: block {result['block']}, seed {result['seed']}, "
                  f"{len(result['rotated'])} tensors folded (prism.hadamard.* written)", highlight=False)
    err.print(f"wrote {args.output} ({result['bytes'] / 1e6:.1f} MB)", highlight=False)
    if args.report is not None:
        report(args)
    return 0
