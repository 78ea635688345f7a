"""`pylowbit run`: generate text from a GGUF model, streaming it, then print tokens/s."""

from __future__ import annotations

import sys


def add_parser(sub):
    p = sub.add_parser("run", help="generate text from a GGUF model",
                       description="Generate text from a GGUF model (llama, qwen3, bitnet-b1.58, gemma3, qwen35).")
    p.add_argument("-m", "--model", required=True, help="GGUF file")
    p.add_argument("-p", "--prompt", default="", help="prompt text")
    p.add_argument("-n", "--n-predict", type=int, default=64, help="tokens to generate (default 64)")
    p.add_argument("-t", "--threads", type=int, default=None, help="kernel threads (default: all cores)")
    p.add_argument("-c", "--ctx-size", type=int, default=None, help="context length (default: min(train, 4096))")
    p.add_argument("--chat", action="store_true",
                   help="interactive chat through the file's chat template: -p is the first message, then one "
                        "message per line of input (history kept, prompt cache reused); EOF or Ctrl-C ends it")
    p.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="top-k (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0, help="top-p (1 = off)")
    p.add_argument("--repeat-penalty", type=float, default=1.0, help="repetition penalty (1 = off)")
    p.add_argument("--repeat-last-n", type=int, default=64, help="tokens the penalty looks back over")
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    p.add_argument("--foreign", choices=("q8_0", "f16", "f32"), default="q8_0",
                   help="keep tensors of types without a pylowbit kernel as this (default q8_0)")
    p.add_argument("--no-eos-stop", action="store_true", help="keep generating past end-of-sequence tokens")
    return p


def check_threads_ctx(threads: int | None, ctx: int | None, min_ctx: int = 1) -> None:
    """The -t / -c checks of run and perplexity, before the model is loaded."""
    if threads is not None and threads < 1:
        raise ValueError(f"-t/--threads must be >= 1, got {threads}")
    if ctx is not None and ctx < min_ctx:
        raise ValueError(f"-c/--ctx-size must be >= {min_ctx}, got {ctx}")


def load(args):
    """(tokenizer, model) of args.model.  The model first: loading maps the weights without reading
    them (Gemma 3 270M: ~7 MB), and the tokenizer reads the vocabulary from the model's opening of
    the file, so the token strings are indexed once (4 MB for 262k tokens), not once per opening.
    Its construction peak (~200 MB there) passes before the weights are resident, and its garbage
    lies above the model's allocations instead of under them; release_encoder() returns it.  What
    the build derives is cached on disk by the file's identity: a second run of a SentencePiece
    vocabulary encodes its prompt from the cached vocabulary index, with no build at all."""
    from ..model import Model, TextTokenizer

    model = Model(args.model, ctx=args.ctx_size, threads=args.threads, foreign=args.foreign)
    return TextTokenizer(model.file, cache=True), model


def main(args) -> int:
    from ..model import Sampler, SamplerConfig, StreamDecoder, generate

    if args.n_predict < 0:
        raise ValueError(f"-n must be >= 0, got {args.n_predict}")
    check_threads_ctx(args.threads, args.ctx_size)
    if args.chat:
        return chat(args)
    sampler = Sampler(SamplerConfig(temperature=args.temp, top_k=args.top_k, top_p=args.top_p,
                                    repeat_penalty=args.repeat_penalty, repeat_last_n=args.repeat_last_n,
                                    seed=args.seed))
    tok, model = load(args)
    print(f"memory: {model.memory_summary()}", file=sys.stderr)
    ids = tok.encode(args.prompt)
    tok.release_encoder()  # only decode from here on: the ~70 MB of a large vocabulary's encoder go
    if not ids:
        raise ValueError("the prompt is empty and the model adds no BOS token: give -p")
    if len(ids) + args.n_predict > model.ctx:
        raise ValueError(f"prompt ({len(ids)} tokens) + -n {args.n_predict} exceed the context {model.ctx} (use -c)")

    out = sys.stdout
    out.write(args.prompt)
    out.flush()
    stream = StreamDecoder(tok)

    def on_token(t):
        out.write(stream.push(t))
        out.flush()

    gen, t_prompt, t_gen, n_eval = generate(model, tok, ids, args.n_predict, sampler, on_token,
                                            stop_at_eos=not args.no_eos_stop)
    out.write("\n")
    out.flush()
    pp = len(ids) / t_prompt if t_prompt > 0 else float("inf")
    tg = n_eval / t_gen if t_gen > 0 and n_eval else float("nan")
    print(f"prompt: {len(ids)} tokens in {t_prompt:.2f} s, {pp:.2f} tokens/s | "
          f"generation: {n_eval} tokens in {t_gen:.2f} s, {tg:.2f} tokens/s", file=sys.stderr)
    return 0


def chat(args) -> int:
    """`run --chat`: a conversation on pylowbit.LLM, each answer streamed to stdout (then a newline),
    timings to stderr.  Ctrl-C during an answer cuts it short; at the prompt, or EOF, ends the chat."""
    import time

    from ..llm import LLM, SamplingParams

    params = SamplingParams(max_tokens=args.n_predict, temperature=args.temp, top_k=args.top_k, top_p=args.top_p,
                            min_p=0.0, repeat_penalty=args.repeat_penalty, repeat_last_n=args.repeat_last_n,
                            seed=args.seed)
    params.check()
    llm = LLM(args.model, threads=args.threads, n_ctx=args.ctx_size, foreign=args.foreign)
    print(f"memory: {llm.model.memory_summary()}", file=sys.stderr)
    tty, out = sys.stdin.isatty(), sys.stdout
    history, pending = [], args.prompt or None
    while True:
        if pending is not None:
            text, pending = pending, None
        else:
            try:
                text = input("> " if tty else "")
            except (EOFError, KeyboardInterrupt, OSError):  # OSError: no readable stdin
                if tty:
                    out.write("\n")
                break
        if not text.strip():
            continue
        history.append({"role": "user", "content": text})
        ids = llm.chat_tokens(history)
        if len(ids) >= llm.n_ctx:
            print(f"the conversation ({len(ids)} tokens) fills the context of {llm.n_ctx}: ending it (use -c)",
                  file=sys.stderr)
            break
        answer, t0, usage = [], time.perf_counter(), None
        try:
            for chunk in llm.chat_chunks(ids, params):
                piece = chunk["choices"][0]["delta"].get("content", "")
                answer.append(piece)
                out.write(piece)
                out.flush()
                usage = chunk.get("usage", usage)
        except KeyboardInterrupt:
            pass  # the answer so far stays in the history
        out.write("\n")
        out.flush()
        history.append({"role": "assistant", "content": "".join(answer)})
        if usage:
            dt = time.perf_counter() - t0
            print(f"prompt: {usage['prompt_tokens']} tokens ({usage['prompt_tokens_details']['cached_tokens']} cached) "
                  f"| {usage['completion_tokens']} tokens in {dt:.2f} s", file=sys.stderr)
    return 0
