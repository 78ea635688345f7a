"""Lossless repacking between block formats that hold the same codes.

A PQ2_0 block (fp16 d, 32 bytes = 128 two-bit codes) is two Q2_0 blocks (fp16 d, 16 bytes = 64
codes) sharing one scale: weight j of a PQ2_0 block sits in qs[j/4], so its first 16 code bytes
are the first Q2_0 block and the last 16 the second.  The reverse holds only when each pair of
Q2_0 blocks has one scale.
"""
from __future__ import annotations

import numpy as np

from pylowbit.core import QTensor, format_info


def _blocks(t: QTensor, fmt: str) -> np.ndarray:
    if t.fmt != fmt:
        raise ValueError(f"expected a {fmt} tensor, got {t.fmt}")
    return t.data.reshape(-1, t.info.type_size)


def pq2_0_to_q2_0(t: QTensor) -> QTensor:
    """PQ2_0 -> Q2_0, always exact."""
    b = _blocks(t, "pq2_0")
    out = np.empty((b.shape[0], 2, 18), dtype=np.uint8)
    out[:, :, :2] = b[:, None, :2]  # the scale, repeated
    out[:, 0, 2:] = b[:, 2:18]
    out[:, 1, 2:] = b[:, 18:34]
    return QTensor(out.reshape(-1), "q2_0", t.shape)


def q2_0_to_pq2_0(t: QTensor) -> QTensor:
    """Q2_0 -> PQ2_0; raises ValueError unless each pair of 64-blocks shares its scale."""
    if t.shape and t.shape[-1] % format_info("pq2_0").block_size:
        raise ValueError(f"row length {t.shape[-1]} is not a multiple of PQ2_0's block of 128")
    b = _blocks(t, "q2_0").reshape(-1, 2, 18)
    differ = np.flatnonzero((b[:, 0, :2] != b[:, 1, :2]).any(axis=1))
    if differ.size:
        raise ValueError(f"Q2_0 -> PQ2_0 would lose information: {differ.size} of {b.shape[0]} "
                         f"block pairs have two different scales (first at pair {differ[0]})")
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, :2] = b[:, 0, :2]
    out[:, 2:18] = b[:, 0, 2:]
    out[:, 18:] = b[:, 1, 2:]
    return QTensor(out.reshape(-1), "pq2_0", t.shape)
