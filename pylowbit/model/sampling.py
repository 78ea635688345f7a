"""Next-token sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty, seeded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SamplerConfig:
    temperature: float = 0.0  # <= 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    min_p: float = 0.0  # 0: off; else drop candidates below min_p x the most likely one's probability
    repeat_penalty: float = 1.0  # 1: off
    repeat_last_n: int = 64
    seed: int | None = None

    def __post_init__(self):
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if self.repeat_penalty <= 0:
            raise ValueError(f"repeat_penalty must be > 0, got {self.repeat_penalty}")


class Sampler:
    def __init__(self, cfg: SamplerConfig | None = None):
        self.cfg = cfg or SamplerConfig()
        self._rng = None

    @property
    def rng(self) -> np.random.Generator:
        # made on first use: greedy decoding never draws, and numpy.random (with the hashlib /
        # libcrypto it imports) is ~6 MB resident.  The stream is the same as if made up front.
        if self._rng is None:
            self._rng = np.random.default_rng(self.cfg.seed)
        return self._rng

    def __call__(self, logits: np.ndarray, history=()) -> int:
        c = self.cfg
        penalize = c.repeat_penalty != 1.0 and len(history) and c.repeat_last_n
        if c.temperature <= 0 and not penalize:
            # float64 would not change the argmax (the conversion is exact): no 2 MB copy a token
            return int(np.argmax(logits))
        # one float64 array: a copy when penalized (the caller's logits are not changed)
        logits = np.array(logits, dtype=np.float64) if penalize else np.asarray(logits, dtype=np.float64)
        if penalize:
            recent = np.unique(np.asarray(history[-c.repeat_last_n:], dtype=np.int64))
            v = logits[recent]
            # llama.cpp's rule: shrink positive logits, push negative ones further down
            logits[recent] = np.where(v > 0, v / c.repeat_penalty, v * c.repeat_penalty)
        if c.temperature <= 0:
            return int(np.argmax(logits))
        idx = None  # the candidates' ids; None: the whole vocabulary, in order
        if c.top_k and c.top_k < len(logits):
            idx = np.argpartition(-logits, c.top_k - 1)[: c.top_k]
        # in place on one array (a 262k vocabulary: each temporary is 2 MB)
        p = (logits if idx is None else logits[idx]) / c.temperature
        p -= p.max()
        np.exp(p, out=p)
        p /= p.sum()
        if c.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            cum = np.cumsum(p[order])
            keep = order[: int(np.searchsorted(cum, c.top_p) + 1)]  # smallest set reaching top_p
            idx, p = (keep if idx is None else idx[keep]), p[keep] / p[keep].sum()
        if c.min_p > 0.0:
            keep = np.flatnonzero(p >= c.min_p * p.max())  # never empty: the maximum passes
            idx, p = (keep if idx is None else idx[keep]), p[keep] / p[keep].sum()
        k = int(self.rng.choice(len(p), p=p))
        return k if idx is None else int(idx[k])
