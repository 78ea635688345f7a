"""A model's perplexity, and its KL divergence against a base, the way llama.cpp's llama-perplexity
computes them (so the numbers compare with llama.cpp's own).

    from pylowbit import eval
    r = eval.perplexity("model.gguf", "wiki.test.raw", ctx=512, chunks=20)
    print(r.ppl, r.ppl_err)
    k = eval.kl_divergence("model-q2.gguf", base_model="model-f16.gguf", text="wiki.test.raw")
    print(k.stats.format())

`pylowbit perplexity` is these functions' command line.  The pieces: scoring (the chunks),
kld_stats (the statistics), base_file (llama-perplexity's base file), text (tokenizing in a
child process), llama_cpp (llama.cpp's logits through llama-cpp-python).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from .kld_stats import KLDStats

__all__ = ["perplexity", "kl_divergence", "PerplexityResult", "KLDResult", "KLDStats"]

_FROM_MODEL = "model"  # bos_id default: the model's tokenizer's BOS, if it adds one


@dataclass
class PerplexityResult:
    """What perplexity() measured."""
    ppl: float  # exp of the mean negative log-likelihood of the scored tokens
    ppl_err: float  # its standard error (llama-perplexity's: of the mean NLL, carried through exp)
    n_scored: int  # tokens scored: n_chunks * (ctx - 1 - ctx // 2)
    n_chunks: int
    ctx: int
    n_text_tokens: int  # tokens of the whole text (or of the ids given), before chunks cut them
    seconds: float  # the scoring's wall time (tokenizing and loading left out)
    base_file: str | None = None  # the KL-divergence base written, if one was asked for
    base_file_bytes: int = 0

    @property
    def tokens_per_s(self) -> float:
        """Tokens run through the model per second of scoring (every token of every chunk)."""
        return self.n_chunks * self.ctx / self.seconds if self.seconds > 0 else math.inf


@dataclass
class KLDResult:
    """What kl_divergence() measured: `stats` the model against its base; with vs="llama.cpp",
    `floor` llama.cpp with an f16 KV cache against its own f32 one (the peer's noise floor)."""
    stats: KLDStats
    n_chunks: int
    ctx: int
    base: str  # what the model was scored against: a base file, a base model, or llama.cpp
    floor: KLDStats | None = None
    seconds: float = 0.0


def perplexity(model, text: str | os.PathLike | None = None, *, tokens: Sequence[int] | None = None,
               bos_id: int | None | str = _FROM_MODEL, ctx: int = 512, chunks: int | None = None,
               max_tokens: int | None = None, threads: int | None = None, foreign: str = "q8_0",
               kl_divergence_base: str | os.PathLike | None = None,
               progress: Callable[[int, int, float], None] | None = None,
               notice: Callable[[str], None] | None = None) -> PerplexityResult:
    """Perplexity of `model` on a text, llama-perplexity's way: the text's ids cut into chunks of
    `ctx` tokens, each from an empty cache with BOS replacing its first token, the second half of
    each chunk scored.

    model: a GGUF path (loaded with ctx, threads, foreign) or a loaded pylowbit.model.Model.
    text: a text file (.gz is decompressed), tokenized in a child process; or tokens: the ids.
    bos_id: the id that starts each chunk (None: none); "model" (default): the model's
        tokenizer's BOS, if it adds one.
    ctx: chunk length; chunks: score at most this many; max_tokens: use only the first N tokens.
    threads: kernel threads; foreign: type kept for tensors without a pylowbit kernel (q8_0,
        f16, f32).
    kl_divergence_base: also write the scored tokens' log-probabilities to this file
        (llama-perplexity's --kl-divergence-base format) for kl_divergence(base_file=...).
    progress(i, n, running_ppl) after each chunk; notice(message) for what is done on the way.

    Returns a PerplexityResult (ppl, ppl_err, n_scored, n_chunks, ...).

        >>> r = perplexity("model.gguf", "wiki.test.raw", ctx=512, chunks=4)
        >>> print(f"{r.ppl:.4f} +/- {r.ppl_err:.4f} over {r.n_scored} tokens")
    """
    from .scoring import n_chunks, perplexity_of_tokens

    _check_counts(chunks, max_tokens)
    m = _model(model, ctx, threads, foreign, notice)
    tokens, bos, n_text = _tokens(model, m, text, tokens, bos_id, ctx, chunks, max_tokens, notice)
    n_chunk = n_chunks(len(tokens), ctx, chunks)
    writer = None
    if kl_divergence_base is not None:
        from .base_file import BaseWriter

        writer = BaseWriter(kl_divergence_base, ctx, m.vocab_size, tokens[: n_chunk * ctx], notice=notice)
    t0 = time.perf_counter()
    try:
        ppl, err, n = perplexity_of_tokens(m, tokens, ctx, chunks, bos, progress, base_writer=writer)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        writer.close()
    return PerplexityResult(ppl, err, n, n_chunk, ctx, n_text, time.perf_counter() - t0,
                            None if writer is None else writer.path, 0 if writer is None else writer.size)


def kl_divergence(model, *, base_file: str | os.PathLike | None = None, base_model=None,
                  vs: str | None = None, text: str | os.PathLike | None = None,
                  tokens: Sequence[int] | None = None, bos_id: int | None | str = _FROM_MODEL, ctx: int = 512,
                  chunks: int | None = None, max_tokens: int | None = None, threads: int | None = None,
                  foreign: str = "q8_0", progress: Callable | None = None,
                  notice: Callable[[str], None] | None = None) -> KLDResult:
    """KL divergence of `model`'s next-token distributions against a base, with llama-perplexity's
    statistics (mean / percentile KLD, same top token, Δp, perplexity ratio).

    model: a GGUF path or a loaded pylowbit.model.Model.  The base, exactly one of:
      base_file: a base written by perplexity(kl_divergence_base=...) or by llama-perplexity
          --kl-divergence-base; scored on its own token ids and chunk length (text, tokens and
          ctx are not used);
      base_model: another model (a GGUF path or a Model) on the same text;
      vs="llama.cpp": llama.cpp (llama-cpp-python) on the same file and text with an f32 KV cache;
          the result's `floor` is llama.cpp's own f16-KV cache against it.
    text / tokens, bos_id, ctx, chunks, max_tokens, threads, foreign: as for perplexity().
    progress(i, n, ours, floor) after each chunk (KLDAccumulators; floor None but with vs);
    notice(message) for what is done on the way.

    Returns a KLDResult; its .stats.format() is llama-perplexity's printout.

        >>> k = kl_divergence("model-q2_0.gguf", base_model="model-q8_0.gguf", text="wiki.test.raw", chunks=4)
        >>> print(k.stats.kld, k.stats.same_top)
    """
    from .scoring import kl_divergence_of_models, kl_divergence_vs_base, kl_divergence_vs_llama_cpp, n_chunks

    if sum(x is not None for x in (base_file, base_model, vs)) != 1:
        raise ValueError("give exactly one base: base_file, base_model or vs='llama.cpp'")
    if vs not in (None, "llama.cpp"):
        raise ValueError(f"vs: only 'llama.cpp' is known, got {vs!r}")
    _check_counts(chunks, max_tokens)
    report = progress or (lambda *a: None)
    if base_file is not None:
        from .base_file import BaseFile

        with BaseFile(base_file) as base:
            m = _model(model, base.n_ctx, threads, foreign, notice)
            bos = _bos(m) if _from_model(bos_id) else bos_id
            n_chunk = min(base.n_chunk, chunks or base.n_chunk)
            if notice is not None:
                notice(f"KL divergence against {os.fspath(base_file)}: {n_chunk} of {base.n_chunk} chunks of "
                       f"{base.n_ctx} tokens, vocabulary {base.n_vocab}")
            t0 = time.perf_counter()
            stats = kl_divergence_vs_base(m, base, n_chunk, bos, lambda i, n, acc: report(i, n, acc, None))
            return KLDResult(stats, n_chunk, base.n_ctx, os.fspath(base_file), seconds=time.perf_counter() - t0)
    m = _model(model, ctx, threads, foreign, notice)
    tokens, bos, _ = _tokens(model, m, text, tokens, bos_id, ctx, chunks, max_tokens, notice)
    n_chunk = n_chunks(len(tokens), ctx, chunks)
    t0 = time.perf_counter()
    if vs is not None:
        path = m.file.path if model is m else model
        ours, floor = kl_divergence_vs_llama_cpp(m, path, tokens, ctx, n_chunk, bos, threads, report)
        return KLDResult(ours, n_chunk, ctx, "llama.cpp (f32 KV cache)", floor, time.perf_counter() - t0)
    b = _model(base_model, ctx, threads, foreign, notice)
    stats = kl_divergence_of_models(b, m, tokens, ctx, n_chunk, bos, lambda i, n, acc: report(i, n, acc, None))
    return KLDResult(stats, n_chunk, ctx, os.fspath(b.file.path), seconds=time.perf_counter() - t0)


def _from_model(bos_id) -> bool:
    if isinstance(bos_id, str):
        if bos_id != _FROM_MODEL:
            raise ValueError(f"bos_id: a token id, None or {_FROM_MODEL!r}, got {bos_id!r}")
        return True
    return False


def _check_counts(chunks, max_tokens) -> None:
    if chunks is not None and chunks < 1:
        raise ValueError(f"--chunks must be >= 1, got {chunks}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"--max-tokens must be >= 1, got {max_tokens}")


def _model(model, ctx, threads, foreign, notice):
    """A loaded Model: `model` itself, or the GGUF file it names."""
    from ..model import Model

    if isinstance(model, Model):
        if model.ctx < ctx:
            raise ValueError(f"the model's context is {model.ctx}, the chunks need {ctx}")
        return model
    return Model(model, ctx=ctx, threads=threads, foreign=foreign, notice=notice)


def _bos(m) -> int | None:
    from ..model import TextTokenizer

    tok = TextTokenizer(m.file)
    return tok.bos_id if tok.add_bos else None


def _tokens(model, m, text, tokens, bos_id, ctx, chunks, max_tokens, notice):
    """(the ids to score, BOS id or None, token count of the whole text)."""
    import numpy as np

    from .text import tokenize_in_child

    if (text is None) == (tokens is None):
        raise ValueError("give the text to score: a text file (text) or token ids (tokens)")
    if text is not None:
        if not os.path.isfile(text):
            raise FileNotFoundError(f"text file not found: {os.fspath(text)}")
        t0 = time.perf_counter()
        path = m.file.path if model is m else model
        # max_tokens: only a generous prefix of the text is tokenized (a token is rarely over 16 characters)
        tokens, bos = tokenize_in_child(path, text, max_tokens and max_tokens * 16)
        if notice is not None:
            notice(f"tokenized {len(tokens)} tokens in {time.perf_counter() - t0:.1f} s")
    else:
        tokens = np.asarray(tokens, dtype=np.int32).reshape(-1)
        bos = None
    if _from_model(bos_id):
        bos_id = bos if text is not None else _bos(m)
    n_text = len(tokens)
    if max_tokens:
        tokens = tokens[:max_tokens]
    if chunks:  # only the scored chunks stay (Jargon File: 1.7 MB of ids for 2 chunks' 4 kB)
        tokens = tokens[: chunks * ctx].copy()
    return tokens, bos_id, n_text
