"""Weights between float32 and the bytes of a GGUF tensor type: decode any type pylowbit or gguf-py
reads, encode to the conversion targets (the owners' rules, or a per-block scale search), and the
blockwise Hadamard rotation folded into rows.  pylowbit.convert's building blocks."""
from __future__ import annotations

import numpy as np

from pylowbit import core
from pylowbit.gguf import type_id
from pylowbit.transcode import CODE_FORMATS, pack_codes

CHUNK_WEIGHTS = 1 << 22  # rows are decoded / rotated / quantized this many weights at a time


class ConversionError(ValueError):
    pass


def decode_float(data: np.ndarray, fmt: str, shape) -> np.ndarray:
    """float32 values of raw tensor bytes of any type pylowbit or gguf-py can decode."""
    data = np.asarray(data)
    if fmt == "f32":
        return data.view("<f4").astype(np.float32).reshape(shape)
    if fmt == "f16":
        return data.view("<f2").astype(np.float32).reshape(shape)
    if fmt == "bf16":
        return (data.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if fmt in core.FORMATS:
        return core.dequantize(data, fmt, shape)
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    out = dequantize(data.reshape(rows, -1), GGMLQuantizationType(type_id(fmt)))
    return np.ascontiguousarray(out, dtype=np.float32).reshape(shape)


def _bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    # round to nearest even; NaN stays NaN (quiet bit kept)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r = np.where(np.isnan(x), ((u >> 16) | 0x40).astype(np.uint16), r)
    return r.view(np.uint8)


def quantize_search(x: np.ndarray, block: int, cmax: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int8 in -1..cmax) and fp16-exact block scales minimizing each block's squared error.

    cmax = 2 (Q2_0 / PQ2_0): codes cover [-d, 2d].  Candidates: the owners' d = max|w|, and f * s
    for f in 0.45..1 where s = max(max(-w), max(w) / 2) is the smallest d that clips nothing, and the
    same with d < 0 (which puts +2 on the negative side).
    cmax = 1 (ternary): d = f * max|w| for f from 0.15 to 1 (1 is the owners' rule).
    Each candidate is rounded to fp16 first and takes the nearest codes; the best is refined once by
    least squares.  Never worse than the owners' rule on any block."""
    X = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, block)
    codes = np.empty(X.shape, dtype=np.int8)
    scales = np.empty(X.shape[0], dtype=np.float32)
    step = max(1, CHUNK_WEIGHTS // block)
    for i in range(0, X.shape[0], step):
        c, d = _search(X[i:i + step], cmax)
        codes[i:i + step], scales[i:i + step] = c, d
    if not np.isfinite(scales).all():
        raise ConversionError("weights too large for fp16 block scales")
    return codes.reshape(-1), scales


def quantize_q2(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    return quantize_search(x, block, 2)


def _fit(X, d, cmax):
    d = d.astype(np.float16).astype(np.float32)
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=(d != 0) & np.isfinite(d))
    c = np.clip(np.rint(X * inv[:, None]), -1, cmax)
    e = X - c * d[:, None]
    e = np.einsum("ij,ij->i", e, e)
    return c, d, np.where(np.isfinite(d), e, np.inf)


def _search(X, cmax):
    pos, neg = X.max(axis=1), -X.min(axis=1)
    amax = np.maximum(pos, neg)
    best_c, best_d, best_e = _fit(X, amax, cmax)  # the owners' rule
    if cmax == 2:
        sp, sn = np.maximum(neg, pos / 2), np.maximum(pos, neg / 2)
        cands = [d for f in np.linspace(0.45, 1.0, 12, dtype=np.float32) for d in (sp * f, -sn * f)]
    else:
        cands = [amax * f for f in np.geomspace(0.15, 1.0, 20, dtype=np.float32)[:-1]]
    for d in cands:
        c, d, e = _fit(X, d, cmax)
        better = e < best_e
        best_c[better], best_d[better], best_e[better] = c[better], d[better], e[better]
    cc = np.einsum("ij,ij->i", best_c, best_c)
    d_ls = np.divide(np.einsum("ij,ij->i", X, best_c), cc, out=best_d.copy(), where=cc > 0)
    c, d, e = _fit(X, d_ls, cmax)
    better = e < best_e
    best_c[better], best_d[better] = c[better], d[better]
    return best_c.astype(np.int8), best_d


# Which formats the scale search serves, per `method`
SEARCH = {"auto": ("q2_0", "pq2_0"), "search": ("q2_0", "pq2_0", "tq1_0", "tq2_0", "ptq1_0"), "absmax": ()}


def encode(x: np.ndarray, fmt: str, method: str = "auto") -> np.ndarray:
    """Raw bytes of float32 x (rows, cols) in fmt; method picks the block-scale rule (SEARCH)."""
    if fmt == "f32":
        return np.ascontiguousarray(x, dtype="<f4").view(np.uint8).reshape(-1)
    if fmt == "f16":
        return np.ascontiguousarray(x, dtype="<f2").view(np.uint8).reshape(-1)
    if fmt == "bf16":
        return _bf16(x).reshape(-1)
    if not np.isfinite(x).all():
        raise ConversionError(f"non-finite weights cannot be quantized to {fmt}")
    if fmt in SEARCH[method]:
        c, d = quantize_search(x, core.format_info(fmt).block_size, CODE_FORMATS[fmt].cmax)
        return pack_codes(fmt, c, d, x.shape).data
    return core.quantize(np.ascontiguousarray(x, dtype=np.float32), fmt).data


# ---- the rotation ------------------------------------------------------------------------------

def signs_for(seed: int, width: int) -> np.ndarray:
    rng = np.random.default_rng([int(seed), int(width), 0x6861])
    return np.where(rng.random(width) < 0.5, -1.0, 1.0).astype(np.float32)


def rotate_rows(x: np.ndarray, block: int, signs: np.ndarray) -> np.ndarray:
    """Each row w -> H(s * w): the same transform the decoder applies to activations."""
    try:
        from pylowbit import fwht  # the C kernel
    except ImportError:  # pragma: no cover - while the extension is being built
        from pylowbit.model.hadamard import fwht_numpy

        return fwht_numpy(x, block, signs)
    return fwht(np.ascontiguousarray(x, dtype=np.float32), block=block, signs=signs,
                order="signs-then-rotate")
