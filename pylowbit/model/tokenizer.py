"""Tokenizers built from GGUF metadata with the `tokenizers` package.

- tokenizer.ggml.model == "gpt2": byte-level BPE (llama3, qwen, BitNet) with the pre-split regex
  named by tokenizer.ggml.pre.
- tokenizer.ggml.model == "llama": SentencePiece-style (gemma3).  SentencePiece merges the adjacent
  pair whose concatenation is the highest-scoring vocabulary piece; that is BPE whose merge ranks
  are the merged pieces ordered by score, so the merges are derived from the vocabulary once (and,
  with cache=True, kept on disk for the next start: spm.py).  With cache=True a later start
  does not build `tokenizers` at all while texts are short: _SpmEncoder encodes them from a cached
  index of the vocabulary (_VocabIndex), the same ids; a long text builds it then.
  Spaces become U+2581, unknown characters fall back to <0xXX> byte tokens.
Control tokens (type 3) and user-defined tokens (type 4) are matched in the text before the model
runs, as llama.cpp does.
Decoding goes through _Decoder, which reads the lazy token strings: `run` and `perplexity` encode once,
then drop the `tokenizers` object (~70 MB for a 262k vocabulary) with release_encoder().
"""

from __future__ import annotations

import gc
import re
from collections.abc import Sequence

import numpy as np

from .. import _platform
from ..gguf import GGUFFile
from .config import ModelError
from .chat_template import render_chat_template
from .spm import SPACE, TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_USER, _MergesCache, _SpmEncoder, _spm_merges, _VocabIndex


_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# The contractions with ASCII letters of either case, as llama.cpp writes them: its splitter lowers the
# letter after the apostrophe with simple case mapping, whereas Oniguruma's (?i:...) also folds
# U+017F (long s) to s.
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen 3.5's: qwen2's with combining marks (\p{M}) inside letter runs and outside punctuation runs.
_QWEN35 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# tokenizer.ggml.pre -> (split regex, ignore_merges)
PRE = {
    "default": (_GPT2, False), "gpt-2": (_GPT2, False), "gpt2": (_GPT2, False),
    "llama3": (_LLAMA3, True), "llama-bpe": (_LLAMA3, True), "llama-v3": (_LLAMA3, True),
    "smaug-bpe": (_LLAMA3, True), "dbrx": (_LLAMA3, True),
    "qwen2": (_QWEN2, False), "deepseek-r1-qwen": (_QWEN2, False), "qwen35": (_QWEN35, False),
}
# End-of-turn tokens that stop generation besides EOS, when the vocabulary has them.
STOP_TEXTS = ("<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end_of_text|>", "<|endoftext|>")


class _Pairs(Sequence):
    """Merges as a sequence of (left, right) that makes each pair only when read: models.BPE reads
    the sequence once by iterating, so ~500k pairs never exist as Python objects at the same time
    (a list of them is ~100 MB for Gemma).  `items` is indexable; `split(item)` gives the pair."""

    def __init__(self, items, split):
        self.items, self.split = items, split

    def __len__(self):
        return len(self.items)

    def __getitem__(self, k):
        return self.split(self.items[k])

    def __iter__(self):
        return map(self.split, self.items)


def _bpe(models, key: str, vocab, merges, **kw):
    """models.BPE, its errors (a merge naming a token the vocabulary lacks...) as ModelError naming the key:
    the tokenizers package raises a bare Exception."""
    try:
        return models.BPE(vocab, merges, **kw)
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001 - tokenizers has no narrower class
        raise ModelError(f"{key}: {e}") from None


def _release_heap() -> None:
    """Hand the memory freed after building a tokenizer back to the OS (glibc keeps freed heap
    memory otherwise): the model weights, loaded next, then reuse it instead of stacking on top."""
    if _platform.WINDOWS:  # no C library to name (ctypes.CDLL(None) is a TypeError there)
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc


def _cache_latin1_utf8() -> None:
    """Have CPython cache the UTF-8 of the one-character strings U+0080..U+00FF now.  Those strings
    are shared singletons (every slice or decode giving one returns the same object), and `tokenizers`
    reading one as UTF-8 caches it on the object for good: made in the middle of a vocabulary's
    ~35 MB of small objects, the ~120 caches pinned ~1 MB of otherwise freed allocator arenas."""
    from tokenizers import models

    models.BPE({chr(c): c - 0x80 for c in range(0x80, 0x100)}, [])


def _bytes_to_unicode() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: the printable character standing for each byte."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]  # stand for themselves
    others = [b for b in range(256) if b not in printable]  # take U+0100, U+0101, ... in byte order
    return {**{chr(b): b for b in printable}, **{chr(256 + k): b for k, b in enumerate(others)}}


_HEX = re.compile(r"\+?[0-9A-Fa-f]+")  # Rust's u8::from_str_radix(_, 16), which ByteFallback uses


def _fallback_byte(t: str) -> int | None:
    """The byte of a `<0xNN>` byte-fallback token (tokenizers' test: 6 UTF-8 bytes, `<0x` .. `>`)."""
    if t.startswith("<0x") and t.endswith(">") and len(t.encode("utf-8", "surrogateescape")) == 6:
        mid = t[3:-1]
        if _HEX.fullmatch(mid):
            return int(mid, 16)
    return None


class _Decoder:
    """The decoder TextTokenizer configures in `tokenizers`, reimplemented over the lazy token strings
    (no tables: a token's string is read from the file view when decoded).  Ids tokenizers cannot map
    back (outside the vocabulary, or a repeated string's later id: its vocab keeps the first) are
    dropped, as tokenizers drops them."""

    def __init__(self, tokens, kind: str, strip_space: bool, unreachable: frozenset):
        self.tokens, self.strip_space, self.unreachable = tokens, strip_space, unreachable
        self.byte_of = _bytes_to_unicode() if kind == "gpt2" else None

    def __call__(self, ids) -> str:
        n, tokens, skip = len(self.tokens), self.tokens, self.unreachable
        toks = []
        for i in ids:
            i = int(i)
            if i < 0:
                raise ModelError(f"token id {i} is negative")
            if i < n and i not in skip:
                toks.append(tokens[i])
        if self.byte_of is not None:  # decoders.ByteLevel: a token with a char outside the alphabet is kept
            byte_of, buf = self.byte_of, bytearray()
            for t in toks:
                try:
                    buf += bytes([byte_of[c] for c in t])
                except KeyError:
                    buf += t.encode("utf-8", "surrogateescape")
            return buf.decode("utf-8", "replace")
        # Replace(U+2581, " "), ByteFallback, Fuse, [Strip(" ", 1, 0)]
        out, pending = [], bytearray()
        for t in toks:
            t = t.replace(SPACE, " ")
            b = _fallback_byte(t)
            if b is not None:
                pending.append(b)
                continue
            if pending:
                out.append(_bytes_text(pending))
                pending.clear()
            out.append(t)
        if pending:
            out.append(_bytes_text(pending))
        text = "".join(out)
        return text[1:] if self.strip_space and text.startswith(" ") else text


def _bytes_text(b: bytearray) -> str:
    """ByteFallback's text of a run of byte tokens: its UTF-8, or one U+FFFD per byte if invalid."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" * len(b)


_NO_IDS = frozenset()


def _build(f: GGUFFile, kind: str, strings, add_space_prefix: bool, merges_cache=None):
    """The `tokenizers` object of the file's vocabulary, with (stop ids found by text, ids whose string
    repeats an earlier one) as int arrays: everything made here is garbage when it returns.
    merges_cache: a _MergesCache of the file (SentencePiece vocabularies), or None."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokens = list(strings)
    n = len(tokens)
    types = f.get("tokenizer.ggml.token_type", list, None, of=int)
    types = [TOKEN_NORMAL] * n if types is None else np.asarray(types, np.int64).tolist()
    if len(types) != n:
        raise ModelError(f"tokenizer.ggml.token_type has {len(types)} entries for {n} tokens")
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)

    if kind == "gpt2":
        pre = f.get("tokenizer.ggml.pre", str, "default")
        if pre not in PRE:
            raise ModelError(f"tokenizer.ggml.pre {pre!r} is not supported (known: {', '.join(sorted(PRE))})")
        regex, ignore_merges = PRE[pre]
        merges = f.get("tokenizer.ggml.merges", list, [], of=str)

        def split(m):
            a, sep, b = m.partition(" ")
            if not sep:
                raise ModelError(f"tokenizer.ggml.merges entry {m!r} is not 'left right'")
            return a, b

        tok = Tokenizer(_bpe(models, "tokenizer.ggml.merges", vocab, _Pairs(merges, split),
                             ignore_merges=ignore_merges))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        tok.decoder = decoders.ByteLevel()
    else:  # llama
        merges = merges_cache.load() if merges_cache else None
        if merges is None:
            scores = f.get("tokenizer.ggml.scores", list, of=float)
            if len(scores) != n:
                raise ModelError(f"tokenizer.ggml.scores has {len(scores)} entries for {n} tokens")
            merges = _spm_merges(types, scores, vocab)
            del scores
            if merges_cache:
                merges_cache.save(*merges)
        if len(merges[0]) and (int(merges[0].max()) >= n or int(merges[1].min()) < 1):
            raise ModelError("tokenizer.ggml.tokens: cached merges do not fit the vocabulary")
        ids, cuts = (memoryview(a) for a in merges)  # fast int reads
        del merges

        def split(k):
            t, c = tokens[ids[k]], cuts[k]
            return t[:c], t[c:]

        unk = f.get("tokenizer.ggml.unknown_token_id", int, None)
        tok = Tokenizer(_bpe(models, "tokenizer.ggml.tokens", vocab, _Pairs(range(len(ids)), split),
                             byte_fallback=True, fuse_unk=True,
                             unk_token=tokens[unk] if unk is not None and 0 <= unk < n else None))
        del ids, cuts
        norms = [normalizers.Prepend(SPACE)] if add_space_prefix else []
        tok.normalizer = normalizers.Sequence(norms + [normalizers.Replace(" ", SPACE)])
        decs = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
        if add_space_prefix:
            decs.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(decs)

    tok.add_tokens([AddedToken(t, special=(types[i] == TOKEN_CONTROL), normalized=False)  # in id order
                    for t, i in vocab.items() if types[i] in (TOKEN_CONTROL, TOKEN_USER)])
    stops = np.array([vocab[s] for s in STOP_TEXTS if s in vocab], np.int64)
    unreachable = np.array([i for i, t in enumerate(tokens) if vocab[t] != i], np.int64)
    if merges_cache and kind == "llama":
        _VocabIndex.save(f.path, vocab, unreachable)
    return tok, stops, unreachable


class TextTokenizer:
    def __init__(self, f: GGUFFile, cache: bool = False):
        """The tokenizer of f's metadata.  cache: read what the build derives from a SentencePiece
        vocabulary from the on-disk cache of this file (written there the first time); see
        _MergesCache."""
        kind = f.get("tokenizer.ggml.model", str, None)
        if kind is None:
            raise ModelError("the file has no tokenizer (tokenizer.ggml.model missing)")
        if kind not in ("gpt2", "llama"):
            raise ModelError(f"tokenizer.ggml.model {kind!r} is not supported (gpt2 and llama are)")
        # What outlives the build is made before it, and what the build finds leaves it as arrays:
        # a Python object made amid the vocabulary's ~35 MB of small objects pins the allocator arena
        # it lands in once they are freed (Gemma: ~2 MB of arenas for a few dozen objects).
        self.kind = kind
        # Kept as the file gives it (lazy for large vocabularies); decoded into a list only while the
        # tokenizer is built (its strings are the vocab dict's keys, so that costs one pointer each).
        self.tokens = f.get("tokenizer.ggml.tokens", list, of=str)
        self.n_vocab = n = len(self.tokens)

        def tid(key):
            v = f.get(key, int, None)
            if v is not None and not 0 <= v < n:
                raise ModelError(f"{key} = {v} is outside the vocabulary (0..{n - 1})")
            return v

        self.bos_id = tid("tokenizer.ggml.bos_token_id")
        self.eos_id = tid("tokenizer.ggml.eos_token_id")
        eot_id = tid("tokenizer.ggml.eot_token_id")
        default_bos = kind == "llama"
        self.add_bos = f.get("tokenizer.ggml.add_bos_token", bool, default_bos) and self.bos_id is not None
        self.add_eos = f.get("tokenizer.ggml.add_eos_token", bool, False) and self.eos_id is not None
        if kind == "llama":
            self.add_space_prefix = f.get("tokenizer.ggml.add_space_prefix", bool, True)
        self.chat_template = f.get("tokenizer.chat_template", str, None)
        self._decode = _Decoder(self.tokens, kind, kind == "llama" and self.add_space_prefix, _NO_IDS)
        self._file, self._cache, self._released, self._fast = f, cache, False, None
        index = _VocabIndex.load(f.path, self.tokens) if cache and kind == "llama" else None
        if index is not None:  # a start after the first: `tokenizers` is built only if a text needs it
            self.tok = None
            types = f.get("tokenizer.ggml.token_type", list, None, of=int)
            types = np.full(n, TOKEN_NORMAL) if types is None else np.asarray(types)
            scores = f.get("tokenizer.ggml.scores", list, of=float)
            if len(types) == n and len(scores) == n:
                self._fast = _SpmEncoder(index, types, np.asarray(scores), self.add_space_prefix)
                stops = np.array([i for t in STOP_TEXTS if (i := index.get(t)) is not None], np.int64)
                self._set_stops(eot_id, stops, index.unreachable)
                return
        self._build()
        self._set_stops(eot_id, self._stops, self._unreachable)
        del self._stops, self._unreachable

    def _build(self) -> None:
        """The `tokenizers` object (self.tok), which encodes texts of any length."""
        f = self._file
        _cache_latin1_utf8()
        self.tok, self._stops, self._unreachable = _build(
            f, self.kind, self.tokens, getattr(self, "add_space_prefix", False),
            _MergesCache(f.path) if self._cache else None)
        gc.collect()
        f.release_header()  # every token string was read: the pages go until decode reads a few
        _release_heap()

    def build_encoder(self) -> None:
        """Build the `tokenizers` object now if a cached start skipped it (a server does, so that a
        long prompt later does not wait for it)."""
        if self.tok is None and not self._released:
            self._build()

    def _set_stops(self, eot_id, stops: np.ndarray, unreachable: np.ndarray) -> None:
        self.stop_ids = frozenset(s for s in {self.eos_id, eot_id, *stops.tolist()} if s is not None)
        if len(unreachable):  # usually empty
            self._decode.unreachable = frozenset(unreachable.tolist())

    def release_encoder(self) -> None:
        """Drop the `tokenizers` object once the text is encoded (decode does not need it) and hand its
        memory back to the OS; encode() raises ModelError afterwards."""
        self.tok, self._fast, self._released = None, None, True
        gc.collect()
        _release_heap()

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        if self._released:
            raise ModelError("encode() after release_encoder(): the encoder was dropped to save memory")
        ids = self._fast.encode(text) if self.tok is None and self._fast is not None else None
        if ids is None:
            self.build_encoder()
            ids = self.tok.encode(text, add_special_tokens=False).ids
        if add_special and self.add_bos:
            ids = [self.bos_id] + ids
        if add_special and self.add_eos:
            ids = ids + [self.eos_id]
        return ids

    def decode(self, ids) -> str:
        return self._decode(ids)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True,
                            template: str | None = None) -> str:
        """messages rendered by `template` (default: the file's tokenizer.chat_template) as
        transformers renders a chat template: jinja2 in an immutable sandbox, with bos_token,
        eos_token, add_generation_prompt and raise_exception."""
        template = template or self.chat_template
        if not template:
            raise ModelError("--chat: this file has no tokenizer.chat_template")
        return render_chat_template(
            template, messages, add_generation_prompt,
            bos_token=self.tokens[self.bos_id] if self.bos_id is not None else "",
            eos_token=self.tokens[self.eos_id] if self.eos_id is not None else "")


class StreamDecoder:
    """Turns a growing list of ids into text pieces, holding back incomplete UTF-8 sequences.  Each
    push decodes a window of the last few tokens, not the whole list: the text of the tokens since
    the last piece, against the same text without the new ones (the window starts one piece back,
    so a decoder rule at the start of a text, like SentencePiece's stripped space, applies to both)."""

    def __init__(self, tok: TextTokenizer):
        self.tok, self.ids, self.text = tok, [], ""
        self._start, self._read = 0, 0  # the window: ids[_start:_read] is already shown

    def push(self, token: int) -> str:
        self.ids.append(int(token))
        ids, decode = self.ids, self.tok.decode
        shown, new = decode(ids[self._start:self._read]), decode(ids[self._start:])
        if new.endswith("\ufffd"):  # a multi-byte character is not complete yet
            return ""
        if new.startswith(shown):
            piece = new[len(shown):]
            self.text += piece
        else:  # the window's text changed in front: compare whole texts
            full = decode(ids)
            piece = full[len(self.text):] if full.startswith(self.text) else full
            self.text = full
        self._start, self._read = self._read, len(ids)
        return piece
