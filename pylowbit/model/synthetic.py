"""Synthetic GGUF models: random weights in any format, a working tokenizer, optional folded rotation.

Used by the tests (tiny presets, every architecture x format) and by `pylowbit bench` (the BitNet
b1.58 2B shape).  Generation streams tensor by tensor: each tensor is made, packed and written
before the next one exists, so memory stays near one tensor.  Every tensor draws from its own
generator seeded by (seed, name), so two files with the same seed hold the same underlying weights
whatever else differs (format, rotation): that is what lets a test compare them.

The shapes (presets, each architecture's tensors) are in synthetic_shapes, the tokenizer in
synthetic_vocab; their names are imported from here too.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from ..gguf import TYPES, MetaValue, TensorSpec, ValueType, tensor_nbytes, type_id, write_gguf
from ..transcode import BASE3_FORMATS, CODE_FORMATS, base3_runs
from .hadamard import AXIS, TRANSFORM, fwht_numpy
from .synthetic_shapes import (GENERATOR_ARCHS, PRESET_ARCH, PRESETS, QWEN35_PRESETS, _arch_and_preset,  # noqa: F401
                               _dense_layout, _qwen35_layout, grouped_from_tiled, imrope_component,
                               qwen35_layer_kinds, synthetic_layout, synthetic_spec)
from .synthetic_vocab import CHAT_TEMPLATES, tokenizer_metadata  # noqa: F401

TERNARY = ("tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0")
ONE_BIT = ("q1_0",)  # sign and scale (the 1-bit Bonsai models)
FLOAT = ("q8_0", "f16", "f32")
WEIGHT_FORMATS = TERNARY + ONE_BIT + FLOAT


# ---------------------------------------------------------------------------------------------
# weights

def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _signs(seed: int, width: int) -> np.ndarray:
    return np.where(_rng(seed, f"prism.signs.{width}").random(width) < 0.5, -1.0, 1.0).astype(np.float32)


def random_matrix(seed: int, name: str, rows: int, cols: int, ternary: bool) -> np.ndarray:
    """float32 (rows, cols).  Ternary: codes in {-1,0,1} times an fp16-exact scale per row (per
    tensor for I2_S is handled by the caller), so the block quantizers reproduce it exactly."""
    rng = _rng(seed, name)
    if ternary:
        codes = rng.integers(-1, 2, size=(rows, cols), dtype=np.int8)
        scale = (0.5 + rng.random(rows, dtype=np.float32)) * np.float32(1.5 / np.sqrt(cols))
        scale = scale.astype(np.float16).astype(np.float32)
        return codes.astype(np.float32) * scale[:, None]
    return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(1.0 / np.sqrt(cols))


# Random ternary codes straight to packed bytes, for files too large for a float32 pass (a 27B
# model is ~27 G weights).  A random byte indexes a table of valid code bytes: 2-bit formats get 4
# base-3 digits (of the byte mod 81) as codes 0..2 (3 never appears); base-3 formats the byte
# ceil(q * 256 / 243) of 5 trits (q = byte mod 243) or, in a 4-trit qh byte, of 4 trits then * 3.
# The byte-to-weight order does not matter for uniformly random codes.
def _code_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b = np.arange(256)
    q4 = b % 81
    digits = [(q4 // 3 ** n) % 3 for n in range(4)]
    two_bit = sum(d << (2 * n) for n, d in enumerate(digits)).astype(np.uint8)
    trit5 = (((b % 243) * 256 + 242) // 243).astype(np.uint8)
    trit4 = ((q4 * 3 * 256 + 242) // 243).astype(np.uint8)
    return two_bit, trit5, trit4


_TWO_BIT, _TRIT5, _TRIT4 = _code_tables()


def _pairs(lut: np.ndarray) -> np.ndarray:
    """The table applied to two bytes at once (a little-endian uint16 index): numpy's gather costs
    about the same per element at either width, so half the elements take about half the time."""
    i = np.arange(1 << 16)
    return (lut[i & 255].astype("<u2") | (lut[i >> 8].astype("<u2") << 8)).astype("<u2")


_PAIRS = {id(t): _pairs(t) for t in (_TWO_BIT, _TRIT5)}


def _lookup(lut: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """lut[raw] for a C-contiguous uint8 array, the same bytes, through the two-byte table."""
    if raw.size % 2:
        return lut[raw]
    return _PAIRS[id(lut)][raw.reshape(-1).view("<u2")].view(np.uint8).reshape(raw.shape)


def _block(fmt: str):
    """(weights a block, bytes a block, fp16 scale offset, (start, end) of 4-trit qh bytes or None),
    from liblowbit's format facts; every other byte of a block is a code byte of the format's kind
    (docs/FORMATS.md layouts)."""
    f = CODE_FORMATS[fmt]
    info = TYPES[type_id(fmt)]
    qh = None
    if fmt in BASE3_FORMATS:
        n0, n1, nh = base3_runs(fmt)
        qh = (n0 + n1, n0 + n1 + nh)
    return info.block_size, info.type_size, f.scale_off, qh


_BLOCKS = {f: _block(f) for f in ("q2_0", "pq2_0", "tq2_0", "tq1_0", "ptq1_0")}
CODE_CHUNK_BYTES = 1 << 24  # bytes generated at a time: memory stays ~3x this


def ternary_scale(cols: int) -> np.float16:
    """The one scale of a random-code tensor: keeps a product's output ~ its input in size."""
    return np.float16(1.5 / np.sqrt(cols))


def random_ternary_bytes(seed: int, name: str, rows: int, cols: int, fmt: str):
    """Yields a random ternary (rows, cols) tensor's GGUF bytes in fmt, a chunk of rows at a time:
    uniform codes in {-1, 0, +1}, every block scaled by ternary_scale(cols)."""
    rng = _rng(seed, name)
    scale = np.frombuffer(np.array([ternary_scale(cols)], "<f2").tobytes(), np.uint8)
    if fmt == "i2_s":  # codes of the whole tensor, then the fp32 scale padded to the tail's size
        info = TYPES[type_id(fmt)]
        total = rows * cols // info.block_size * info.type_size
        for o in range(0, total, CODE_CHUNK_BYTES):
            yield _lookup(_TWO_BIT, np.frombuffer(rng.bytes(min(CODE_CHUNK_BYTES, total - o)), np.uint8))
        tail = np.zeros(tensor_nbytes(type_id(fmt), (rows, cols)) - total, np.uint8)
        tail[:4] = np.frombuffer(np.array([np.float32(ternary_scale(cols))], "<f4").tobytes(), np.uint8)
        yield tail
        return
    if fmt not in _BLOCKS:
        raise ValueError(f"no random-code writer for {fmt!r} (known: i2_s, {', '.join(_BLOCKS)})")
    per_block, nbytes, at, qh = _BLOCKS[fmt]
    if cols % per_block:
        raise ValueError(f"{name}: width {cols} is not a multiple of the {fmt} block of {per_block} weights")
    row_blocks = cols // per_block
    step = max(1, CODE_CHUNK_BYTES // (row_blocks * nbytes))
    lut = _TWO_BIT if qh is None else _TRIT5
    for r0 in range(0, rows, step):
        n = min(step, rows - r0) * row_blocks
        raw = np.frombuffer(rng.bytes(n * nbytes), np.uint8).reshape(n, nbytes)
        out = _lookup(lut, raw)
        if qh is not None:
            out[:, qh[0]:qh[1]] = _TRIT4[raw[:, qh[0]:qh[1]]]
        out[:, at:at + 2] = scale
        yield out


def random_q8_0_bytes(seed: int, name: str, rows: int, cols: int):
    """Yields a random Q8_0 (rows, cols) tensor's GGUF bytes, a chunk of rows at a time, with no
    float32 pass: uniform int8 codes in the format's range, every block scaled so that the values
    spread about as a standard normal's (the float path's embedding) do."""
    f = CODE_FORMATS["q8_0"]
    info = TYPES[type_id("q8_0")]
    if cols % info.block_size:
        raise ValueError(f"{name}: width {cols} is not a multiple of the q8_0 block of {info.block_size} weights")
    rng = _rng(seed, name)
    scale = np.float16(np.sqrt(3.0) / f.cmax)  # uniform codes in [-cmax, cmax]: stdev cmax / sqrt(3)
    scale = np.frombuffer(np.array([scale], "<f2").tobytes(), np.uint8)
    row_blocks = cols // info.block_size
    step = max(1, CODE_CHUNK_BYTES // (row_blocks * info.type_size))
    for r0 in range(0, rows, step):
        n = min(step, rows - r0) * row_blocks
        out = np.frombuffer(rng.bytes(n * info.type_size), np.uint8).reshape(n, info.type_size).copy()
        codes = out[:, f.code_start:f.code_end].view(np.int8)
        np.maximum(codes, f.cmin, out=codes)  # -128 is outside Q8_0's symmetric range
        out[:, f.scale_off:f.scale_off + 2] = scale
        yield out


def pack_i2_s_ternary(seed: int, name: str, rows: int, cols: int) -> np.ndarray:
    """A random ternary I2_S tensor built from codes directly, as one array."""
    return np.concatenate(list(random_ternary_bytes(seed, name, rows, cols, "i2_s")))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of float32 values, rounded to nearest even (finite values)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def pack(x: np.ndarray, fmt: str) -> np.ndarray:
    """Raw GGUF bytes of x in fmt."""
    if fmt == "bf16":
        return bf16_bits(x).view(np.uint8).reshape(-1)
    if fmt == "f32":
        return np.ascontiguousarray(x, dtype="<f4").view(np.uint8).reshape(-1)
    if fmt == "f16":
        return np.ascontiguousarray(x, dtype="<f2").view(np.uint8).reshape(-1)
    import pylowbit as lb

    return np.asarray(lb.quantize(np.ascontiguousarray(x, dtype=np.float32), fmt).data).reshape(-1)


def _check_widths(mats, fmt: str, embed_fmt: str, preset: str) -> None:
    """Every row must be whole blocks of its type (256 weights for TQ1_0/TQ2_0, 128 for I2_S...)."""
    for name, _, cols in mats:
        f = embed_fmt if name == "token_embd.weight" else fmt
        block = TYPES[type_id(f)].block_size
        if cols % block:
            raise ValueError(f"preset {preset!r}: {name} has width {cols}, not a multiple of the "
                             f"{f} block of {block} weights")


def write_synthetic_model(path, arch: str | None = None, fmt: str = "tq2_0", preset: str | None = None,
                          seed: int = 0, rotation_block: int | None = None, sign_mode: str = "explicit",
                          embed_fmt: str | None = None, gdn_v_grouped: bool = True, random_codes: bool = False,
                          progress: Callable[[int, int, str], None] | None = None, **overrides) -> Path:
    """Write a runnable GGUF model with random weights.  arch defaults to the preset's (llama for
    the dense presets, qwen35 for qwen35-tiny / bonsai2-27b) and preset to the arch's tiny one.
    rotation_block folds a Hadamard rotation of that block size into every foldable weight (and the
    embedding, inversely) and writes the prism.hadamard.* keys; for qwen35 gdn_v_grouped says
    whether ssm_out was folded in grouped V-head order (written as prism.hadamard.gdn_v_grouped).
    random_codes writes every ternary matrix (the embedding too, when ternary) as random codes
    straight to packed bytes (random_ternary_bytes), and a Q8_0 embedding likewise
    (random_q8_0_bytes), with no float32 pass: fast enough for a 27B file, and the bench's
    first model written in seconds.  The codes are random in the stored basis, so a rotation is only declared (metadata and
    signs), not folded, and files of different formats hold unrelated weights."""
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weight format {fmt!r} (known: {', '.join(WEIGHT_FORMATS)})")
    if random_codes and fmt not in TERNARY:
        raise ValueError(f"random_codes needs a ternary format ({', '.join(TERNARY)}), got {fmt!r}")
    arch, preset = _arch_and_preset(arch, preset)
    s = synthetic_spec(arch, preset, **overrides)
    meta, mats, vecs, others = _qwen35_layout(s) if arch == "qwen35" else _dense_layout(arch, s)
    meta["general.name"] = f"synthetic {arch} {preset} {fmt}"
    meta.update(tokenizer_metadata(arch, s["vocab_size"]))
    embed_fmt = embed_fmt or ("f32" if fmt == "f32" else "f16")
    ternary = fmt in TERNARY
    _check_widths(mats, fmt, embed_fmt, preset)

    # ssm_out's fold in grouped order: W_stored row = H(s * P(w_row)), so that
    # W_stored . H(s * P(x)) = P(w) . P(x) = w . x for the tiled-order x the recurrence produces
    col_perm = {}
    if arch == "qwen35" and rotation_block and gdn_v_grouped:
        idx = grouped_from_tiled(s["ssm_state"], s["ssm_groups"], s["ssm_heads"])
        col_perm = {n: idx for n, _, _ in mats if n.endswith(".ssm_out.weight")}

    folded = [n for n, _, _ in mats if n != "token_embd.weight"]
    signs = {}
    if rotation_block:
        B = int(rotation_block)
        widths = sorted({c for _, _, c in mats})
        if any(w % B for w in widths):
            raise ValueError(f"rotation block {B} does not divide every input width {widths}")
        if sign_mode == "explicit":
            signs = {w: _signs(seed, w) for w in widths}
        meta.update({
            "prism.hadamard.version": 1, "prism.hadamard.block_size": B,
            "prism.hadamard.transform": TRANSFORM, "prism.hadamard.axis": AXIS,
            "prism.hadamard.sign_mode": sign_mode,
            "prism.hadamard.weight_names": folded,
            "prism.hadamard.inverse_weight_names": ["token_embd.weight"],
        })
        if sign_mode == "explicit":
            meta["prism.hadamard.sign_widths"] = MetaValue(ValueType.ARRAY, widths, ValueType.INT32)
            meta["prism.hadamard.sign_values"] = np.concatenate([signs[w] for w in widths]).astype(np.float32)
        if arch == "qwen35":
            meta["prism.hadamard.gdn_v_grouped"] = bool(gdn_v_grouped)

    def make_matrix(name, rows, cols):
        """Yields the tensor's bytes in row blocks, so a 128k-row embedding never exists as float32 whole."""
        is_embd = name == "token_embd.weight"
        f = embed_fmt if is_embd else fmt
        if random_codes and f in TERNARY:
            yield from random_ternary_bytes(seed, name, rows, cols, f)
            return
        if random_codes and f == "q8_0":
            yield from random_q8_0_bytes(seed, name, rows, cols)
            return
        if not is_embd and fmt == "i2_s" and not rotation_block:
            yield pack_i2_s_ternary(seed, name, rows, cols)  # codes straight to bytes: no float pass
            return
        step = rows if f == "i2_s" else max(1, (1 << 22) // cols)  # I2_S has one scale per tensor
        for r0 in range(0, rows, step):
            n = min(step, rows - r0)
            part = f"{name}#{r0}" if r0 else name  # the first block keeps the tensor's own stream
            if is_embd:
                x = _rng(seed, part).standard_normal((n, cols), dtype=np.float32)
                if arch == "gemma3":
                    x *= np.float32(1.0 / np.sqrt(cols))  # the forward pass scales it back up by sqrt(d)
            else:
                x = random_matrix(seed, part, n, cols, ternary)
                if fmt == "i2_s":
                    x = np.sign(x) * np.float32(np.abs(x).max())
            if rotation_block:
                if name in col_perm:
                    x = x[:, col_perm[name]]
                # W' = W S H (rows: H(s*w)); the embedding table likewise, since e = s * (H z) undoes it
                x = fwht_numpy(x.astype(np.float64), int(rotation_block), signs.get(cols)).astype(np.float32)
            yield pack(x, f)

    def make_vector(name, n):
        return (1.0 + 0.1 * _rng(seed, name).standard_normal(n)).astype("<f4").view(np.uint8)

    def make_other(name, f, shape, values):
        x = np.asarray(values(_rng(seed, name), shape), dtype=np.float32)
        return pack(x, f)

    tensors = []
    for name, rows, cols in mats:
        f = embed_fmt if name == "token_embd.weight" else fmt
        tensors.append(TensorSpec(name, type_id(f), (rows, cols),
                                  (lambda n=name, r=rows, c=cols: make_matrix(n, r, c))))
    for name, n in vecs:
        tensors.append(TensorSpec(name, 0, (n,), (lambda nm=name, k=n: make_vector(nm, k))))
    for name, f, shape, values in others:
        tensors.append(TensorSpec(name, type_id(f), shape,
                                  (lambda nm=name, ff=f, sh=shape, v=values: make_other(nm, ff, sh, v))))
    return write_gguf(path, meta, tensors, progress=progress)
