"""The call rows of the malformed-input table (tests/test_malformed.py): (Ctx) -> a zero-argument
call pylowbit must refuse: model inputs, the CLI, kernels and ops given bad arrays."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import malformed_file_rows  # noqa: F401  (imported first: the file rows come first in the table)
import pylowbit as lb
from malformed_inputs import Base, rows
from pylowbit.gguf import GGUFFile
from pylowbit.model import Model, ModelError, TextTokenizer


class Ctx:
    """What call rows need: the valid model's path, a loaded model, a small weight matrix."""

    def __init__(self, base: Base, tmp: Path):
        self.base, self.path, self.tmp = base, base.path, tmp
        self._model = None

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = Model(self.path, ctx=8, threads=1, notice=None)
        self._model.reset()
        return self._model

    def cli(self, cmd: str, *argv: str):
        import argparse

        from pylowbit.commands import perplexity, run

        mod = {"run": run, "perplexity": perplexity}[cmd]
        ap = argparse.ArgumentParser()
        mod.add_parser(ap.add_subparsers())
        text = self.tmp / "text.txt"
        text.write_text("the capital of France is Paris. " * 8)
        base = ["-m", str(self.path)] + (["-f", str(text)] if cmd == "perplexity" else [])
        args = ap.parse_args([cmd, *base, *argv])
        return lambda: mod.main(args)


    def chat(self, template: str, seconds: float = 0.5):
        """--chat with this tokenizer.chat_template (rendering limited to `seconds`)."""
        from pylowbit.model import chat_template

        p = self.tmp / "chat.gguf"
        p.write_bytes(self.base.meta_changed({"tokenizer.chat_template": template}))

        def call():
            old, chat_template.CHAT_TEMPLATE_SECONDS = chat_template.CHAT_TEMPLATE_SECONDS, seconds
            try:
                with GGUFFile(p) as f:
                    TextTokenizer(f).apply_chat_template([{"role": "user", "content": "hi"}])
            finally:
                chat_template.CHAT_TEMPLATE_SECONDS = old
        return call


def _w(fmt="tq2_0", rows=4, cols=256):
    return lb.quantize(np.ones((rows, cols), np.float32), fmt)


X256 = np.ones(256, np.float32)

rows("Model inputs", "call",
     ("token id out of range", "forward([300]) with 300 tokens", lambda c: lambda: c.model.forward([300]),
      ModelError, r"token id 300 out of range 0..299"),
     ("negative token id", "forward([-1])", lambda c: lambda: c.model.forward([-1]), ModelError,
      r"token id -1 out of range 0..299"),
     ("prompt longer than the context", "9 tokens, ctx 8", lambda c: lambda: c.model.forward(np.ones(9, np.int64)),
      ModelError, r"context full: 0 \+ 9 tokens exceed the context length 8"),
     ("prompt longer than the context (CLI)", "run -n 500 -c 32",
      lambda c: c.cli("run", "-p", "x", "-n", "500", "-c", "32"),
      ValueError, r"prompt \(\d+ tokens\) \+ -n 500 exceed the context 32"),
     ("no tokens", "forward([])", lambda c: lambda: c.model.forward([]), ModelError,
      r"forward\(\) needs at least one token"),
     ("zero context", "Model(ctx=-1)", lambda c: lambda: Model(c.path, ctx=-1, notice=None), ModelError,
      r"context length must be positive, got -1"),
     ("zero context (0 is not the default)", "Model(ctx=0)", lambda c: lambda: Model(c.path, ctx=0, notice=None),
      ModelError, r"context length must be positive, got 0"),
     ("zero context (CLI)", "run -c 0", lambda c: c.cli("run", "-c", "0"), ValueError,
      r"-c/--ctx-size must be >= 1, got 0"),
     ("zero threads", "Model(threads=0)", lambda c: lambda: Model(c.path, threads=0, notice=None),
      ValueError, r"threads must be >= 1, got 0"),
     ("zero threads (CLI run)", "run -t 0", lambda c: c.cli("run", "-t", "0"), ValueError,
      r"-t/--threads must be >= 1, got 0"),
     ("negative threads (CLI perplexity)", "perplexity -t -2", lambda c: c.cli("perplexity", "-t", "-2"),
      ValueError, r"-t/--threads must be >= 1, got -2"),
     ("zero threads (kernel)", "gemv(x, threads=0)", lambda c: lambda: _w().gemv(X256, threads=0), ValueError,
      r"threads must be >= 1, got 0"),
     ("negative threads (global)", "set_threads(-1)", lambda c: lambda: lb.set_threads(-1), ValueError, r"threads"),
     ("negative generation length", "run -n -1", lambda c: c.cli("run", "-n", "-1"), ValueError,
      r"-n must be >= 0, got -1"),
     )

rows("Chat template (tokenizer.chat_template, used by run --chat)", "call",
     ("template that never ends", "two nested range(100000) loops",
      lambda c: c.chat("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"),
      ModelError, r"chat template: rendering took longer than 0.5 s"),
     ("template output too large", "'a' * 10**9", lambda c: c.chat("{{ 'a' * 10**9 }}"), ModelError,
      r"chat template: repetition of 1 x 1000000000 is too large"),
     ("template power too large", "2 ** 10**8", lambda c: c.chat("{% set n = 10**8 %}{{ 2 ** n }}"), ModelError,
      r"chat template: power 100000000 is too large"),
     ("template that fails", "1/0", lambda c: c.chat("{{ 1/0 }}"), ModelError,
      r"chat template failed to render: ZeroDivisionError"),
     ("template that recurses", "a macro calling itself",
      lambda c: c.chat("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), ModelError,
      r"chat template failed to render: RecursionError"),
     ("template that does not parse", "'{% for %}'", lambda c: c.chat("{% for %}"), ModelError,
      r"chat template failed to render: Expected an expression"),
     )

rows("Arrays", "call",
     ("weights of the wrong dtype", "quantize(float64)", lambda c: lambda: lb.quantize(np.ones(256), "tq2_0"),
      TypeError, r"float32"),
     ("activations of the wrong dtype", "gemv(float16 x)", lambda c: lambda: _w().gemv(X256.astype(np.float16)),
      TypeError, r"float32"),
     ("activations of an int dtype", "gemv(int32 x)", lambda c: lambda: _w().gemv(X256.astype(np.int32)),
      TypeError, r"float32"),
     ("object array", "quantize([None] * 256)", lambda c: lambda: lb.quantize(np.array([None] * 256), "tq2_0"),
      TypeError, r"dtype object"),
     ("bytes of the wrong dtype", "QTensor(uint16 data)",
      lambda c: lambda: lb.QTensor(np.zeros(33, np.uint16), "tq2_0", (1, 256)), TypeError, r"uint8"),
     ("activations of the wrong shape", "gemv(x of 128) on 256 columns",
      lambda c: lambda: _w().gemv(np.ones(128, np.float32)), ValueError, r"x must have shape \(256,\)"),
     ("batch of the wrong shape", "gemm(x (2, 128)) on 256 columns",
      lambda c: lambda: _w().gemm(np.ones((2, 128), np.float32)), ValueError, r"x must have shape \(batch, 256\)"),
     ("output of the wrong shape", "gemv(out of 5) for 4 rows",
      lambda c: lambda: _w().gemv(X256, out=np.empty(5, np.float32)), ValueError, r"out must have shape"),
     ("output of the wrong dtype", "gemv(out float64)",
      lambda c: lambda: _w().gemv(X256, out=np.empty(4, np.float64)), TypeError, r"out must be a float32"),
     ("1-D weight as a matrix", "gemv on a quantized vector",
      lambda c: lambda: lb.quantize(X256, "tq2_0").gemv(X256), ValueError, r"2-D weight"),
     ("array row not a block multiple", "quantize((2, 200)) to tq2_0",
      lambda c: lambda: lb.quantize(np.ones((2, 200), np.float32), "tq2_0"), ValueError,
      r"row length 200 is not a multiple of the block size 256"),
     ("shape not a block multiple", "QTensor q2_0 of 60 columns",
      lambda c: lambda: lb.QTensor(np.zeros(18, np.uint8), "q2_0", (1, 60)), ValueError,
      r"not a multiple of the block size 64"),
     ("bytes one short", "QTensor of 263 bytes for (4, 256) tq2_0",
      lambda c: lambda: lb.QTensor(_w().data[:-1], "tq2_0", (4, 256)), ValueError, r"needs 264 bytes, got 263"),
     ("bytes short of a block", "dequantize 65 bytes as 256 tq2_0 weights",
      lambda c: lambda: lb.dequantize(np.zeros(65, np.uint8), "tq2_0", (256,)), ValueError, r"needs 66 bytes"),
     ("non-contiguous bytes", "QTensor(data[::2])",
      lambda c: lambda: lb.QTensor(np.zeros(2 * 66 * 2, np.uint8)[::2], "tq2_0", (2, 256)), ValueError,
      r"C-contiguous"),
     ("misaligned bytes", "dequantize(data[1:]) of tq2_0",
      lambda c: lambda: lb.dequantize(np.zeros(2 * 66 + 1, np.uint8)[1:], "tq2_0", (2, 256)), ValueError,
      r"aligned"),
     ("transform length not a block multiple", "fwht(x of 96, block=64)",
      lambda c: lambda: lb.fwht(np.ones(96, np.float32), block=64), ValueError,
      r"last dimension 96 is not a multiple of block=64"),
     ("transform signs of the wrong shape", "fwht(x of 64, signs of 32)",
      lambda c: lambda: lb.fwht(np.ones(64, np.float32), block=64, signs=np.ones(32, np.float32)), ValueError,
      r"signs must be a 1-D vector of length 64"),
     )
