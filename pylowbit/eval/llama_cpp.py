"""llama.cpp's logits through llama-cpp-python's C API, for KL divergence against llama.cpp."""
from __future__ import annotations

import logging
import os

import numpy as np

from pylowbit._platform import usable_cpus

class LlamaCppChunks:
    """llama.cpp's logits of a chunk's scored rows through llama-cpp-python's C API, decoded as
    llama-perplexity decodes a chunk: one batch from an empty cache, outputs for the second half only.
    Without flash attention (llama-cpp-python's default) and without repacked weight buffers
    (llama-perplexity -nr): the AMX buffers of a native build fault where the OS grants no AMX tiles."""

    KV_TYPES = {"f32": 0, "f16": 1}  # ggml type ids

    def __init__(self, path, ctx: int, kv: str = "f32", threads: int | None = None):
        try:
            import llama_cpp
        except ImportError:
            raise ValueError("--vs llama.cpp needs llama-cpp-python: pip install llama-cpp-python==0.3.36") from None
        self._lc = lc = llama_cpp
        self._batch = self._ctx = self._model = None
        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # its log callback's switch
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.use_extra_bufts = False
        self._model = lc.llama_model_load_from_file(os.fsencode(path), mp)
        if not self._model:
            raise ValueError(f"llama.cpp could not load {path}")
        t = threads or usable_cpus()
        cp = lc.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = ctx
        cp.n_seq_max = 1
        cp.n_threads = cp.n_threads_batch = t
        cp.type_k = cp.type_v = self.KV_TYPES[kv]
        cp.flash_attn_type = 0  # disabled
        self._ctx = lc.llama_init_from_model(self._model, cp)
        if not self._ctx:
            self.close()
            raise ValueError(f"llama.cpp could not make a context of {ctx} for {path}")
        self.ctx = ctx
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self._model))
        self._batch = lc.llama_batch_init(ctx, 0, 1)

    def scored_logits(self, chunk, bos_id: int | None = None) -> np.ndarray:
        """(len(chunk) - 1 - len(chunk)//2, vocab) float32: a view of llama.cpp's output buffer,
        valid until the next call."""
        lc, ctx = self._lc, self._ctx
        n = len(chunk)
        if not 2 <= n <= self.ctx:
            raise ValueError(f"chunk of {n} tokens for a context of {self.ctx}")
        first = n // 2
        b = self._batch
        for k in range(n):
            b.token[k] = int(bos_id if k == 0 and bos_id is not None else chunk[k])
            b.pos[k] = k
            b.n_seq_id[k] = 1
            b.seq_id[k][0] = 0
            b.logits[k] = k >= first
        b.n_tokens = n
        lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
        rc = lc.llama_decode(ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with status {rc}")
        ptr = lc.llama_get_logits(ctx)
        return np.ctypeslib.as_array(ptr, shape=(n - first, self.n_vocab))[: n - 1 - first]

    def close(self) -> None:
        lc = self._lc
        if self._batch is not None:
            lc.llama_batch_free(self._batch)
        if self._ctx:
            lc.llama_free(self._ctx)
        if self._model:
            lc.llama_model_free(self._model)
        self._batch = self._ctx = self._model = None
