"""A request to LLM, checked the way OpenAI's API checks it (each error names its parameter), and
the non-streaming results collected from streamed chunks."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ROLES = ("system", "user", "assistant", "developer", "tool")


class RequestError(ValueError):
    """A bad argument of a request: `param` names it (as OpenAI's error bodies do), `code` is
    "context_length_exceeded" for a prompt that does not fit the context."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param, self.code = param, code


@dataclass
class SamplingParams:
    """One request's generation settings, checked by check().  max_tokens None: up to the context."""
    max_tokens: int | None = 16
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int | None = None
    stop: Sequence[str] = ()

    def check(self) -> None:
        def number(name, lo, hi, integer=False, lo_open=False):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)):
                raise RequestError(f"{name} must be {'an integer' if integer else 'a number'}, got {v!r}", name)
            if v != v or v < lo or (lo_open and v == lo) or (hi is not None and v > hi):
                span = f"{'(' if lo_open else '['}{lo}, " + (f"{hi}]" if hi is not None else "inf)")
                raise RequestError(f"{name} must be in {span}, got {v!r}", name)

        if self.max_tokens is not None:
            number("max_tokens", 0, None, integer=True)
        number("temperature", 0, 2)
        number("top_k", 0, None, integer=True)
        number("top_p", 0, 1, lo_open=True)
        number("min_p", 0, 1)
        number("repeat_penalty", 0, None, lo_open=True)
        number("repeat_last_n", 0, None, integer=True)
        if self.seed is not None:
            number("seed", -(1 << 63), (1 << 64) - 1, integer=True)
        stop = [self.stop] if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
            raise RequestError("stop must be a non-empty string or a list of them", "stop")
        self.stop = tuple(stop)

    def sampler(self):
        from .model import Sampler, SamplerConfig

        seed = None if self.seed is None else self.seed % (1 << 64)  # numpy takes no negative seeds
        return Sampler(SamplerConfig(temperature=float(self.temperature), top_k=self.top_k, top_p=float(self.top_p),
                                     min_p=float(self.min_p), repeat_penalty=float(self.repeat_penalty),
                                     repeat_last_n=self.repeat_last_n, seed=seed))


def check_messages(messages) -> list[dict]:
    """messages as the template takes them: a non-empty list of {"role", "content"} with a known role
    and text content (OpenAI's list of {"type": "text", "text"} parts is joined)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise RequestError("messages must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise RequestError(f"messages[{i}] must be an object with role and content", "messages")
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise RequestError(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}", "messages")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):
                raise RequestError(f"messages[{i}].content: only text parts are supported", "messages")
            content = "".join(p["text"] for p in content)
        if content is None and role == "assistant":
            content = ""
        if not isinstance(content, str):
            raise RequestError(f"messages[{i}].content must be a string", "messages")
        checked_text(content, "messages")
        out.append({**m, "role": role, "content": content})
    return out


def checked_text(s: str, param: str) -> str:
    """s, refused if it cannot be UTF-8 (a lone surrogate, which JSON's \\udc80 escapes can make)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(f"{param}: the text is not valid Unicode ({e.reason} at {e.start})", param) from None
    return s


def collect_completion(chunks) -> dict:
    """The non-streaming result of completion chunks."""
    text, last = [], None
    for last in chunks:
        text.append(last["choices"][0]["text"])
    return {**last, "choices": [{**last["choices"][0], "text": "".join(text)}]}


def collect_chat(chunks) -> dict:
    """The non-streaming "chat.completion" of chat chunks."""
    text, last = [], None
    for last in chunks:
        text.append(last["choices"][0]["delta"].get("content", ""))
    choice = {"index": 0, "message": {"role": "assistant", "content": "".join(text)}, "logprobs": None,
              "finish_reason": last["choices"][0]["finish_reason"]}
    return {**last, "object": "chat.completion", "choices": [choice]}
