"""The KL-divergence base file: a run's log-probabilities of every scored token, llama-perplexity's way.

The base file is llama-perplexity's own (`--kl-divergence-base`, tools/perplexity in llama.cpp),
so either program reads what the other wrote:

    "_logits_"                      8 bytes
    n_ctx                           int32 (chunk length)
    n_vocab, n_chunk                int32, int32
    tokens                          int32[n_chunk * n_ctx], the text's ids (before BOS replaces
                                    the first of each chunk)
    per chunk, per scored position  uint16[row_width(n_vocab)]: float32 scale, float32 min_log_prob,
                                    then n_vocab codes (padded to an even count)

The scored positions of a chunk are n_ctx/2 .. n_ctx-2, each predicting the next token.  A code c
stands for log p = scale * c + min_log_prob, where min_log_prob is the row's lowest log-probability
clamped to 16 below the top: codes span [top - 16, top] in 65535 steps, everything lower is code 0
and counts as absent (llama-perplexity skips base log-probs <= -16 in the sum).
"""
from __future__ import annotations

import math
import os
import shutil

import numpy as np

MAGIC = b"_logits_"
HEADER_BYTES = len(MAGIC) + 3 * 4
LOG_PROB_RANGE = 16  # log-probs kept below the top; the rest are code 0 / left out of the sum
_F = np.float32
_CODE_STEPS = _F(65535)  # uint16 codes 0..65535 span [top - LOG_PROB_RANGE, top]


def row_width(n_vocab: int) -> int:
    """uint16 per stored token: scale and min_log_prob (two float32), the codes, an even count."""
    return 2 * ((n_vocab + 1) // 2) + 4


def scored_per_chunk(n_ctx: int) -> int:
    """Positions n_ctx/2 .. n_ctx-2 of each chunk are scored (each has >= n_ctx/2 tokens of context)."""
    return n_ctx - 1 - n_ctx // 2


def base_file_size(n_ctx: int, n_vocab: int, n_chunk: int) -> int:
    return HEADER_BYTES + 4 * n_ctx * n_chunk + 2 * n_chunk * scored_per_chunk(n_ctx) * row_width(n_vocab)


def _check_logits(logits: np.ndarray, what: str) -> np.ndarray:
    x = np.asarray(logits)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"{what}: expected a (tokens, vocab) array, got shape {x.shape}")
    return np.ascontiguousarray(x, dtype=_F)


def _expf(x, out=None):
    """float32 exp rounded from float64: the correctly rounded value glibc's expf gives (numpy's
    own float32 exp is off by an ulp often enough to move a printed perplexity digit)."""
    if np.ndim(x) == 0:
        return _F(math.exp(float(x)))
    e = np.exp(x, dtype=np.float64)
    if out is None:
        return e.astype(_F)
    out[...] = e
    return out


def _top_and_lse(row: np.ndarray, scratch: np.ndarray):
    """(max, first index of the max, float32 log of the float64 sum of float32 exp(row - max))."""
    imax = int(row.argmax())
    mx = row[imax]
    if not np.isfinite(mx) or not np.isfinite(row.min()):
        raise ValueError("logits contain NaN or infinite values")
    np.subtract(row, mx, out=scratch)
    _expf(scratch, out=scratch)
    return mx, imax, _F(math.log(scratch.sum(dtype=np.float64)))


def compress_log_probs(logits: np.ndarray) -> np.ndarray:
    """Base rows (T, row_width(vocab)) uint16 of logits (T, vocab), as llama-perplexity stores them."""
    x = _check_logits(logits, "compress_log_probs")
    T, V = x.shape
    out = np.zeros((T, row_width(V)), np.uint16)
    scratch = np.empty(V, _F)
    for i, row in enumerate(x):
        mx, _, lse = _top_and_lse(row, scratch)
        mn = max(row.min(), _F(mx - _F(LOG_PROB_RANGE)))
        scale = _F(_F(mx - mn) / _CODE_STEPS)
        out[i, :4].view(_F)[:] = (scale, _F(_F(mn - mx) - lse))
        if scale:
            # round half to even, as llama-perplexity's float trick (x + 1.5 * 2^23) does
            np.subtract(row, mn, out=scratch)
            np.multiply(scratch, _F(1) / scale, out=scratch)
            np.rint(scratch, out=scratch)
            scratch[row <= mn] = 0
            out[i, 4:4 + V] = scratch
    return out


def decode_base_row(codes: np.ndarray, n_vocab: int, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 log-probabilities a stored row stands for (scale * code + min_log_prob)."""
    scale, min_lp = codes[:4].view(_F)
    out = np.empty(n_vocab, _F) if out is None else out
    np.multiply(codes[4:4 + n_vocab], scale, out=out, dtype=_F, casting="unsafe")
    out += min_lp
    return out


# ---- the base file ------------------------------------------------------------------------------

class BaseFileError(ValueError):
    pass


def check_free_disk(path, nbytes: int) -> None:
    d = os.path.dirname(os.path.abspath(os.fspath(path)))
    free = shutil.disk_usage(d).free
    if nbytes > free:
        raise OSError(f"the KL-divergence base file needs {nbytes / 1e9:.2f} GB, {d} has {free / 1e9:.2f} GB free")


class BaseWriter:
    """Streams a base file: the header and token ids first, then add(rows of logits) chunk by chunk.
    Written to PATH.part and renamed when every row is in (a base file is never left half done)."""

    def __init__(self, path, n_ctx: int, n_vocab: int, tokens, notice=print):
        tokens = np.ascontiguousarray(tokens, dtype=np.int32).reshape(-1)
        if n_ctx < 2 or len(tokens) < n_ctx or len(tokens) % n_ctx:
            raise ValueError(f"a base file holds whole chunks of n_ctx >= 2 tokens: {len(tokens)} tokens, "
                             f"n_ctx {n_ctx}")
        self.path, self.n_ctx, self.n_vocab = os.fspath(path), n_ctx, n_vocab
        self.n_chunk = len(tokens) // n_ctx
        self.size = base_file_size(n_ctx, n_vocab, self.n_chunk)
        if notice is not None:
            notice(f"writing the KL-divergence base {self.path}: {self.size / 1e6:.1f} MB "
                   f"({self.n_chunk} chunks x {scored_per_chunk(n_ctx)} tokens x {n_vocab} log-probs)")
        check_free_disk(self.path, self.size)
        self._tmp = self.path + ".part"
        self._fh = open(self._tmp, "wb")
        self._rows = 0
        self._fh.write(MAGIC)
        self._fh.write(np.array([n_ctx, n_vocab, self.n_chunk], np.int32).tobytes())
        self._fh.write(tokens.tobytes())

    @property
    def rows_expected(self) -> int:
        return self.n_chunk * scored_per_chunk(self.n_ctx)

    def add(self, logits) -> None:
        codes = compress_log_probs(logits)
        if codes.shape[1] != row_width(self.n_vocab):
            raise ValueError(f"logits have {np.shape(logits)[1]} columns, the base file's vocabulary is {self.n_vocab}")
        if self._rows + len(codes) > self.rows_expected:
            raise ValueError(f"more rows than the base file's {self.rows_expected}")
        self._fh.write(codes.tobytes())
        self._rows += len(codes)

    def close(self) -> None:
        if self._fh is None:
            return
        self._fh.close()
        self._fh = None
        if self._rows != self.rows_expected:
            os.unlink(self._tmp)
            raise ValueError(f"base file incomplete: {self._rows} of {self.rows_expected} rows; not written")
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            os.unlink(self._tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


class BaseFile:
    """A base file, memory-mapped: .tokens (n_chunk, n_ctx) int32, .rows(chunk) the stored rows."""

    def __init__(self, path):
        self.path = os.fspath(path)
        size = os.path.getsize(self.path)
        with open(self.path, "rb") as fh:
            head = fh.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES or head[:8] != MAGIC:
            raise BaseFileError(f"{self.path}: not a llama-perplexity log-probability file (no '_logits_' header)")
        n_ctx, n_vocab, n_chunk = (int(v) for v in np.frombuffer(head, np.int32, 3, 8))
        if n_ctx < 2 or n_vocab < 1 or n_chunk < 1:
            raise BaseFileError(f"{self.path}: bad header: n_ctx {n_ctx}, n_vocab {n_vocab}, n_chunk {n_chunk}")
        want = base_file_size(n_ctx, n_vocab, n_chunk)
        if size != want:
            raise BaseFileError(f"{self.path}: {size} bytes, but n_ctx {n_ctx}, n_vocab {n_vocab}, "
                                f"{n_chunk} chunks take {want}")
        self.n_ctx, self.n_vocab, self.n_chunk = n_ctx, n_vocab, n_chunk
        self._map = np.memmap(self.path, np.uint8, "r")
        tok_end = HEADER_BYTES + 4 * n_ctx * n_chunk
        self.tokens = self._map[HEADER_BYTES:tok_end].view(np.int32).reshape(n_chunk, n_ctx)
        self._rows = self._map[tok_end:].view(np.uint16).reshape(n_chunk, scored_per_chunk(n_ctx),
                                                                 row_width(n_vocab))

    def rows(self, chunk: int) -> np.ndarray:
        return self._rows[chunk]

    def close(self) -> None:
        self._map = self.tokens = self._rows = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
