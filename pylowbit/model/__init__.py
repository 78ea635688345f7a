"""A minimal decoder for GGUF models: llama, qwen3, bitnet-b1.58, gemma3 and qwen35."""

from .config import ARCHS, Config, ModelError
from .forward import KVCache, Model, load_model
from .hadamard import HadamardError, Rotation, parse_rotation
from .sampling import Sampler, SamplerConfig
from .tokenizer import StreamDecoder, TextTokenizer

__all__ = ["ARCHS", "Config", "ModelError", "KVCache", "Model", "load_model", "HadamardError", "Rotation",
           "parse_rotation", "Sampler", "SamplerConfig", "StreamDecoder", "TextTokenizer", "generate"]


def generate(model: Model, tok: TextTokenizer, prompt_ids, n: int, sampler: Sampler | None = None,
             on_token=None, stop_at_eos: bool = True):
    """Feed prompt_ids (one batched forward), then sample up to n tokens one by one.
    Returns (generated ids, prompt seconds, generation seconds, generation forward passes)."""
    import time

    sampler = sampler or Sampler()
    history = list(prompt_ids)
    t0 = time.perf_counter()
    logits = model.forward(prompt_ids, pos=0)
    t1 = time.perf_counter()
    out, n_eval = [], 0
    for i in range(n):
        nxt = sampler(logits, history)
        logits = None  # not alive while the next ones are made (a 262k vocabulary: 1 MB each)
        out.append(nxt)
        history.append(nxt)
        if on_token is not None:
            on_token(nxt)
        if stop_at_eos and nxt in tok.stop_ids:
            break
        if i + 1 < n:
            if model.cache.n >= model.ctx:
                break
            logits = model.forward([nxt])
            n_eval += 1
    t2 = time.perf_counter()
    return out, t1 - t0, t2 - t1, n_eval
