"""Chat templates from GGUF files (tokenizer.chat_template), rendered as transformers renders
them: jinja2 in an immutable sandbox.  The template is code from the file, so compiling and
rendering are bounded in time, and repetition, power and output in size."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from functools import lru_cache

from .config import ModelError

CHAT_TEMPLATE_SECONDS = 5.0
CHAT_TEMPLATE_MAX_CHARS = 1 << 22


@contextmanager
def _deadline(seconds: float):
    """Raise ModelError in Python code running longer than `seconds` (a line-event trace on the
    frames it calls: jinja templates compile to Python, so their loops are seen)."""
    end = time.monotonic() + seconds
    previous = sys.gettrace()

    def trace(frame, event, arg):
        if time.monotonic() > end:
            raise ModelError(f"chat template: rendering took longer than {seconds:g} s")
        return trace

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)


def render_chat_template(template: str, messages: list[dict], add_generation_prompt: bool,
                         bos_token: str, eos_token: str) -> str:
    """messages rendered by `template` as transformers renders a chat template: jinja2 in an
    immutable sandbox, with bos_token, eos_token, add_generation_prompt and raise_exception."""
    try:
        import jinja2
    except ImportError:
        raise ModelError("--chat needs the jinja2 package (pip install jinja2)") from None
    try:
        tmpl = _compiled_template(template)
        with _deadline(CHAT_TEMPLATE_SECONDS):
            out = tmpl.render(messages=messages, add_generation_prompt=add_generation_prompt,
                              bos_token=bos_token, eos_token=eos_token)
    except ModelError:
        raise
    except jinja2.TemplateError as e:
        raise ModelError(f"chat template failed to render: {e}") from None
    except Exception as e:  # noqa: BLE001 - the template's own errors (1/0, recursion...) are the file's
        raise ModelError(f"chat template failed to render: {type(e).__name__}: {e}") from None
    if len(out) > CHAT_TEMPLATE_MAX_CHARS:
        raise ModelError(f"chat template: rendered {len(out)} characters (limit {CHAT_TEMPLATE_MAX_CHARS})")
    return out


def _raise_exception(msg):
    raise ModelError(f"chat template: {msg}")


@lru_cache(maxsize=8)
def _compiled_template(source: str):
    """A chat template compiled once (a chat renders it every turn)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Sandbox(ImmutableSandboxedEnvironment):
        # The template comes from the file: no giant string/list repetition or power (the
        # sandbox already caps range() at 100000).
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context, operator, left, right):
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if operator == "*" and isinstance(seq, (str, list, tuple)) and isinstance(n, int) \
                    and len(seq) * n > CHAT_TEMPLATE_MAX_CHARS:
                raise ModelError(f"chat template: repetition of {len(seq)} x {n} is too large")
            if operator == "**" and isinstance(right, int) and abs(right) > 1024:
                raise ModelError(f"chat template: power {right} is too large")
            return super().call_binop(context, operator, left, right)

    env = Sandbox(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise_exception
    with _deadline(CHAT_TEMPLATE_SECONDS):  # compiling is bounded too
        return env.from_string(source)
