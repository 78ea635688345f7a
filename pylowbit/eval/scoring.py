"""Scoring a model chunk by chunk, the way llama.cpp's llama-perplexity does: the text's token ids
cut into non-overlapping chunks of ctx tokens, each chunk from an empty cache with BOS replacing its
first token, only its second half scored (every token there has at least ctx/2 tokens of context).
The perplexity of a model, and the per-token values of its KL divergence against a base."""
from __future__ import annotations

import math

import numpy as np

from .kld_stats import KLDAccumulator
from .llama_cpp import LlamaCppChunks

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


def perplexity_of_tokens(model, tokens, ctx: int, chunks: int | None = None, bos_id: int | None = None,
               progress=None, head_rows: int = 4, batch: int = 128, base_writer=None):
    """Returns (ppl, stderr of ppl, scored token count).  progress(i, n, running_ppl) per chunk.
    base_writer (base_file.BaseWriter): the scored rows' log-probabilities are written to it as well."""
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
    """KLDStats of `model` against a base file (base_file.BaseFile) on the base's own token ids.
    progress(i, n, accumulator) per chunk."""
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


def kl_divergence_vs_llama_cpp(model, path, tokens, ctx: int, chunks: int | None = None,
                               bos_id: int | None = None, threads: int | None = None, progress=None):
    """(pylowbit against llama.cpp with an f32 KV cache, llama.cpp with its f16 KV cache against its
    f32 one): two KLDStats on the same token ids, the second the peer's own noise floor.  The base
    is kept in memory uncompressed (a runtime against itself would score exactly 0)."""
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
