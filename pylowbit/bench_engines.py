"""The engines `pylowbit bench` measures side by side: pylowbit's decoder, llama.cpp through
llama-cpp-python (`--vs llama.cpp`) and a transformers model holding pylowbit.torch layers
(`--vs torch`).  Each loads a file, then runs a prompt batch or n one-token steps."""
from __future__ import annotations

import time
from pathlib import Path

from pylowbit.bench_models import BenchError, file_format


# ---- engines ---------------------------------------------------------------------------------

class PylowbitEngine:
    name = "pylowbit"

    def __init__(self, path: Path, threads: int, ctx: int):
        from pylowbit.model import load_model

        t0 = time.perf_counter()
        self.model = load_model(path, ctx=ctx, threads=threads)
        self.load_s = time.perf_counter() - t0

    def set_threads(self, threads: int) -> None:
        """The same loaded model on another thread count (a 27B file takes minutes to load)."""
        self.model.threads = threads

    def prompt(self, tokens) -> None:
        self.model.reset()
        self.model.forward(tokens, pos=0)

    def generate(self, first: int, n: int) -> None:
        self.model.reset()  # n one-token steps from an empty cache, as llama-bench's tg n
        for i in range(n):
            self.model.forward([(first + i) % self.model.vocab_size])

    def close(self):
        self.model = None


class LlamaCppEngine:
    name = "llama.cpp"

    def __init__(self, path: Path, threads: int, ctx: int):
        try:
            from llama_cpp import Llama
        except ImportError:
            raise BenchError("--vs llama.cpp needs llama-cpp-python: pip install "
                             "llama-cpp-python==0.3.36") from None
        t0 = time.perf_counter()
        self.llm = Llama(model_path=str(path), n_ctx=ctx, n_batch=ctx, n_ubatch=ctx,
                         n_threads=threads, n_threads_batch=threads, verbose=False)
        self.load_s = time.perf_counter() - t0

    def prompt(self, tokens) -> None:
        self.llm.reset()
        self.llm.eval(list(tokens))

    def generate(self, first: int, n: int) -> None:
        self.llm.reset()
        for i in range(n):
            self.llm.eval([(first + i) % self.llm.n_vocab()])

    def close(self):
        self.llm.close()


class TorchEngine:
    """The same file as a transformers model whose matrices are pylowbit.torch.Linear
    (pylowbit.torch.load_gguf: the file's bytes repacked, float32 activations, quantize_'s fusions
    and threads rule); generation through transformers' own generate()."""
    name = "torch"

    def __init__(self, path: Path, threads: int, ctx: int):
        try:
            import torch
            from pylowbit.torch.gguf_model import load_gguf
            import transformers  # noqa: F401
        except ImportError:
            raise BenchError('--vs torch needs torch and transformers: pip install "torch==2.13.0+cpu" '
                             'transformers, then "pylowbit[torch]"') from None
        self.torch = torch
        t0 = time.perf_counter()
        self.model = load_gguf(path)
        self.load_s = time.perf_counter() - t0
        torch.set_num_threads(threads)
        self.vocab = self.model.config.vocab_size

    def prompt(self, tokens) -> None:
        with self.torch.inference_mode():
            self.model(self.torch.tensor([list(tokens)]))

    def generate(self, first: int, n: int) -> None:
        ids = self.torch.tensor([[first % self.vocab]])
        with self.torch.inference_mode():  # n forwards: the 1-token prompt, then n - 1 steps
            self.model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                pad_token_id=0, eos_token_id=None)

    def close(self):
        self.model = None


def _peer_reads(path: Path, vs: str) -> bool:
    """Whether the peer engine `vs` runs this file."""
    fmt, foreign = file_format(path)
    if vs == "torch":  # pylowbit.torch.load_gguf: llama files, every matrix a format it multiplies
        from pylowbit.gguf import open_gguf
        f = open_gguf(path)
        try:
            return (f.metadata.get("general.architecture") == "llama"
                    and not any(k.startswith("prism.hadamard") for k in f.metadata))
        finally:
            f.close()
    return not foreign
