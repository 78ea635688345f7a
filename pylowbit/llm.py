"""The decoder as an application uses it: `LLM` opens a GGUF file once, then completes prompts and
chats, returning OpenAI-shaped dictionaries (or iterators of OpenAI-shaped chunks).

    >>> from pylowbit import LLM
    >>> llm = LLM("model.gguf", n_ctx=2048)
    >>> r = llm.chat([{"role": "user", "content": "Hi!"}], max_tokens=32, temperature=0)
    >>> r["choices"][0]["message"]["content"]

A prompt cache keeps the tokens whose K / V the model holds: a call whose prompt starts with them
evaluates only the rest.  A recurrent model (qwen35) cannot rewind its state, so a snapshot of it is
taken at the end of each prompt; the next prompt resumes from the live state when it extends
everything evaluated so far, else from the snapshot when it extends the previous prompt.
docs/SERVER.md has the details and the OpenAI-compatible server built on this class.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

# Re-exported: the request checks were part of this module.
from .llm_requests import (ROLES, RequestError, SamplingParams, check_messages, checked_text,  # noqa: F401
                           collect_chat, collect_completion)

# Used when the file has no tokenizer.chat_template.  Gemma's (its GGUF files often lack one): a
# system message goes in front of the first user turn, contents are trimmed, "assistant" is "model";
# llama.cpp renders the same text with its built-in gemma format.  Otherwise ChatML, llama.cpp's default.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set prefix = messages[0]['content'] | trim ~ '\n\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
    "{% for m in turns %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('roles must alternate user / assistant, starting with user') }}{% endif %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ prefix if loop.first else '' }}{{ m['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@dataclass
class _Outcome:
    """What a generation ended with, filled in as it runs."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    reused_tokens: int = 0  # prompt tokens the cache spared


class LLM:
    """A GGUF model opened once for completions and chats.  threads: kernel threads (default: all
    cores); n_ctx: context length (default min(trained, 4096)); name: the model id results carry
    (default the file name).  One generation runs at a time (a lock); a second thread waits."""

    def __init__(self, path: str | os.PathLike, threads: int | None = None, n_ctx: int | None = None,
                 name: str | None = None, foreign: str = "q8_0"):
        from .model import Model, TextTokenizer

        self.model = Model(path, ctx=n_ctx, threads=threads, foreign=foreign)
        try:
            self.tokenizer = TextTokenizer(self.model.file, cache=True)
        except BaseException:
            self.model.file.close()
            raise
        self.n_ctx = self.model.ctx
        self.name = name or os.path.basename(os.fspath(path))
        tok = self.tokenizer
        self.chat_template = tok.chat_template or (
            GEMMA_TEMPLATE if self.model.cfg.arch.startswith("gemma") else CHATML_TEMPLATE)
        self._lock = threading.RLock()  # a stream holds it while it runs; other threads wait
        self._epoch = 0  # generations started: a suspended stream sees another call ran
        self._cached: list[int] = []  # the tokens whose K / V (and recurrent state) the model holds
        self._snapshot: tuple | None = None  # recurrent: (prompt, state after it, its last logits)

    # ---- tokens and templates

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_special=add_special)

    def detokenize(self, ids) -> str:
        return self.tokenizer.decode(ids)

    def render_chat(self, messages, add_generation_prompt: bool = True) -> str:
        """The prompt text of messages by the chat template (checked as OpenAI checks them)."""
        return self.tokenizer.apply_chat_template(check_messages(messages), add_generation_prompt,
                                                  template=self.chat_template)

    def chat_tokens(self, messages) -> list[int]:
        """The prompt ids of messages: the rendered text, with a BOS only if the template wrote none."""
        text = self.render_chat(messages)
        tok = self.tokenizer
        bos = tok.tokens[tok.bos_id] if tok.bos_id is not None else None
        return tok.encode(text, add_special=not (bos and text.startswith(bos)))

    def prompt_tokens(self, prompt) -> list[int]:
        """A prompt as ids: a string is tokenized (with the BOS the file asks for), ids are checked."""
        if isinstance(prompt, str):
            return self.tokenize(checked_text(prompt, "prompt"))
        if isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            bad = [t for t in prompt if not 0 <= t < self.tokenizer.n_vocab]
            if bad:
                raise RequestError(f"token id {bad[0]} is outside the vocabulary (0..{self.tokenizer.n_vocab - 1})",
                                   "prompt")
            return list(prompt)
        raise RequestError("prompt must be a string or a list of token ids", "prompt")

    def check_prompt(self, ids: list[int], param: str = "prompt") -> None:
        """Refuse prompt ids that are empty or leave no room in the context for a generated token."""
        if not ids:
            raise RequestError("the prompt is empty (and the model adds no BOS token)", param)
        if len(ids) >= self.n_ctx:
            raise RequestError(f"the prompt has {len(ids)} tokens: it does not fit the context of {self.n_ctx} "
                               "with room for one generated token", param, "context_length_exceeded")

    # ---- the OpenAI-shaped calls

    def generate(self, prompt, max_tokens: int | None = 16, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0, seed: int | None = None,
                 stop: str | Sequence[str] = (), stream: bool = False, cache: bool = True):
        """Complete `prompt` (text, or token ids).  Returns a "text_completion" dict, or with stream=True
        an iterator of them each carrying the next piece of text (the last one: finish_reason and
        usage).  temperature 0 is greedy; cache=False evaluates the whole prompt afresh."""
        params = SamplingParams(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed=seed, stop=stop)
        params.check()
        ids = self.prompt_tokens(prompt)
        self.check_prompt(ids)
        chunks = self.completion_chunks(ids, params, cache=cache)
        return chunks if stream else collect_completion(chunks)

    def chat(self, messages, max_tokens: int | None = None, temperature: float = 0.8, top_k: int = 40,
             top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0, seed: int | None = None,
             stop: str | Sequence[str] = (), stream: bool = False, cache: bool = True):
        """Answer a conversation ([{"role": ..., "content": ...}, ...]) through the chat template.
        Returns a "chat.completion" dict, or with stream=True an iterator of "chat.completion.chunk"
        dicts with deltas (the first: the role; the last: finish_reason and usage)."""
        params = SamplingParams(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed=seed, stop=stop)
        params.check()
        ids = self.chat_tokens(messages)
        self.check_prompt(ids, "messages")
        chunks = self.chat_chunks(ids, params, cache=cache)
        return chunks if stream else collect_chat(chunks)

    def completion_chunks(self, ids: list[int], params: SamplingParams, cancel: threading.Event | None = None,
                          cache: bool = True) -> Iterator[dict]:
        """The streaming form of generate() for ids already checked (the server calls this)."""
        head = _head("cmpl", "text_completion", self.name)
        outcome = _Outcome()
        for piece in self._pieces(ids, params, outcome, cancel, cache):
            yield {**head, "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": None}]}
        yield {**head, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": outcome.finish_reason}],
               "usage": _usage(outcome)}

    def chat_chunks(self, ids: list[int], params: SamplingParams, cancel: threading.Event | None = None,
                    cache: bool = True) -> Iterator[dict]:
        """The streaming form of chat() for prompt ids already made (chat_tokens)."""
        head = _head("chatcmpl", "chat.completion.chunk", self.name)
        outcome = _Outcome()
        pieces = self._pieces(ids, params, outcome, cancel, cache)
        first = True
        for piece in pieces:
            delta = {"role": "assistant", "content": piece} if first else {"content": piece}
            first = False
            yield {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}
        delta = {"role": "assistant", "content": ""} if first else {}
        yield {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                    "finish_reason": outcome.finish_reason}], "usage": _usage(outcome)}

    # ---- the generation loop and its cache

    def _pieces(self, ids: list[int], params: SamplingParams, outcome: _Outcome, cancel, cache: bool):
        """Generate after ids, yielding text as it becomes final (held back while it could still turn
        into a stop string or an incomplete UTF-8 character); fills outcome."""
        from .model import StreamDecoder

        self.check_prompt(ids)
        with self._lock:
            self._epoch += 1
            mine = self._epoch  # another call of this thread, made while this stream waits, moves it on
            sampler = params.sampler()
            stops, stop_ids = params.stop, self.tokenizer.stop_ids
            longest = max((len(s) for s in stops), default=0)
            outcome.prompt_tokens = len(ids)
            budget = self.n_ctx - len(ids) + 1  # the last token is sampled, not evaluated
            n_max = budget if params.max_tokens is None else min(params.max_tokens, budget)
            history, text, sent = list(ids), "", 0
            decoder = StreamDecoder(self.tokenizer)
            outcome.finish_reason = "length"
            if n_max == 0:
                return
            logits = self._prefill(ids, outcome, cache)
            for i in range(n_max):
                if self._epoch != mine:
                    raise RuntimeError("another call on this LLM ran while this stream was suspended: "
                                       "its sequence is gone (finish a stream before the next call)")
                if cancel is not None and cancel.is_set():
                    outcome.finish_reason = "cancelled"
                    return
                nxt = sampler(logits, history)
                logits = None
                if nxt in stop_ids:
                    outcome.finish_reason = "stop"
                    break
                history.append(nxt)
                outcome.completion_tokens += 1
                text += decoder.push(nxt)
                if stops:
                    hit = [(k, s) for s in stops if (k := text.find(s, max(0, sent - longest))) >= 0]
                    if hit:
                        end = min(hit)[0]
                        if end > sent:
                            yield text[sent:end]
                        outcome.finish_reason = "stop"
                        return
                    safe = len(text) - _partial_stop(text, stops)
                else:
                    safe = len(text)
                if safe > sent:
                    yield text[sent:safe]
                    sent = safe
                if i + 1 < n_max:
                    logits = self._step(nxt)
            if len(text) > sent:
                yield text[sent:]

    def _prefill(self, ids: list[int], outcome: _Outcome, cache: bool):
        """Evaluate the prompt ids, reusing what the model holds, and return the last logits."""
        m = self.model
        start, snap = 0, None
        if cache and m.state is None:
            start = min(_common_prefix(self._cached, ids), len(ids) - 1)  # at least one token to run
        elif cache:
            n = len(self._cached)
            if n < len(ids) and ids[:n] == self._cached:
                start = n  # the live state is at the end of ids[:n]
            elif self._snapshot is not None:
                p, state, logits = self._snapshot
                if len(p) <= len(ids) and ids[:len(p)] == p:
                    start, snap = len(p), state
                    if len(p) == len(ids):  # the same prompt again: its logits were kept too
                        self._cached = []
                        m.rewind(start, snap)
                        self._cached = list(ids)
                        outcome.reused_tokens = start
                        return logits.copy()
        cached, self._cached = self._cached, []  # not valid while the forward runs
        if m.state is None or start == 0 or start < len(cached) or snap is not None:
            m.rewind(start, snap)  # (a recurrent model resuming its live state stays where it is)
        if m.state is not None:
            self._snapshot = None
        logits = m.forward(ids[start:], pos=start)
        self._cached = list(ids)
        if m.state is not None:
            self._snapshot = (list(ids), m.state.snapshot(), logits.copy())
        outcome.reused_tokens = start
        return logits

    def _step(self, token: int):
        self._cached.append(-1)  # a placeholder until the forward is done: never matches a prompt
        logits = self.model.forward([token])
        self._cached[-1] = token
        return logits

    def close(self) -> None:
        """Unmap the file (the LLM is unusable afterwards)."""
        with self._lock:
            self._cached, self._snapshot = [], None
            self.model.file.close()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def reset(self) -> None:
        """Forget the prompt cache (the next call evaluates its whole prompt)."""
        with self._lock:
            self._cached, self._snapshot = [], None
            self.model.reset()


def _head(prefix: str, obj: str, model: str) -> dict:
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": obj, "created": int(time.time()), "model": model}


def _usage(o: _Outcome) -> dict:
    return {"prompt_tokens": o.prompt_tokens, "completion_tokens": o.completion_tokens,
            "total_tokens": o.prompt_tokens + o.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": o.reused_tokens}}


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _partial_stop(text: str, stops) -> int:
    """The length of text's longest ending that begins some stop string (held back until it is known)."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best
