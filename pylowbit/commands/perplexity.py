"""`pylowbit perplexity`: perplexity the way llama.cpp's llama-perplexity computes it.

The text is tokenized once (with BOS), cut into non-overlapping chunks of ctx tokens; each chunk
starts with BOS (replacing its first token) and runs from an empty cache; only the second half of
each chunk is scored (every token there has at least ctx/2 tokens of context).

KL divergence, as llama-perplexity computes it: --kl-divergence-base FILE writes the scored tokens'
log-probabilities (llama-perplexity's own file format, so either program reads the other's);
--kl-divergence-base FILE --kl-divergence scores another model or runtime against them on the
file's token ids.  --vs llama.cpp runs llama.cpp (llama-cpp-python) on the same file and ids as the
base, in this process, and prints pylowbit's statistics beside llama.cpp's own f16-KV-cache floor.
"""

from __future__ import annotations

import sys
import time


def add_parser(sub):
    p = sub.add_parser("perplexity", help="perplexity of a GGUF model on a text file",
                       description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", required=True, help="GGUF file")
    p.add_argument("-f", "--file", default=None,
                   help="text file (.gz is decompressed); not with --kl-divergence (the base has the ids)")
    p.add_argument("-c", "--ctx-size", type=int, default=512, help="chunk length in tokens (default 512)")
    p.add_argument("--chunks", type=int, default=None, help="score at most this many chunks")
    p.add_argument("--max-tokens", type=int, default=None, help="use only the first N tokens of the text")
    p.add_argument("-t", "--threads", type=int, default=None, help="kernel threads")
    p.add_argument("--foreign", choices=("q8_0", "f16", "f32"), default="q8_0",
                   help="keep tensors of types without a pylowbit kernel as this (default q8_0)")
    p.add_argument("--kl-divergence-base", metavar="FILE", default=None,
                   help="write the scored tokens' log-probabilities to FILE (llama-perplexity's format; "
                        "about 2 x vocab bytes per scored token), or with --kl-divergence read them")
    p.add_argument("--kl-divergence", action="store_true",
                   help="score this model against --kl-divergence-base FILE on its token ids: KLD, "
                        "same top token, delta-p, perplexity ratio (llama-perplexity's statistics)")
    p.add_argument("--vs", choices=("llama.cpp",), default=None,
                   help="KL divergence against llama.cpp (llama-cpp-python) on the same file and ids, "
                        "f32 KV cache, beside llama.cpp's own f16-vs-f32 KV cache floor")
    return p


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def main(args) -> int:
    from .. import eval
    from .run import check_threads_ctx

    check_threads_ctx(args.threads, args.ctx_size, min_ctx=4)
    kw = dict(chunks=args.chunks, max_tokens=args.max_tokens, threads=args.threads, foreign=args.foreign,
              notice=_stderr)
    t0 = time.perf_counter()
    if args.kl_divergence:
        if not args.kl_divergence_base:
            raise ValueError("--kl-divergence needs --kl-divergence-base FILE (written by a base run)")
        if args.vs:
            raise ValueError("--vs llama.cpp runs its own base: not with --kl-divergence")
        if args.file is not None:
            _stderr("note: -f is not used with --kl-divergence (the base file holds the token ids)")

        def progress(i, n, acc, floor):
            _stderr(f"[{i}/{n}] {acc.running()}  ({time.perf_counter() - t0:.0f} s)")

        r = eval.kl_divergence(args.model, base_file=args.kl_divergence_base, progress=progress, **kw)
        print(r.stats.format())
        return 0
    if args.vs and args.kl_divergence_base:
        raise ValueError("--vs llama.cpp keeps its base in memory: not with --kl-divergence-base")
    if args.file is None:
        raise ValueError("-f/--file is required (the text to score)")
    if args.vs:
        from ..eval.kld_stats import side_by_side

        def progress(i, n, ours, floor):
            _stderr(f"[{i}/{n}] pylowbit: {ours.running()}\n      llama.cpp f16 KV: {floor.running()}  "
                    f"({time.perf_counter() - t0:.0f} s)")

        r = eval.kl_divergence(args.model, vs=args.vs, text=args.file, ctx=args.ctx_size, progress=progress, **kw)
        print(f"KL divergence against llama.cpp (f32 KV cache) on the same {r.stats.n} scored tokens "
              f"({r.n_chunks} chunks of {args.ctx_size}):")
        print(side_by_side({"pylowbit": r.stats, "llama.cpp f16 KV (floor)": r.floor}))
        return 0

    def progress(i, n, running):
        _stderr(f"[{i}/{n}] ppl {running:.4f}  ({time.perf_counter() - t0:.0f} s)")

    r = eval.perplexity(args.model, args.file, ctx=args.ctx_size, kl_divergence_base=args.kl_divergence_base,
                        progress=progress, **kw)
    print(f"perplexity: {r.ppl:.4f} +/- {r.ppl_err:.4f}  ({r.n_scored} tokens scored, ctx {r.ctx}, "
          f"{r.n_chunks} chunks, {r.seconds:.1f} s, {r.tokens_per_s:.1f} tokens/s)")
    if r.base_file is not None:
        print(f"KL-divergence base written: {r.base_file} ({r.base_file_bytes / 1e6:.1f} MB)")
    return 0
