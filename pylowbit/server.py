"""An OpenAI-compatible HTTP server for one LLM (FastAPI + uvicorn, the `server` extra):
/v1/models, /v1/completions, /v1/chat/completions (JSON or Server-Sent Events), /health.

One generation runs at a time, on one worker thread (the model holds one KV cache); requests wait
for it in a bounded queue, and one past the bound gets 429.  Bad requests get a 4xx with an
OpenAI-style body {"error": {"message", "type", "param", "code"}}.  A streaming client that goes
away cancels its generation at the next token.  docs/SERVER.md.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .llm import LLM
from .llm_requests import RequestError, SamplingParams, collect_chat, collect_completion
from .model import ModelError

_DONE = object()
# Features clients may ask for that this server does not have: name -> "the request asks for it".
_UNSUPPORTED = {
    "logprobs": lambda v: v not in (None, False, 0),
    "top_logprobs": lambda v: v not in (None, 0),
    "echo": lambda v: v not in (None, False),
    "best_of": lambda v: v not in (None, 1),
    "suffix": lambda v: v not in (None, ""),
    "tools": lambda v: v not in (None, []),
    "response_format": lambda v: v is not None and not (isinstance(v, dict) and v.get("type") == "text"),
}
# Request fields taken as they are (OpenAI's names first, then llama.cpp's extensions); others are ignored.
_SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "seed", "stop")


class APIError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind


class _JSON(JSONResponse):
    """JSON with non-ASCII escaped: text decoded from a vocabulary's invalid UTF-8 (lone surrogates)
    still serializes."""

    def render(self, content) -> bytes:
        return json.dumps(content).encode()


def _error(status: int, message: str, param=None, code=None, kind="invalid_request_error") -> JSONResponse:
    return _JSON({"error": {"message": message, "type": kind, "param": param, "code": code}}, status)


class Worker:
    """The one thread that runs generations, and the count of requests admitted to it."""

    def __init__(self, llm: LLM, max_queue: int):
        self.llm, self.max_queue = llm, max_queue
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="pylowbit-decode")
        # templates and tokenization off the event loop, in their own thread: not behind a decode
        self.prep = ThreadPoolExecutor(1, thread_name_prefix="pylowbit-tokenize")
        self.admitted = 0  # running + waiting; touched on the event loop only
        self.cancels: set[threading.Event] = set()

    def admit(self) -> None:
        if self.admitted >= self.max_queue:
            raise APIError(429, f"the server is busy: {self.admitted} requests are queued (limit {self.max_queue}); "
                                "retry later", kind="rate_limit_error", code="queue_full")
        self.admitted += 1

    def release(self) -> None:
        self.admitted -= 1

    async def tokens(self, fn, *args) -> list[int]:
        return await asyncio.get_running_loop().run_in_executor(self.prep, fn, *args)

    def cancel_all(self) -> None:
        for c in list(self.cancels):
            c.set()

    def shutdown(self) -> None:
        self.cancel_all()
        self.prep.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(wait=True, cancel_futures=True)


def create_app(llm: LLM, model_id: str | None = None, api_key: str | None = None, max_queue: int = 16) -> FastAPI:
    """The server's application for llm (run it with uvicorn).  model_id: the name clients send
    (default the file name); api_key: required as `Authorization: Bearer KEY` on /v1 routes;
    max_queue: requests admitted at once, running or waiting (more get 429)."""
    model_id = model_id or llm.name
    worker = Worker(llm, max_queue)

    @asynccontextmanager
    async def lifespan(app):
        worker.prep.submit(llm.tokenizer.build_encoder)  # long prompts then encode at once
        yield
        worker.shutdown()  # cancels the running generation, then waits for its thread

    app = FastAPI(title="pylowbit", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan,
                  default_response_class=_JSON)
    app.state.worker = worker
    created = int(time.time())

    @app.exception_handler(APIError)
    async def _api_error(request, e: APIError):
        return _error(e.status, e.message, e.param, e.code, e.kind)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, e: StarletteHTTPException):
        kind = "invalid_request_error" if e.status_code < 500 else "server_error"
        return _error(e.status_code, str(e.detail), kind=kind)

    @app.exception_handler(Exception)
    async def _internal(request, e: Exception):
        return _error(500, f"internal error: {type(e).__name__}: {e}", kind="server_error")

    def authorize(request: Request) -> None:
        if api_key is None:
            return
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), api_key.encode()):
            raise APIError(401, "invalid or missing API key (Authorization: Bearer KEY)", code="invalid_api_key",
                           kind="authentication_error")

    async def body_of(request: Request) -> dict:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise APIError(400, f"the body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise APIError(400, "the body must be a JSON object")
        model = body.get("model")
        if model is not None and model != model_id:
            raise APIError(404, f"the model {model!r} does not exist (this server has {model_id!r})", "model",
                           "model_not_found")
        n = body.get("n", 1)
        if n != 1:
            raise APIError(400, "only n = 1 is supported", "n")
        for name, asked in _UNSUPPORTED.items():  # refused rather than silently ignored
            if name in body and asked(body[name]):
                raise APIError(400, f"{name} is not supported by this server", name)
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise APIError(400, "stream must be a boolean", "stream")
        return body

    def params_of(body: dict, default_max: int | None) -> SamplingParams:
        p = SamplingParams(max_tokens=default_max)
        for name in _SAMPLING:
            if body.get(name) is not None:
                setattr(p, name, body[name])
        if body.get("max_completion_tokens") is not None:
            p.max_tokens = body["max_completion_tokens"]
        if isinstance(p.stop, (list, tuple)) and len(p.stop) > 4:
            raise RequestError("stop takes at most 4 strings", "stop")
        for name in ("frequency_penalty", "presence_penalty"):  # accepted (OpenAI clients send them), not applied
            v = body.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not -2 <= v <= 2):
                raise RequestError(f"{name} must be a number in [-2, 2]", name)
        p.check()
        return p

    async def run(request: Request, make_chunks, collect, stream: bool):
        """Admit the request, run make_chunks(cancel) on the worker thread; JSON or SSE back."""
        worker.admit()
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        worker.cancels.add(cancel)
        queue: asyncio.Queue = asyncio.Queue()

        def put(item):
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone (shutting down)
                pass

        def job():
            try:
                if cancel.is_set():
                    return
                for chunk in make_chunks(cancel):
                    put(chunk)
            except BaseException as e:  # noqa: BLE001 - handed to the request's coroutine
                put(e)
            finally:
                put(_DONE)

        def done(_):
            worker.release()
            worker.cancels.discard(cancel)

        try:
            future = loop.run_in_executor(worker.pool, job)
        except RuntimeError:
            done(None)
            raise APIError(503, "the server is shutting down", kind="server_error")
        future.add_done_callback(done)

        async def chunks():
            try:
                while (item := await queue.get()) is not _DONE:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                cancel.set()  # the client went away or we are done: stop at the next token

        if not stream:
            async def watch():  # a client gone before its answer: stop generating it
                while not cancel.is_set():
                    if await request.is_disconnected():
                        cancel.set()
                    await asyncio.sleep(0.2)

            watcher = asyncio.create_task(watch())
            try:
                items = [c async for c in chunks()]
            finally:
                watcher.cancel()
            return _JSON(collect(iter(items)))

        gen = chunks()
        try:  # the first chunk (or the error) before the headers go out, so an error can still be a 4xx
            first = await gen.__anext__()
        except StopAsyncIteration:
            first = None

        async def sse():
            try:
                if first is not None:
                    yield f"data: {json.dumps(first)}\n\n"
                async for c in gen:
                    yield f"data: {json.dumps(c)}\n\n"
                yield "data: [DONE]\n\n"
            except (RequestError, ModelError) as e:
                yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'invalid_request_error'}})}\n\n"
            finally:
                await gen.aclose()

        return StreamingResponse(sse(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def guarded(coro):
        """RequestError / ModelError (bad parameters, a template refusing the messages) -> 400."""
        try:
            return await coro
        except RequestError as e:
            status = 400
            raise APIError(status, str(e), e.param, e.code) from None
        except ModelError as e:
            raise APIError(400, str(e)) from None

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": model_id, "queued": worker.admitted}

    @app.get("/v1/models")
    async def models(request: Request):
        authorize(request)
        return {"object": "list", "data": [{"id": model_id, "object": "model", "created": created,
                                            "owned_by": "pylowbit", "context_length": llm.n_ctx}]}

    @app.get("/v1/models/{model:path}")
    async def model(model: str, request: Request):
        authorize(request)
        if model != model_id:
            raise APIError(404, f"the model {model!r} does not exist (this server has {model_id!r})", "model",
                           "model_not_found")
        return {"id": model_id, "object": "model", "created": created, "owned_by": "pylowbit",
                "context_length": llm.n_ctx}

    @app.post("/v1/completions")
    async def completions(request: Request):
        authorize(request)

        async def handle():
            body = await body_of(request)
            if "prompt" not in body:
                raise RequestError("prompt is required", "prompt")
            prompt = body["prompt"]
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
                prompt = prompt[0]  # OpenAI's batch of one
            params = params_of(body, 16)
            ids = await worker.tokens(llm.prompt_tokens, prompt)
            llm.check_prompt(ids, "prompt")
            return await run(request, lambda cancel: llm.completion_chunks(ids, params, cancel),
                             collect_completion, body.get("stream", False))

        return await guarded(handle())

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        authorize(request)

        async def handle():
            body = await body_of(request)
            if "messages" not in body:
                raise RequestError("messages is required", "messages")
            params = params_of(body, None)
            ids = await worker.tokens(llm.chat_tokens, body["messages"])
            llm.check_prompt(ids, "messages")
            return await run(request, lambda cancel: llm.chat_chunks(ids, params, cancel),
                             collect_chat, body.get("stream", False))

        return await guarded(handle())

    return app


def serve(llm: LLM, host: str = "127.0.0.1", port: int = 8000, model_id: str | None = None,
          api_key: str | None = None, max_queue: int = 16, log_level: str = "warning") -> None:
    """Run the server until Ctrl-C / SIGTERM: the running generation is cancelled at once (its stream
    ends with finish_reason "cancelled"), so open responses finish before uvicorn's grace period."""
    import uvicorn

    app = create_app(llm, model_id, api_key, max_queue)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            app.state.worker.cancel_all()
            super().handle_exit(sig, frame)

    Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=3)).run()
