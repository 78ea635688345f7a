"""`pylowbit serve`: an OpenAI-compatible HTTP server for one GGUF model (needs pylowbit[server])."""

from __future__ import annotations

import signal
import sys


def add_parser(sub):
    p = sub.add_parser("serve", help="serve a GGUF model over an OpenAI-compatible HTTP API",
                       description="Serve a GGUF model over an OpenAI-compatible HTTP API: /v1/models, "
                                   "/v1/completions, /v1/chat/completions (streaming or not), /health.")
    p.add_argument("-m", "--model", required=True, help="GGUF file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("-t", "--threads", type=int, default=None, help="kernel threads (default: all cores)")
    p.add_argument("-c", "--ctx-size", type=int, default=None, help="context length (default: min(train, 4096))")
    p.add_argument("--model-id", default=None, help="the model name clients send and see (default: the file name)")
    p.add_argument("--api-key", default=None, help="require `Authorization: Bearer KEY` on the /v1 routes")
    p.add_argument("--max-queue", type=int, default=16,
                   help="requests admitted at once, running or waiting; more get 429 (default 16)")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    return p


def main(args) -> int:
    from .run import check_threads_ctx

    check_threads_ctx(args.threads, args.ctx_size, min_ctx=2)
    if args.max_queue < 1:
        raise ValueError(f"--max-queue must be >= 1, got {args.max_queue}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    try:
        from ..server import serve
    except ImportError as e:
        raise RuntimeError(f"pylowbit serve needs the server extra (pip install 'pylowbit[server]'): {e}") from None
    from ..llm import LLM

    llm = LLM(args.model, threads=args.threads, n_ctx=args.ctx_size, name=args.model_id)
    print(f"pylowbit serve: {llm.name} on http://{args.host}:{args.port}/v1 (ctx {llm.n_ctx}; Ctrl-C stops)",
          file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # after uvicorn's own handling: exit as for Ctrl-C
    try:
        serve(llm, args.host, args.port, api_key=args.api_key, max_queue=args.max_queue, log_level=args.log_level)
    except KeyboardInterrupt:  # uvicorn shut down cleanly, then re-raised the Ctrl-C
        pass
    print("pylowbit serve: stopped", file=sys.stderr)
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt
