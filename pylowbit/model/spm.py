"""SentencePiece vocabularies without building `tokenizers`: the BPE merges equivalent to
SentencePiece's scoring (_spm_merges) and their disk cache (_MergesCache), and, for short texts at
start-up, an encoder (_SpmEncoder) over a cached index of the vocabulary (_VocabIndex) that gives
the ids `tokenizers` would."""

from __future__ import annotations

import heapq
import os
import zlib
from pathlib import Path

import numpy as np

from .. import _platform

# GGUF token types (tokenizer.ggml.token_type) and SentencePiece's space
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"

def _spm_merges(types, scores, vocab) -> tuple[np.ndarray, np.ndarray]:
    """BPE merges equivalent to SentencePiece's highest-score-first pair merging: every split (a, b)
    of a normal piece into two normal pieces, ranked by the merged piece's score (ties: lower id).
    Returned as (token id, cut) int32 arrays in rank order (merge k is tokens[ids[k]] split at
    cuts[k]): a 262k vocabulary has ~500k merges, too many to hold as Python string pairs."""
    from array import array

    # pieces whose first occurrence is a normal token (a set: much faster to probe than dict + type)
    normal = {t for t, i in vocab.items() if types[i] == TOKEN_NORMAL}
    ids, cuts = array("i"), array("i")
    for t in normal:
        for cut in range(1, len(t)):
            if t[:cut] in normal and t[cut:] in normal:
                ids.append(vocab[t])
                cuts.append(cut)
    del normal
    ids_np, cuts_np = np.frombuffer(ids, np.int32), np.frombuffer(cuts, np.int32)
    sc = np.asarray(scores, np.float64)[ids_np]
    order = np.lexsort((cuts_np, ids_np, -sc))  # last key is primary: score high to low
    return ids_np[order], cuts_np[order]


def _hash(t: str) -> int:
    """A token string's 64-bit key in _VocabIndex, stable across processes (unlike hash()): CRC-32
    and Adler-32 of its UTF-8 (zlib's: hashlib would load libcrypto, megabytes, for this)."""
    b = t.encode("utf-8", "surrogateescape")
    v = zlib.crc32(b) << 32 | zlib.adler32(b)
    return v - (1 << 64) if v >= 1 << 63 else v


class _VocabIndex:
    """String -> id (its first occurrence) for a vocabulary, without decoding the vocabulary: the
    sorted 64-bit hashes of its distinct strings with their ids, and the ids whose string repeats
    an earlier one.  Written on disk at the first build of a SentencePiece tokenizer with cache=True
    (one int64 .npy: count, hashes, ids, repeated ids), named by the file's identity as
    _MergesCache's; read back at the next start, it lets _SpmEncoder encode short texts without
    building the `tokenizers` object (seconds for a 262k vocabulary).  A hash match is confirmed by
    comparing the token's string, so a collision costs a comparison, never a wrong id."""

    VERSION = 2

    def __init__(self, tokens, hashes: np.ndarray, ids: np.ndarray, unreachable: np.ndarray):
        self.tokens, self.hashes, self.ids, self.unreachable = tokens, hashes, ids, unreachable
        self._memo: dict[str, int | None] = {}

    @classmethod
    def path_for(cls, path) -> Path:
        st = os.stat(path)
        name = f"vocab-v{cls.VERSION}-{st.st_dev:x}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}.npy"
        return _platform.cache_dir() / "vocab-index" / name

    @classmethod
    def save(cls, path, vocab: dict, unreachable: np.ndarray) -> None:
        keys = np.fromiter((_hash(t) for t in vocab), np.int64, len(vocab))
        ids = np.fromiter(vocab.values(), np.int64, len(vocab))
        order = np.argsort(keys, kind="stable")
        both = np.concatenate([[len(keys)], keys[order], ids[order], unreachable]).astype(np.int64)
        try:
            target = cls.path_for(path)
            tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                np.save(out, both, allow_pickle=False)
            os.replace(tmp, target)
        except OSError:
            pass  # best effort, as _MergesCache

    @classmethod
    def load(cls, path, tokens) -> _VocabIndex | None:
        try:
            a = np.load(cls.path_for(path), allow_pickle=False)
        except Exception:  # noqa: BLE001 - missing, partial or foreign: build instead
            return None
        if a.dtype != np.int64 or a.ndim != 1 or not len(a) or not 0 < a[0] <= (len(a) - 1) // 2:
            return None
        n = int(a[0])
        ids, unreachable = a[1 + n:1 + 2 * n], a[1 + 2 * n:]
        if (len(ids) and (ids.min() < 0 or ids.max() >= len(tokens))) or \
                (len(unreachable) and (unreachable.min() < 0 or unreachable.max() >= len(tokens))):
            return None
        return cls(tokens, a[1:1 + n], ids, unreachable)

    def get(self, t: str) -> int | None:
        """The id of string t (its first occurrence), None if t is not in the vocabulary."""
        if t in self._memo:
            return self._memo[t]
        h, found = _hash(t), None
        k = int(np.searchsorted(self.hashes, h))
        while k < len(self.hashes) and self.hashes[k] == h:
            i = int(self.ids[k])
            if self.tokens[i] == t:
                found = i
                break
            k += 1
        self._memo[t] = found
        return found


class _SpmEncoder:
    """What the `tokenizers` object of a SentencePiece vocabulary computes, for short texts, over a
    _VocabIndex: control / user-defined tokens matched first (leftmost, longest), each piece between
    them normalized (U+2581 for spaces, the space prefix) and split into characters (a character
    not in the vocabulary as its <0xNN> byte tokens), then BPE: the adjacent pair ranked first by
    _spm_merges's order (merged piece's score high to low, then its id, then the cut) merged until
    none is left, leftmost among equals."""

    MAX_CHARS = 4096  # longer texts go to `tokenizers` (this merges in Python)

    def __init__(self, index: _VocabIndex, types: np.ndarray, scores: np.ndarray, add_space_prefix: bool):
        self.index, self.types, self.scores, self.add_space_prefix = index, types, scores, add_space_prefix
        added: dict[str, list[tuple[str, int]]] = {}
        repeated = set(index.unreachable.tolist())  # a repeated string keeps its first id
        for i in np.flatnonzero((types == TOKEN_CONTROL) | (types == TOKEN_USER)).tolist():
            t = index.tokens[i]
            if t and i not in repeated:
                added.setdefault(t[0], []).append((t, i))
        for cands in added.values():
            cands.sort(key=lambda c: -len(c[0]))  # longest first
        self.added = added

    def encode(self, text: str) -> list[int] | None:
        """The ids of text, or None when this encoder does not apply (too long, a character that
        has neither a token nor byte tokens)."""
        if len(text) > self.MAX_CHARS:
            return None
        out, start, pos, added = [], 0, 0, self.added
        while pos < len(text):
            hit = None
            for t, i in added.get(text[pos], ()):
                if text.startswith(t, pos):
                    hit = (t, i)
                    break
            if hit is None:
                pos += 1
                continue
            if pos > start and not self._bpe(text[start:pos], out):
                return None
            out.append(hit[1])
            pos = start = pos + len(hit[0])
        if len(text) > start and not self._bpe(text[start:], out):
            return None
        return out

    def _rank(self, a: str, b: str):
        """The merge (a, b)'s sort key and the merged id, None if (a, b) is no merge."""
        get, types = self.index.get, self.types
        ia, ib = get(a), get(b)
        if ia is None or ib is None or types[ia] != TOKEN_NORMAL or types[ib] != TOKEN_NORMAL:
            return None
        m = get(a + b)
        if m is None or types[m] != TOKEN_NORMAL:
            return None
        return (-float(self.scores[m]), m, len(a)), m

    def _bpe(self, piece: str, out: list[int]) -> bool:
        if self.add_space_prefix:
            piece = SPACE + piece
        piece = piece.replace(" ", SPACE)
        get = self.index.get
        syms: list[tuple[str, int]] = []  # (string, id); a byte token's string never merges
        for c in piece:
            i = get(c)
            if i is not None:
                syms.append((c, i))
                continue
            for b in c.encode("utf-8", "surrogateescape"):
                bt = f"<0x{b:02X}>"
                j = get(bt)
                if j is None:
                    return False
                syms.append((bt, j))
        # merge the best-ranked adjacent pair until none is left: heap of (key, position, left, right)
        # entries, stale ones skipped; `right`/`left` link the live symbols, `gen` marks changes
        n = len(syms)
        strs, ids = [s for s, _ in syms], [i for _, i in syms]
        nxt, prv, alive = list(range(1, n + 1)), list(range(-1, n - 1)), [True] * n
        heap = []

        def push(p):
            q = nxt[p]
            if q < n:
                r = self._rank(strs[p], strs[q])
                if r is not None:
                    heapq.heappush(heap, (r[0], p, strs[p], strs[q], r[1]))

        for p in range(n - 1):
            push(p)
        while heap:
            _, p, a, b, m = heapq.heappop(heap)
            q = nxt[p] if alive[p] else n
            if q >= n or strs[p] != a or strs[q] != b:
                continue  # stale: one side merged since
            strs[p], ids[p] = a + b, m
            alive[q] = False
            nxt[p] = nxt[q]
            if nxt[q] < n:
                prv[nxt[q]] = p
            if prv[p] >= 0:
                push(prv[p])
            push(p)
        out.extend(ids[p] for p in range(n) if alive[p])
        return True


class _MergesCache:
    """The SentencePiece merges _spm_merges derives from one GGUF file, on disk: one .npy of the
    (token id, cut) arrays stacked, named by the file's identity (device, inode, size, mtime) and this
    derivation's version, so a changed or another file gets another name.  Only the derived arrays
    are kept: `tokenizers` is still built from them, as without the cache, because reading its own
    saved JSON back takes as long and peaks far higher (docs/PERFORMANCE.md).  Best effort: an
    unwritable directory or an unreadable entry means deriving as without it; an entry is written
    to a temporary name and renamed, so a reader sees a whole file or none."""

    VERSION = 1  # bump when _spm_merges's output changes for the same vocabulary

    def __init__(self, path: str | os.PathLike):
        st = os.stat(path)
        name = f"spm-merges-v{self.VERSION}-{st.st_dev:x}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}.npy"
        self.path = _platform.cache_dir() / "tokenizers" / name

    def load(self) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            both = np.load(self.path, allow_pickle=False)
        except Exception:  # noqa: BLE001 - missing, partial or foreign: derive instead
            return None
        if both.dtype != np.int32 or both.ndim != 2 or both.shape[0] != 2:
            return None
        return both[0], both[1]

    def save(self, ids: np.ndarray, cuts: np.ndarray) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                np.save(out, np.stack([ids, cuts]).astype(np.int32), allow_pickle=False)
            os.replace(tmp, self.path)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass
