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

import gzip
import logging
import math
import os
import sys
import time

import numpy as np

from pylowbit._platform import usable_cpus


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


def chunk_logits(model, chunk, bos_id: int | None = None, head_rows: int = 4, batch: int = 128):
    """Score one chunk: yields (r0, logits, targets) per slice of its scored rows, r0 counted from the
    first scored row (position len(chunk)//2), logits (rows, vocab) predicting targets.  `logits` is
    one buffer reused for every slice: use it before taking the next."""
    ctx = len(chunk)
    chunk = np.array(chunk, dtype=np.int64)
    targets = chunk.copy()  # the text's ids: BOS replaces the first one as input only
    if bos_id is not None:
        chunk[0] = bos_id
    first = ctx // 2
    logits_buf = np.empty((head_rows, model.vocab_size), np.float32)  # one for every slice
    h = np.empty((ctx - first, model.cfg.d_model), np.float32)  # the scored half's hidden states
    model.reset()
    # forward in batches of at most `batch` tokens: the activations' peak (~4 MB at 256 tokens,
    # Gemma) stacks on the resident weights, and each row's results do not depend on the batch;
    # the unscored first half only fills the KV cache
    for s0 in range(0, first, batch):
        model.forward(chunk[s0:min(s0 + batch, first)], pos=s0, logits="none")
    for s0 in range(first, ctx, batch):
        s1 = min(s0 + batch, ctx)
        h[s0 - first:s1 - first] = model.forward(chunk[s0:s1], pos=s0, logits="hidden")
    # the LM head in slices of head_rows: a few rows of logits at a time, each slice streaming the
    # head's weights once (docs/PERFORMANCE.md#perplexity-head-rows)
    for r in range(first, ctx - 1, head_rows):
        r1 = min(r + head_rows, ctx - 1)
        yield r - first, model.head(h[r - first:r1 - first], logits_buf[:r1 - r]), targets[r + 1:r1 + 1]


def n_chunks(n_tokens: int, ctx: int, chunks: int | None) -> int:
    n_chunk = n_tokens // ctx
    if chunks is not None:
        n_chunk = min(n_chunk, chunks)
    if n_chunk < 1:
        raise ValueError(f"need at least {ctx} tokens for one chunk of -c {ctx}, the text has {n_tokens}")
    return n_chunk


def perplexity(model, tokens, ctx: int, chunks: int | None = None, bos_id: int | None = None,
               progress=None, head_rows: int = 4, batch: int = 128, base_writer=None):
    """Returns (ppl, stderr of ppl, scored token count).  progress(i, n, running_ppl) per chunk.
    base_writer (kld.BaseWriter): the scored rows' log-probabilities are written to it as well."""
    n_chunk = n_chunks(len(tokens), ctx, chunks)
    nll = []
    for i in range(n_chunk):
        for _, logits, targets in chunk_logits(model, tokens[i * ctx:(i + 1) * ctx], bos_id, head_rows, batch):
            if base_writer is not None:
                base_writer.add(logits)
            nll.extend((-log_softmax_at(logits, targets, overwrite=True)).tolist())
        if progress is not None:
            progress(i + 1, n_chunk, math.exp(float(np.mean(nll))))
    nll = np.array(nll)
    mean = float(nll.mean())
    ppl = math.exp(mean)
    # llama-perplexity's error: the standard error of the mean NLL, carried through exp()
    var = float(np.mean(nll ** 2) - mean ** 2)
    err = ppl * math.sqrt(var / (len(nll) - 1)) if len(nll) > 1 and var > 0 else 0.0
    return ppl, err, len(nll)


def kl_divergence_vs_base(model, base, chunks: int | None = None, bos_id: int | None = None, progress=None):
    """KLDStats of `model` against a base file (kld.BaseFile) on the base's own token ids.
    progress(i, n, accumulator) per chunk."""
    from ..kld import KLDAccumulator

    if base.n_vocab != model.vocab_size:
        raise ValueError(f"the base file's vocabulary has {base.n_vocab} tokens, the model's {model.vocab_size}")
    if model.ctx < base.n_ctx:
        raise ValueError(f"the base file's chunks are {base.n_ctx} tokens, the model's context {model.ctx}")
    n_chunk = min(base.n_chunk, chunks or base.n_chunk)
    acc = KLDAccumulator(base.n_vocab)
    for i in range(n_chunk):
        rows = base.rows(i)
        for r0, logits, targets in chunk_logits(model, base.tokens[i], bos_id):
            acc.add(logits, targets, base_codes=rows[r0:r0 + len(targets)])
        if progress is not None:
            progress(i + 1, n_chunk, acc)
    return acc.stats()


def kl_divergence_of_models(base_model, model, tokens, ctx: int, chunks: int | None = None,
                            bos_id: int | None = None, progress=None):
    """KLDStats of `model` against `base_model` (both pylowbit Models) on chunks of `tokens`, the
    base kept in memory uncompressed (a model against itself scores exactly 0)."""
    from ..kld import KLDAccumulator

    if base_model.vocab_size != model.vocab_size:
        raise ValueError(f"vocabularies differ: {base_model.vocab_size} and {model.vocab_size} tokens")
    n_chunk = n_chunks(len(tokens), ctx, chunks)
    acc = KLDAccumulator(model.vocab_size)
    for i in range(n_chunk):
        chunk = tokens[i * ctx:(i + 1) * ctx]
        # the same slices in lockstep, each model scoring into its own buffer
        for (r0, base, tgt), (_, logits, _) in zip(chunk_logits(base_model, chunk, bos_id),
                                                    chunk_logits(model, chunk, bos_id)):
            acc.add(logits, tgt, base_logits=base)
        if progress is not None:
            progress(i + 1, n_chunk, acc)
    return acc.stats()


class LlamaCppChunks:
    """llama.cpp's logits of a chunk's scored rows through llama-cpp-python's C API, decoded as
    llama-perplexity decodes a chunk: one batch from an empty cache, outputs for the second half only.
    Without flash attention (llama-cpp-python's default) and without repacked weight buffers
    (llama-perplexity -nr): the AMX buffers of a native build fault where the OS grants no AMX tiles."""

    KV_TYPES = {"f32": 0, "f16": 1}  # ggml type ids

    def __init__(self, path, ctx: int, kv: str = "f32", threads: int | None = None):
        try:
            import llama_cpp
        except ImportError:
            raise ValueError("--vs llama.cpp needs llama-cpp-python: pip install llama-cpp-python==0.3.36") from None
        self._lc = lc = llama_cpp
        self._batch = self._ctx = self._model = None
        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # its log callback's switch
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.use_extra_bufts = False
        self._model = lc.llama_model_load_from_file(os.fsencode(path), mp)
        if not self._model:
            raise ValueError(f"llama.cpp could not load {path}")
        t = threads or usable_cpus()
        cp = lc.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = ctx
        cp.n_seq_max = 1
        cp.n_threads = cp.n_threads_batch = t
        cp.type_k = cp.type_v = self.KV_TYPES[kv]
        cp.flash_attn_type = 0  # disabled
        self._ctx = lc.llama_init_from_model(self._model, cp)
        if not self._ctx:
            self.close()
            raise ValueError(f"llama.cpp could not make a context of {ctx} for {path}")
        self.ctx = ctx
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self._model))
        self._batch = lc.llama_batch_init(ctx, 0, 1)

    def scored_logits(self, chunk, bos_id: int | None = None) -> np.ndarray:
        """(len(chunk) - 1 - len(chunk)//2, vocab) float32: a view of llama.cpp's output buffer,
        valid until the next call."""
        lc, ctx = self._lc, self._ctx
        n = len(chunk)
        if not 2 <= n <= self.ctx:
            raise ValueError(f"chunk of {n} tokens for a context of {self.ctx}")
        first = n // 2
        b = self._batch
        for k in range(n):
            b.token[k] = int(bos_id if k == 0 and bos_id is not None else chunk[k])
            b.pos[k] = k
            b.n_seq_id[k] = 1
            b.seq_id[k][0] = 0
            b.logits[k] = k >= first
        b.n_tokens = n
        lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
        rc = lc.llama_decode(ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with status {rc}")
        ptr = lc.llama_get_logits(ctx)
        return np.ctypeslib.as_array(ptr, shape=(n - first, self.n_vocab))[: n - 1 - first]

    def close(self) -> None:
        lc = self._lc
        if self._batch is not None:
            lc.llama_batch_free(self._batch)
        if self._ctx:
            lc.llama_free(self._ctx)
        if self._model:
            lc.llama_model_free(self._model)
        self._batch = self._ctx = self._model = None


def kl_divergence_vs_llama_cpp(model, path, tokens, ctx: int, chunks: int | None = None,
                               bos_id: int | None = None, threads: int | None = None, progress=None):
    """(pylowbit against llama.cpp with an f32 KV cache, llama.cpp with its f16 KV cache against its
    f32 one): two KLDStats on the same token ids, the second the peer's own noise floor.  The base
    is kept in memory uncompressed (a runtime against itself would score exactly 0)."""
    from ..kld import KLDAccumulator

    n_chunk = n_chunks(len(tokens), ctx, chunks)
    peers = {kv: LlamaCppChunks(path, ctx, kv, threads) for kv in ("f32", "f16")}
    try:
        if peers["f32"].n_vocab != model.vocab_size:
            raise ValueError(f"llama.cpp reads a vocabulary of {peers['f32'].n_vocab}, pylowbit {model.vocab_size}")
        ours, floor = KLDAccumulator(model.vocab_size), KLDAccumulator(model.vocab_size)
        for i in range(n_chunk):
            chunk = np.asarray(tokens[i * ctx:(i + 1) * ctx])
            base = peers["f32"].scored_logits(chunk, bos_id)
            targets = chunk[ctx // 2 + 1:]
            floor.add(peers["f16"].scored_logits(chunk, bos_id), targets, base_logits=base)
            for r0, logits, tgt in chunk_logits(model, chunk, bos_id):
                ours.add(logits, tgt, base_logits=base[r0:r0 + len(tgt)])
            if progress is not None:
                progress(i + 1, n_chunk, ours, floor)
        return ours.stats(), floor.stats()
    finally:
        for p in peers.values():
            p.close()


def tokenize_in_child(model_path: str, text_path: str, max_chars: int | None = None):
    """(int32 token ids of the text file, BOS id if the tokenizer adds one) from a child interpreter.

    Encoding a whole text is one BPE run over it in `tokenizers`, whose heap glibc cannot hand back
    afterwards (it stays fragmented even with the tokenizer dropped), where the model's weights would
    then stack on top of it (docs/PERFORMANCE.md#decoder-memory).  A child process's heap goes with
    the child, so the scoring process holds the weights, the KV cache and Python only; the child
    peaks before the weights are read."""
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
    if args.kl_divergence:
        if not args.kl_divergence_base:
            raise ValueError("--kl-divergence needs --kl-divergence-base FILE (written by a base run)")
        if args.vs:
            raise ValueError("--vs llama.cpp runs its own base: not with --kl-divergence")
        return _main_kl_divergence(args)
    if args.vs and args.kl_divergence_base:
        raise ValueError("--vs llama.cpp keeps its base in memory: not with --kl-divergence-base")
    if args.file is None:
        raise ValueError("-f/--file is required (the text to score)")
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
    n_chunk = n_chunks(len(tokens), args.ctx_size, args.chunks)
    t0 = time.perf_counter()
    if args.vs:
        return _main_vs_llama_cpp(args, model, tokens, bos, n_chunk, t0)

    def progress(i, n, running):
        print(f"[{i}/{n}] ppl {running:.4f}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    writer = None
    if args.kl_divergence_base:
        from ..kld import BaseWriter

        writer = BaseWriter(args.kl_divergence_base, args.ctx_size, model.vocab_size,
                            tokens[: n_chunk * args.ctx_size], notice=lambda m: print(m, file=sys.stderr))
    try:
        ppl, err, n = perplexity(model, tokens, args.ctx_size, args.chunks, bos, progress, base_writer=writer)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        writer.close()
    dt = time.perf_counter() - t0
    print(f"perplexity: {ppl:.4f} +/- {err:.4f}  ({n} tokens scored, ctx {args.ctx_size}, {n_chunk} chunks, "
          f"{dt:.1f} s, {n_chunk * args.ctx_size / dt:.1f} tokens/s)")
    if writer is not None:
        print(f"KL-divergence base written: {args.kl_divergence_base} ({writer.size / 1e6:.1f} MB)")
    return 0


def _main_kl_divergence(args) -> int:
    from ..kld import BaseFile
    from ..model import Model, TextTokenizer

    if args.file is not None:
        print("note: -f is not used with --kl-divergence (the base file holds the token ids)", file=sys.stderr)
    with BaseFile(args.kl_divergence_base) as base:
        model = Model(args.model, ctx=base.n_ctx, threads=args.threads, foreign=args.foreign)
        tok = TextTokenizer(model.file)
        bos = tok.bos_id if tok.add_bos else None
        n_chunk = min(base.n_chunk, args.chunks or base.n_chunk)
        print(f"KL divergence against {args.kl_divergence_base}: {n_chunk} of {base.n_chunk} chunks of "
              f"{base.n_ctx} tokens, vocabulary {base.n_vocab}", file=sys.stderr)
        t0 = time.perf_counter()

        def progress(i, n, acc):
            print(f"[{i}/{n}] {acc.running()}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

        stats = kl_divergence_vs_base(model, base, n_chunk, bos, progress)
    print(stats.format())
    return 0


def _main_vs_llama_cpp(args, model, tokens, bos, n_chunk, t0) -> int:
    from ..kld import side_by_side

    def progress(i, n, ours, floor):
        print(f"[{i}/{n}] pylowbit: {ours.running()}\n      llama.cpp f16 KV: {floor.running()}  "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    ours, floor = kl_divergence_vs_llama_cpp(model, args.model, tokens, args.ctx_size, n_chunk, bos,
                                             args.threads, progress)
    print(f"KL divergence against llama.cpp (f32 KV cache) on the same {ours.n} scored tokens "
          f"({n_chunk} chunks of {args.ctx_size}):")
    print(side_by_side({"pylowbit": ours, "llama.cpp f16 KV (floor)": floor}))
    return 0
