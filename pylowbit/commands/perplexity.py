"""`pylowbit perplexity`: perplexity the way llama.cpp's llama-perplexity computes it.

The text is tokenized once (with BOS), cut into non-overlapping chunks of ctx tokens; each chunk
starts with BOS (replacing its first token) and runs from an empty cache; only the second half of
each chunk is scored (every token there has at least ctx/2 tokens of context).
"""

from __future__ import annotations

import gzip
import math
import os
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


def log_softmax_at(logits: np.ndarray, targets: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """log p(target) per row, a row at a time.  overwrite=False: through one float64 row buffer (a row
    of a 262k vocabulary is 2 MB as float64: a 32-row block converted at once was 64 MB);
    overwrite=True: in place in `logits` (scratch), in its own float type with float64 sums."""
    out = np.empty(len(targets))
    z = None if overwrite else np.empty(logits.shape[1])
    for i, (row, t) in enumerate(zip(logits, targets)):
        if z is not None:
            z[:] = row
            row = z
        m, picked = float(row.max()), float(row[t])
        row -= row.dtype.type(m)
        np.exp(row, out=row)
        out[i] = picked - (m + math.log(row.sum(dtype=np.float64)))
    return out


def perplexity(model, tokens, ctx: int, chunks: int | None = None, bos_id: int | None = None,
               progress=None, head_rows: int = 4, batch: int = 128):
    """Returns (ppl, stderr of ppl, scored token count).  progress(i, n, running_ppl) per chunk."""
    n_chunk = len(tokens) // ctx
    if chunks is not None:
        n_chunk = min(n_chunk, chunks)
    if n_chunk < 1:
        raise ValueError(f"need at least {ctx} tokens for one chunk of -c {ctx}, the text has {len(tokens)}")
    first = ctx // 2
    nll = []
    logits_buf = np.empty((head_rows, model.vocab_size), np.float32)  # one for every slice
    h = np.empty((ctx - first, model.cfg.d_model), np.float32)  # the scored half's hidden states
    for i in range(n_chunk):
        chunk = np.array(tokens[i * ctx:(i + 1) * ctx], dtype=np.int64)
        if bos_id is not None:
            chunk[0] = bos_id
        model.reset()
        # forward in batches of at most `batch` tokens: the activations' peak (~4 MB at 256 tokens,
        # Gemma) stacks on the resident weights, and each row's results do not depend on the batch;
        # the unscored first half only fills the KV cache
        for s0 in range(0, first, batch):
            model.forward(chunk[s0:min(s0 + batch, first)], pos=s0, logits="none")
        for s0 in range(first, ctx, batch):
            s1 = min(s0 + batch, ctx)
            h[s0 - first:s1 - first] = model.forward(chunk[s0:s1], pos=s0, logits="hidden")
        # the LM head in slices of head_rows (4 x 262k logits: 4 MB; 4 rows cost ~1.05x the head's
        # time per token of 8-row slices, 2 rows ~2.4x: the weights are then streamed per 2 tokens)
        for r in range(first, ctx - 1, head_rows):
            r1 = min(r + head_rows, ctx - 1)
            logits = model.head(h[r - first:r1 - first], logits_buf[:r1 - r])
            lp = log_softmax_at(logits, chunk[r + 1:r1 + 1], overwrite=True)
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


def tokenize_in_child(model_path: str, text_path: str, max_chars: int | None = None):
    """(int32 token ids of the text file, BOS id if the tokenizer adds one) from a child interpreter.

    Encoding a whole text is one BPE run over it in `tokenizers` (Gemma, 1.6 MB of text: ~150 MB of
    heap at the peak), and glibc cannot hand most of it back afterwards (it stays fragmented: ~50 MB
    even with the tokenizer dropped), where the model's weights then stack on top of it.  A child
    process's heap goes with the child, so the scoring process holds the weights, the KV cache and
    Python only; the child peaks before the weights are read (both stay within the issue's budget)."""
    import json
    import subprocess

    import pylowbit

    root = os.path.dirname(os.path.dirname(os.path.abspath(pylowbit.__file__)))
    code = (f"import sys; sys.path.insert(0, {root!r})\n"  # this pylowbit, not one on the child's path
            "from pylowbit.commands.perplexity import _tokenize_child; sys.exit(_tokenize_child(*sys.argv[1:]))")
    argv = [sys.executable, "-c", code, os.fspath(model_path), os.fspath(text_path), str(max_chars or 0)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head, sep, data = r.stdout.partition(b"\n")
    if r.returncode != 0 or not sep:
        lines = r.stderr.decode("utf-8", "replace").strip().splitlines()
        msg = lines[-1] if lines else f"the tokenizer process exited with status {r.returncode}"
        raise (OSError if msg.startswith("OSError: ") else ValueError)(msg.split(": ", 1)[-1])
    info = json.loads(head)
    tokens = np.frombuffer(data, np.int32).copy()
    if len(tokens) != info["n"]:
        raise RuntimeError(f"the tokenizer process sent {len(tokens)} of {info['n']} tokens")
    return tokens, info["bos"]


def _tokenize_child(model_path: str, text_path: str, max_chars: str) -> int:
    """tokenize_in_child's other end: a JSON line, then the ids as raw int32 on stdout; an error is
    one 'Type: message' line on stderr and status 1."""
    import json

    from ..gguf import GGUFFile
    from ..model import TextTokenizer

    try:
        with GGUFFile(model_path) as f:
            tok = TextTokenizer(f)
            text = read_text(text_path)
            if int(max_chars):
                text = text[: int(max_chars)]
            ids = np.asarray(tok.encode(text, add_special=True), np.int32)
            bos = tok.bos_id if tok.add_bos else None
    except (ValueError, OSError) as e:  # ModelError and GGUFError are ValueErrors
        print(f"{'OSError' if isinstance(e, OSError) else 'ValueError'}: {e}", file=sys.stderr)
        return 1
    out = sys.stdout.buffer
    out.write(json.dumps({"n": len(ids), "bos": bos}).encode() + b"\n")
    out.write(ids.tobytes())
    out.flush()
    return 0


def main(args) -> int:
    from ..model import Model
    from .run import check_threads_ctx

    check_threads_ctx(args.threads, args.ctx_size, min_ctx=4)
    if args.chunks is not None and args.chunks < 1:
        raise ValueError(f"--chunks must be >= 1, got {args.chunks}")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    # the model first: a file it cannot run is refused before any tokenizing (mapping reads no weights)
    model = Model(args.model, ctx=args.ctx_size, threads=args.threads, foreign=args.foreign)
    if not os.path.isfile(args.file):
        raise FileNotFoundError(f"text file not found: {args.file}")
    t0 = time.perf_counter()
    # --max-tokens: only a generous prefix of the text is tokenized (a token is rarely over 16 characters)
    tokens, bos = tokenize_in_child(args.model, args.file, args.max_tokens and args.max_tokens * 16)
    n_text = len(tokens)
    if args.max_tokens:
        tokens = tokens[: args.max_tokens]
    if args.chunks:  # only the scored chunks stay (Jargon File: 1.7 MB of ids for 2 chunks' 4 kB)
        tokens = tokens[: args.chunks * args.ctx_size].copy()
    print(f"tokenized {n_text} tokens in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    t0 = time.perf_counter()

    def progress(i, n, running):
        print(f"[{i}/{n}] ppl {running:.4f}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    ppl, err, n = perplexity(model, tokens, args.ctx_size, args.chunks, bos, progress)
    dt = time.perf_counter() - t0
    n_chunk = len(tokens) // args.ctx_size if args.chunks is None else min(args.chunks, len(tokens) // args.ctx_size)
    print(f"perplexity: {ppl:.4f} +/- {err:.4f}  ({n} tokens scored, ctx {args.ctx_size}, {n_chunk} chunks, "
          f"{dt:.1f} s, {n_chunk * args.ctx_size / dt:.1f} tokens/s)")
    return 0
