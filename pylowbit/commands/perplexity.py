"""`pylowbit perplexity`: perplexity the way llama.cpp's llama-perplexity computes it.

The text is tokenized once (with BOS), cut into non-overlapping chunks of ctx tokens; each chunk
starts with BOS (replacing its first token) and runs from an empty cache; only the second half of
each chunk is scored (every token there has at least ctx/2 tokens of context).
"""

from __future__ import annotations

import gzip
import math
import sys
import time

import numpy as np


def add_parser(sub):
    p = sub.add_parser("perplexity", help="perplexity of a GGUF model on a text file",
                       description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", required=True, help="GGUF file")
    p.add_argument("-f", "--file", required=True, help="text file (.gz is decompressed)")
    p.add_argument("-c", "--ctx-size", type=int, default=512, help="chunk length in tokens (default 512)")
    p.add_argument("--chunks", type=int, default=None, help="score at most this many chunks")
    p.add_argument("--max-tokens", type=int, default=None, help="use only the first N tokens of the text")
    p.add_argument("-t", "--threads", type=int, default=None, help="kernel threads")
    p.add_argument("--foreign", choices=("q8_0", "f16", "f32"), default="q8_0",
                   help="keep tensors of types without a pylowbit kernel as this (default q8_0)")
    return p


def read_text(path: str) -> str:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def log_softmax_at(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """log p(target) per row, in float64, a row at a time through one float64 buffer (a row of a 262k
    vocabulary is 2 MB as float64: a 32-row block converted at once was 64 MB; the values are the same)."""
    out = np.empty(len(targets))
    z = np.empty(logits.shape[1])
    for i, (row, t) in enumerate(zip(logits, targets)):
        z[:] = row
        m, picked = z.max(), z[t]
        z -= m
        np.exp(z, out=z)
        out[i] = picked - (m + np.log(z.sum()))
    return out


def perplexity(model, tokens, ctx: int, chunks: int | None = None, bos_id: int | None = None,
               progress=None, head_rows: int = 8):
    """Returns (ppl, stderr of ppl, scored token count).  progress(i, n, running_ppl) per chunk."""
    n_chunk = len(tokens) // ctx
    if chunks is not None:
        n_chunk = min(n_chunk, chunks)
    if n_chunk < 1:
        raise ValueError(f"need at least {ctx} tokens for one chunk of -c {ctx}, the text has {len(tokens)}")
    first = ctx // 2
    nll = []
    for i in range(n_chunk):
        chunk = np.array(tokens[i * ctx:(i + 1) * ctx], dtype=np.int64)
        if bos_id is not None:
            chunk[0] = bos_id
        model.reset()
        # the unscored first half only fills the KV cache; two calls of ctx/2 tokens halve the
        # activations' peak (the same hidden states: each row's results do not depend on the batch)
        model.forward(chunk[:first], pos=0, logits="none")
        h = model.forward(chunk[first:], pos=first, logits="hidden")  # (ctx - first, d)
        # the LM head in slices keeps the logits small (8 rows x 262k: 8 MB; the same values as any
        # other slicing, ~1.1x the head's CPU time of 32-row slices)
        for r in range(first, ctx - 1, head_rows):
            r1 = min(r + head_rows, ctx - 1)
            lp = log_softmax_at(model.head(h[r - first:r1 - first]), chunk[r + 1:r1 + 1])
            nll.extend((-lp).tolist())
        if progress is not None:
            progress(i + 1, n_chunk, math.exp(float(np.mean(nll))))
    nll = np.array(nll)
    mean = float(nll.mean())
    ppl = math.exp(mean)
    # llama-perplexity's error: the standard error of the mean NLL, carried through exp()
    var = float(np.mean(nll ** 2) - mean ** 2)
    err = ppl * math.sqrt(var / (len(nll) - 1)) if len(nll) > 1 and var > 0 else 0.0
    return ppl, err, len(nll)


def main(args) -> int:
    from .run import check_threads_ctx, load

    check_threads_ctx(args.threads, args.ctx_size, min_ctx=4)
    if args.chunks is not None and args.chunks < 1:
        raise ValueError(f"--chunks must be >= 1, got {args.chunks}")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    tok, model = load(args)
    text = read_text(args.file)
    if args.max_tokens:
        # tokenize only a generous prefix of the text (a token is rarely more than 16 characters)
        text = text[: args.max_tokens * 16]
    t0 = time.perf_counter()
    # int32, not a list of Python ints (~40 bytes a token: 17 MB for jargon.txt's 424k tokens)
    tokens = np.asarray(tok.encode(text, add_special=True), np.int32)
    del text
    if args.max_tokens:
        tokens = tokens[: args.max_tokens]
    print(f"tokenized {len(tokens)} tokens in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    tok.release_encoder()  # the text is encoded once: the encoder's memory goes before scoring
    t0 = time.perf_counter()

    def progress(i, n, running):
        print(f"[{i}/{n}] ppl {running:.4f}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    bos = tok.bos_id if tok.add_bos else None
    ppl, err, n = perplexity(model, tokens, args.ctx_size, args.chunks, bos, progress)
    dt = time.perf_counter() - t0
    n_chunk = len(tokens) // args.ctx_size if args.chunks is None else min(args.chunks, len(tokens) // args.ctx_size)
    print(f"perplexity: {ppl:.4f} +/- {err:.4f}  ({n} tokens scored, ctx {args.ctx_size}, {n_chunk} chunks, "
          f"{dt:.1f} s, {n_chunk * args.ctx_size / dt:.1f} tokens/s)")
    return 0
