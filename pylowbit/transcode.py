"""Lossless transcoding between block formats that hold the same codes (format to format; the
row interleave of a packed matrix is `pack`, native/src/pack.c).

Every low-bit format here stores `value = code * scale` with a small signed code and one scale per
block (docs/FORMATS.md): TQ1_0 / TQ2_0 (256, fp16), PTQ1_0 / PQ2_0 / Q1_0 (128, fp16), Q2_0 (64, fp16),
Q8_0 (32, fp16, int8 codes) and I2_S (one fp32 scale for the whole tensor).  A transcode unpacks the
codes and per-block scales (vectorized, numpy), checks that the target can hold them exactly, and
packs them again:

- codes: the target's code range (ternary formats hold -1..1; Q2_0/PQ2_0 also +2; Q1_0 only -1/+1;
  Q8_0 anything up to +-127).  I2_S and TQ2_0 are written ternary only, as their owners define them
  (bitnet.cpp reads I2_S code 3 as 0), although this library reads a stored code 3 as +2.
- scales: every source block inside one target block must carry the same scale (blocks whose codes
  are all zero are free: any scale gives zeros), and the scale must be representable (an I2_S fp32
  scale going to an fp16 format must round-trip through fp16 exactly).

What would be lost is reported per property and block count (`LossyError`), never silently done.
Each transcode is verified by decoding source and result with liblowbit's dequantizers and comparing
the float32 values exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pylowbit import _lowbit
from pylowbit.core import QTensor, format_info

__all__ = ["CODE_FORMATS", "LOW_BIT", "LossyError", "unpack_codes", "pack_codes", "transcode",
           "transcode_problems", "pq2_0_to_q2_0", "q2_0_to_pq2_0"]


@dataclass(frozen=True)
class CodeFormat:
    name: str
    block: int  # weights per scale (I2_S: the whole tensor, given as 0)
    scale_off: int  # byte offset of the fp16 scale in a block (-1: I2_S's fp32 tail)
    cmin: int  # code range the target may hold
    cmax: int
    nonzero: bool = False  # Q1_0: no zero code
    code_start: int = 0  # the block's code bytes [code_start, code_end): all but its fp16 scale
    code_end: int = 0


def _code_format(name: str, cmin: int, cmax: int, nonzero: bool = False) -> CodeFormat:
    """A CodeFormat whose block and scale offset are liblowbit's format facts (lowbit_type_facts)."""
    info = format_info(name)
    scale_off = _lowbit.type_facts(info.type_id)["scale_offset"]
    start, end = (2, info.type_size) if scale_off == 0 else (0, scale_off if scale_off > 0 else info.type_size)
    return CodeFormat(name, info.block_size if scale_off >= 0 else 0, scale_off, cmin, cmax, nonzero,
                      start, end)


CODE_FORMATS = {f.name: f for f in (
    _code_format("tq1_0", -1, 1),
    _code_format("tq2_0", -1, 1),
    _code_format("ptq1_0", -1, 1),
    _code_format("q2_0", -1, 2),
    _code_format("pq2_0", -1, 2),
    _code_format("q1_0", -1, 1, nonzero=True),
    _code_format("i2_s", -1, 1),
    _code_format("q8_0", -127, 127),
)}
# Formats whose conversion to anything else must not lose silently (Q8_0 is a "float-like" source).
LOW_BIT = ("tq1_0", "tq2_0", "ptq1_0", "q2_0", "pq2_0", "q1_0", "i2_s")


class LossyError(ValueError):
    """A conversion would change values; `problems` lists (property, blocks affected, blocks total)."""

    def __init__(self, what: str, problems: list[tuple[str, int, int]]):
        self.what = what
        self.problems = problems
        super().__init__(f"{what} would lose information: " +
                         "; ".join(f"{n} of {t} blocks {p}" for p, n, t in problems))


# ---- base-3 packing (TQ1_0 / PTQ1_0) --------------------------------------------------------------
# A block of qk weights is three runs: n0 = qk / 8 bytes of 5 trits (trit n of byte m is weight
# n*n0 + m), n1 = qk / 16 more bytes of 5 trits (weight 5*n0 + n*n1 + m), nh = qk / 64 qh bytes of 4
# trits, then the scale.  Bytes hold ceil(q * 256 / 243) for q the trits read most-significant first
# (a 4-trit byte is scaled as if it had 5).
BASE3_FORMATS = ("tq1_0", "ptq1_0")


def base3_runs(fmt: str) -> tuple[int, int, int]:
    """(n0, n1, nh) of a base-3 format's block: its sizes follow from its block size."""
    qk = format_info(fmt).block_size
    return qk // 8, qk // 16, qk // 64


_BASE3 = {f: base3_runs(f) for f in BASE3_FORMATS}
_POW3 = np.array([81, 27, 9, 3, 1], dtype=np.int32)
# Trit n of every byte value: ((uint8)(b * 3^n) * 3) >> 8, as the decoders compute it.
_TRITS = ((((np.arange(256)[:, None] * np.array([1, 3, 9, 27, 81])) & 0xFF) * 3) >> 8).astype(np.int8)


def _base3_pack(t: np.ndarray) -> np.ndarray:
    """t: (..., k, m) unsigned trits, k = 5 or 4 -> (..., m) bytes."""
    # 81, 27, 9, 3[, 1]: a 4-trit byte comes out already multiplied by 3
    q = np.tensordot(np.moveaxis(t.astype(np.int32), -2, -1), _POW3[:t.shape[-2]], axes=1)
    return ((q * 256 + 242) // 243).astype(np.uint8)


def _base3_unpack(b: np.ndarray, k: int) -> np.ndarray:
    """b: (..., m) bytes -> (..., k, m) trits."""
    return np.moveaxis(_TRITS[b][..., :k], -1, -2)


# ---- unpack / pack -----------------------------------------------------------------------------

def unpack_codes(t: QTensor) -> tuple[np.ndarray, np.ndarray, int]:
    """Signed codes (int8, flat, weight order), scales (float32, one per block) and the block size
    (the tensor size for I2_S) of a tensor in a CODE_FORMATS format."""
    f = CODE_FORMATS.get(t.fmt)
    if f is None:
        raise ValueError(f"{t.fmt} is not a block format with codes ({', '.join(CODE_FORMATS)})")
    n = int(np.prod(t.shape, dtype=np.int64)) if t.shape else 1
    raw = np.asarray(t.data)
    if f.name == "i2_s":
        nc = n // t.info.block_size * t.info.type_size  # the codes; the fp32 scale follows
        g = raw[:nc].reshape(-1, t.info.type_size)
        # byte p of a 128-group holds weights p, p+32, p+64, p+96 at shifts 6, 4, 2, 0
        c = np.stack([(g >> s) & 3 for s in (6, 4, 2, 0)], axis=1).reshape(-1)
        d = raw[nc:nc + 4].copy().view("<f4").astype(np.float32)
        return c.astype(np.int8) - 1, d, n
    b = raw.reshape(-1, t.info.type_size)
    nb = b.shape[0]
    d = b[:, f.scale_off:f.scale_off + 2].copy().view("<f2").reshape(-1).astype(np.float32)
    codes = b[:, f.code_start:f.code_end]
    if f.name in ("q2_0", "pq2_0"):  # weight j in qs[j/4] at bits 2*(j%4)
        qs = codes
        c = np.stack([(qs >> (2 * k)) & 3 for k in range(4)], axis=-1).reshape(nb, -1).astype(np.int8) - 1
    elif f.name == "tq2_0":  # element (j/32)*128 + n*32 + m in qs[j + m] at bits 2n
        qs = codes.reshape(nb, 2, 32)
        c = np.stack([(qs >> (2 * k)) & 3 for k in range(4)], axis=2).reshape(nb, 256).astype(np.int8) - 1
    elif f.name in _BASE3:
        n0, n1, nh = _BASE3[f.name]
        parts = [_base3_unpack(b[:, :n0], 5), _base3_unpack(b[:, n0:n0 + n1], 5),
                 _base3_unpack(b[:, n0 + n1:n0 + n1 + nh], 4)]
        c = np.concatenate([p.reshape(nb, -1) for p in parts], axis=1) - 1
    elif f.name == "q1_0":  # bit j%8 of qs[j/8]: set +1, clear -1
        bits = np.unpackbits(codes, axis=1, bitorder="little")
        c = bits.astype(np.int8) * 2 - 1
    else:  # q8_0
        c = codes.view(np.int8)
    return np.ascontiguousarray(c, dtype=np.int8).reshape(-1), d, f.block


def pack_codes(fmt: str, codes: np.ndarray, scales: np.ndarray, shape) -> QTensor:
    """Inverse of unpack_codes: codes must be in the format's range, scales representable."""
    f = CODE_FORMATS[fmt]
    n = codes.size
    if f.name == "i2_s":
        info = format_info(fmt)
        nc = n // info.block_size * info.type_size  # the codes; the fp32 scale follows
        g = (codes + 1).astype(np.uint8).reshape(-1, 4, info.type_size)
        out = np.zeros(_lowbit.tensor_nbytes(info.type_id, n), dtype=np.uint8)
        out[:nc] = ((g[:, 0] << 6) | (g[:, 1] << 4) | (g[:, 2] << 2) | g[:, 3]).reshape(-1)
        out[nc:nc + 4] = np.asarray(scales, dtype="<f4")[:1].view(np.uint8)
        return QTensor(out, fmt, shape)
    info = format_info(fmt)
    nb = n // f.block
    out = np.zeros((nb, info.type_size), dtype=np.uint8)
    out[:, f.scale_off:f.scale_off + 2] = np.asarray(scales, dtype="<f2").reshape(nb, 1).view(np.uint8)
    if f.name == "q8_0":
        out[:, f.code_start:f.code_end] = codes.reshape(nb, f.block).view(np.uint8)
        return QTensor(out.reshape(-1), fmt, shape)
    u = (codes + 1).astype(np.uint8).reshape(nb, f.block)
    if f.name in ("q2_0", "pq2_0"):
        u = u.reshape(nb, -1, 4)
        out[:, f.code_start:f.code_end] = u[..., 0] | (u[..., 1] << 2) | (u[..., 2] << 4) | (u[..., 3] << 6)
    elif f.name == "tq2_0":
        u = u.reshape(nb, 2, 4, 32)
        out[:, f.code_start:f.code_end] = (u[:, :, 0] | (u[:, :, 1] << 2) | (u[:, :, 2] << 4) |
                                           (u[:, :, 3] << 6)).reshape(nb, -1)
    elif f.name in _BASE3:
        n0, n1, nh = _BASE3[f.name]
        out[:, :n0] = _base3_pack(u[:, :5 * n0].reshape(nb, 5, n0))
        out[:, n0:n0 + n1] = _base3_pack(u[:, 5 * n0:5 * (n0 + n1)].reshape(nb, 5, n1))
        out[:, n0 + n1:n0 + n1 + nh] = _base3_pack(u[:, 5 * (n0 + n1):].reshape(nb, 4, nh))
    elif f.name == "q1_0":
        out[:, f.code_start:f.code_end] = np.packbits(u >> 1, axis=1, bitorder="little")
    return QTensor(out.reshape(-1), fmt, shape)


# ---- the transcode -------------------------------------------------------------------------------

def _plan(t: QTensor, fmt: str):
    """(codes, target scales, problems) for t -> fmt; problems empty means exact."""
    f = CODE_FORMATS.get(fmt)
    if f is None:
        raise ValueError(f"{fmt} is not a block format with codes ({', '.join(CODE_FORMATS)})")
    codes, scales, bs = unpack_codes(t)
    n = codes.size
    row = t.shape[-1] if t.shape else n
    bt = f.block or n
    if f.block and row % f.block:
        raise ValueError(f"row length {row} is not a multiple of the {fmt} block of {f.block}")
    group = format_info(fmt).block_size
    if fmt == "i2_s" and row % group:
        raise ValueError(f"row length {row} is not a multiple of the i2_s group of {group}")
    nt = n // bt
    problems = []

    bad = (codes < f.cmin) | (codes > f.cmax)
    if f.nonzero:
        bad |= codes == 0
    if bad.any():
        k = int(bad.reshape(nt, bt).any(axis=1).sum())
        used = sorted(set(np.unique(codes[bad]).tolist()))
        allowed = "-1 and +1" if f.nonzero else f"{f.cmin}..{f.cmax}"
        problems.append((f"use code(s) {used} ({fmt} holds {allowed})", k, nt))

    nz = (codes != 0).reshape(-1, bs).any(axis=1)  # blocks with a nonzero code need their scale
    if bt >= bs:
        r = bt // bs
        s = scales.reshape(nt, r)
        nzr = nz.reshape(nt, r)
        ref = s[np.arange(nt), np.argmax(nzr, axis=1)]  # first block that needs its scale
        mism = nzr & ~(s == ref[:, None])
        if mism.any():
            what = "the tensor's" if not f.block else f"one {bt}-block's"
            problems.append((f"of {bs} weights have a scale different from {what} other blocks "
                             f"({fmt} has one scale per {bt if f.block else 'tensor'})",
                             int(mism.sum()), nz.size))
        tnz = nzr.any(axis=1)
    else:
        ref = np.repeat(scales, bs // bt)
        tnz = (codes != 0).reshape(nt, bt).any(axis=1)
    if f.block:  # fp16 scales: must be exact
        h = ref.astype(np.float16).astype(np.float32)
        inexact = ~(h == ref) & tnz
        if inexact.any():
            problems.append((f"have a scale ({float(ref[inexact][0])!r}, ...) that fp16 cannot hold exactly",
                             int(inexact.sum()), nt))
        ref = np.where(tnz | np.isfinite(h), h, 0.0).astype(np.float32)  # all-zero blocks: any finite scale
    return codes, ref, problems


def transcode_problems(t: QTensor, fmt: str) -> list[tuple[str, int, int]]:
    """What t -> fmt would lose: [(property, blocks affected, blocks total)], empty when exact."""
    if t.fmt == fmt:
        return []
    return _plan(t, fmt)[2]


def transcode(t: QTensor, fmt: str, allow_lossy: bool = False, what: str = "") -> QTensor:
    """t re-encoded in fmt with the same codes; raises LossyError when that would change values.
    (With allow_lossy the codes are clamped / scales rounded: callers wanting a better lossy
    result re-quantize from the dequantized values instead.)"""
    if t.fmt == fmt:
        return t
    codes, scales, problems = _plan(t, fmt)
    label = what or f"{t.fmt} -> {fmt}"
    if problems and not allow_lossy:
        raise LossyError(label, problems)
    f = CODE_FORMATS[fmt]
    if problems:
        codes = np.clip(codes, f.cmin, f.cmax)
        if f.nonzero:
            codes = np.where(codes == 0, 1, codes).astype(np.int8)
    out = pack_codes(fmt, codes, scales, t.shape)
    if not problems:  # belt and braces: the C decoders must agree value for value
        a, b = t.dequantize(), out.dequantize()
        # bitwise first (fast); then by value, where +0 and -0 (a free block's new scale) agree
        if not np.array_equal(a.view(np.uint32), b.view(np.uint32)) and \
                not np.array_equal(a, b, equal_nan=True):
            raise RuntimeError(f"internal error: {label} transcode changed "
                               f"{int((a != b).sum())} values (please report)")
    return out


# The lead's original entry points, kept for callers.
def pq2_0_to_q2_0(t: QTensor) -> QTensor:
    """PQ2_0 -> Q2_0, always exact."""
    if t.fmt != "pq2_0":
        raise ValueError(f"expected a pq2_0 tensor, got {t.fmt}")
    return transcode(t, "q2_0")


def q2_0_to_pq2_0(t: QTensor) -> QTensor:
    """Q2_0 -> PQ2_0; raises ValueError unless each pair of 64-blocks shares its scale."""
    if t.fmt != "q2_0":
        raise ValueError(f"expected a q2_0 tensor, got {t.fmt}")
    return transcode(t, "pq2_0")
