"""Convert a GGUF file to another weight format: lossless transcodes, quantization, Hadamard folding.

    convert(src, dst, "q2_0", rotate=128, keep="q8_0")

Which tensors change:
- 2-D+ weight matrices (not norms, not token_embd / position_embd) whose row length is a multiple
  of the target block go to the target type.  Rows that do not fit stay as they are (or go to
  `keep`), with a notice.
- token_embd stays as it is unless `keep` names a type for it; 1-D tensors (norms, biases) stay
  as they are unless `keep` is a float type (f32/f16/bf16).

How:
- From a low-bit format (TQ1_0 TQ2_0 I2_S Q1_0 Q2_0 PQ2_0 PTQ1_0) to a block format: the codes are
  transcoded (pylowbit.transcode) and checked exact; anything that would change a value (a code the
  target lacks, scales a block cannot share, an fp32 scale fp16 cannot hold, a rotation of ternary
  codes, a float type that rounds) is refused with what would be lost, unless allow_lossy, which
  re-quantizes the dequantized values instead.
- From float or any other type (F32 F16 BF16 Q8_0 Q4_K Q6_K ..., decoded through gguf-py when
  pylowbit has no decoder): TQ1_0 TQ2_0 PTQ1_0 I2_S Q1_0 Q8_0 use their owners' rule (C codecs:
  d = max|w| per block, per tensor for I2_S, mean|w| for Q1_0; code = round-half-away(w/d) + 1).
  Q2_0 / PQ2_0 use a per-block scale search (`quantize_search`; method="absmax" for the owners'
  rule, method="search" to search the ternary formats' scales too): Q2_0's codes are -1, 0, +1,
  +2, so the best scale is often below max|w| and, for a block whose large weights are negative,
  negative.
- rotate=B folds x' = H(s * x) (H the normalized Sylvester Walsh-Hadamard of size B, s random +-1
  per input width, drawn from `seed`) into every foldable weight that is quantized to a block format:
  W' = W S H, each row w' = H(s * w).  token_embd, when re-encoded to a block format, is stored the
  same way, z = H(s * e), and listed as inverse: the decoder recovers e = s * (H z) after the
  lookup and, for a tied LM head, rotates the head's input like any folded weight (logits =
  Z H(s * h) = E h).  Tensors copied byte for byte stay unrotated and unlisted: each folded matmul
  is rotated on its own, so a partial list is exact.  The prism.hadamard.* keys are always written
  with the folded weights.

The output is written with pylowbit.gguf.write_gguf (an anonymous temporary file in the destination
directory, linked into place only when complete): an interrupted or killed conversion leaves no output
and never touches the input.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from pylowbit import core
from pylowbit.gguf import TYPES, GGUFFile, MetaValue, TensorSpec, ValueType, tensor_nbytes, type_id, write_gguf
from pylowbit.encode import (CHUNK_WEIGHTS, SEARCH, ConversionError, decode_float, encode,  # noqa: F401
                             quantize_q2, quantize_search, rotate_rows, signs_for)
from pylowbit.transcode import CODE_FORMATS, LOW_BIT, LossyError, transcode, transcode_problems

__all__ = ["convert", "plan", "quantize_search", "decode_float", "encode", "ConversionError", "TARGETS",
           "FLOAT_TYPES"]

FLOAT_TYPES = ("f32", "f16", "bf16")
TARGETS = FLOAT_TYPES + ("q8_0", "tq1_0", "tq2_0", "ptq1_0", "q2_0", "pq2_0", "q1_0", "i2_s")
FOLDABLE = re.compile(r"^(blk\.\d+\.(attn_q|attn_k|attn_v|attn_qkv|attn_gate|attn_output|"
                      r"ffn_gate|ffn_up|ffn_down|ssm_out)\.weight|output\.weight)$")
EMBED = "token_embd.weight"
# 2-D tensors that are tables or small parameters, never weight matrices to quantize
_NOT_MATRIX = re.compile(r"(^|\.)(token_embd|position_embd|token_types|per_layer_token_embd|rope_freqs|"
                         r"ssm_conv1d|ssm_a|ssm_d|ssm_dt)(\.|$)|norm")
HADAMARD = "prism.hadamard."
TRANSFORM = "normalized-sylvester-walsh-hadamard"
AXIS = "input-last-dimension"
# general.file_type (llama_ftype) of each target; Q2_0 and I2_S have none agreed upstream yet
FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32, "tq1_0": 36, "tq2_0": 37, "q1_0": 40,
              "pq2_0": 141, "ptq1_0": 143}


@dataclass
class Step:
    name: str
    src: str  # type names
    dst: str
    shape: tuple
    rotate: bool = False
    note: str = ""
    assigned: bool = False  # its type was chosen (target / keep), not merely kept

    @property
    def copy(self) -> bool:
        return self.src == self.dst and not self.rotate

# ---- planning ----------------------------------------------------------------------------------

def _type_fits(fmt: str, shape) -> bool:
    bs = TYPES[type_id(fmt)].block_size
    return shape[-1] % bs == 0  # (I2_S's block: its 128-weight group)


def plan(f: GGUFFile, to_type: str, keep: str | None = None, rotate: int | None = None,
         notice: Callable[[str], None] | None = None, only: str | None = None) -> list[Step]:
    """One Step per tensor (in file order): its output type and whether it is rotated.
    only: a regular expression; weight matrices whose names it does not match are left as they are."""
    steps = []
    pick = re.compile(only) if only else None
    for name, t in f.tensors.items():
        src, shape = t.fmt, tuple(t.shape)
        dst, note, assigned = src, "", True
        if len(shape) == 1:
            if keep in FLOAT_TYPES:
                dst = keep
            else:
                assigned = False
        elif name == EMBED or _NOT_MATRIX.search(name):
            if keep and _type_fits(keep, shape):
                dst = keep
            else:
                assigned = False
                if keep:
                    note = f"row length {shape[-1]} does not fit {keep}: kept as {src}"
        elif pick is not None and not pick.search(name):
            assigned = False
        elif _type_fits(to_type, shape):
            dst = to_type
        elif keep and _type_fits(keep, shape):
            dst, note = keep, f"row length {shape[-1]} does not fit {to_type}: stored as {keep}"
        else:
            assigned = False
            note = f"row length {shape[-1]} does not fit {to_type}: kept as {src}"
        steps.append(Step(name, src, dst, shape, note=note, assigned=assigned))
    if rotate:
        for s in steps:
            # Rotation exists to help quantization: fold it where a tensor is (re-)quantized to a
            # block format; float and merely kept tensors stay unrotated (and unlisted).
            s.rotate = (bool(FOLDABLE.match(s.name)) or s.name == EMBED) and s.assigned \
                and s.dst in CODE_FORMATS
        if not any(s.rotate and s.name != EMBED for s in steps):
            raise ConversionError(f"--rotate {rotate}: no foldable weight is quantized to a block format "
                                  f"here, so there is nothing to fold the rotation into")
        for s in steps:
            if s.rotate and s.shape[-1] % rotate:
                raise ConversionError(f"--rotate {rotate}: {s.name} has input width {s.shape[-1]}, not a "
                                      f"multiple of {rotate} (widths here: "
                                      f"{sorted({x.shape[-1] for x in steps if x.rotate})})")
    if notice:
        for s in steps:
            if s.note:
                notice(f"notice: {s.name}: {s.note}")
    return steps


def _lossy_problems(t, s: Step) -> list[tuple[str, int, int]] | None:
    """What converting this tensor would lose, when its source is a low-bit format (None: not
    subject to the lossless rule)."""
    if s.src not in LOW_BIT or s.copy:
        return None
    q = core.QTensor(t.data, s.src, s.shape)
    if s.rotate:
        nb = int(np.prod(s.shape)) // core.format_info(s.src).block_size
        return [("would be rotated: rotating codes gives values that must be re-quantized", nb, nb)]
    if s.dst in CODE_FORMATS:
        return transcode_problems(q, s.dst)
    # float target: exact when every value survives the cast
    x = q.dequantize()
    y = decode_float(encode(x, s.dst), s.dst, s.shape)
    bad = ~((x == y) | (np.isnan(x) & np.isnan(y)))
    if bad.any():
        return [(f"hold values that {s.dst} rounds (weights, not blocks)", int(bad.sum()), x.size)]
    return []


# ---- conversion --------------------------------------------------------------------------------

def _refuse_same_file(src: Path, dst: Path):
    if src.resolve() == dst.resolve():
        raise ConversionError(f"output {dst} is the input file: choose another output path")
    try:
        if dst.exists() and os.path.samefile(src, dst):
            raise ConversionError(f"output {dst} is the same file as the input {src} (a link to it)")
    except OSError:
        pass


def _metadata(f: GGUFFile) -> dict:
    """Source metadata with its exact GGUF value types."""
    out = {}
    for k, v in f.metadata.items():
        vt, et = f.metadata_types[k]
        if vt == ValueType.ARRAY and isinstance(v, np.ndarray) and v.dtype == bool:
            v = v.astype(np.uint8)
        out[k] = MetaValue(vt, v, et)
    return out


def convert(src, dst, to_type: str, rotate: int | None = None, keep: str | None = None,
            allow_lossy: bool = False, seed: int = 0, method: str = "auto", only: str | None = None,
            progress: Callable[[int, int, str], None] | None = None,
            notice: Callable[[str], None] | None = None) -> dict:
    """Convert GGUF file `src` into a new file `dst` whose weight matrices are `to_type` (the module
    docstring says which tensors change and how); `pylowbit quantize` is this function's command line.

    to_type: one of TARGETS (f32 f16 bf16 q8_0 tq1_0 tq2_0 ptq1_0 q2_0 pq2_0 q1_0 i2_s).
    rotate: fold a normalized Walsh-Hadamard rotation of this block (a power of two dividing every
        folded input width) into the quantized weights, with signs drawn from `seed`.
    keep: the type for token_embd, for matrices whose rows do not fit to_type and (a float type
        only) for 1-D tensors; None leaves them as they are.
    allow_lossy: re-quantize low-bit tensors that cannot be repacked exactly (else refused, with
        what would be lost, before anything is written).
    method: block scales when quantizing from float: "auto" (scale search for Q2_0 / PQ2_0, the
        owners' absmax rule for the ternary formats), "absmax", or "search" (for all of them).
    only: a regular expression; only the weight matrices whose names match are converted.
    progress(done_bytes, total_bytes, tensor_name) as tensors are written; notice(message) for a
        tensor kept because its rows do not fit.

    Returns a dict: "tensors" {name: (source type, output type, how: "copied", "repacked (exact)",
    "quantized", "converted", "re-quantized (lossy)", with "rotated+" before it when folded)},
    "rotated" [names of the folded tensors], "bytes" the output's size, "block" (rotate) and "seed".
    Raises ConversionError (a ValueError) on bad arguments or a refused lossy conversion.

        >>> r = convert("model-f16.gguf", "model-q2_0.gguf", "q2_0", rotate=128, keep="q8_0")
        >>> r["bytes"], len(r["rotated"])
    """
    src, dst = Path(src), Path(dst)
    to_type = to_type.lower()
    if method not in SEARCH:
        raise ConversionError(f"unknown method {method!r}; known: {', '.join(SEARCH)}")
    if to_type not in TARGETS:
        raise ConversionError(f"unknown target type {to_type!r}; known: {', '.join(TARGETS)}")
    if keep is not None:
        keep = keep.lower()
        if keep not in TARGETS:
            raise ConversionError(f"unknown --keep type {keep!r}; known: {', '.join(TARGETS)}")
    if rotate is not None:
        rotate = int(rotate)
        if rotate < 2 or rotate & (rotate - 1):
            raise ConversionError(f"--rotate {rotate}: the block size must be a power of two >= 2")
    _refuse_same_file(src, dst)
    if not dst.parent.is_dir():
        raise ConversionError(f"output directory {dst.parent} does not exist")

    f = GGUFFile(src)
    try:
        if rotate and any(k.startswith(HADAMARD) for k in f.metadata):
            raise ConversionError("the input is already Hadamard-rotated (prism.hadamard.* keys): "
                                  "rotating it again is not supported")
        steps = plan(f, to_type, keep, rotate, notice, only)

        # Refuse before writing anything: every lossy low-bit tensor, with what it would lose.
        if not allow_lossy:
            lossy = []
            for s in steps:
                p = _lossy_problems(f.tensors[s.name], s)
                if p:
                    lossy.append(LossyError(f"{s.name} ({s.src} -> {s.dst})", p))
            if lossy:
                more = f" (and {len(lossy) - 5} more tensors)" if len(lossy) > 5 else ""
                raise ConversionError("refusing a lossy conversion (pass --allow-lossy to re-quantize): " +
                                      "; ".join(str(e) for e in lossy[:5]) + more)

        signs = {}
        if rotate:
            for w in sorted({s.shape[-1] for s in steps if s.rotate}):
                signs[w] = signs_for(seed, w)
        meta = _metadata(f)
        if to_type in FILE_TYPES:
            meta["general.file_type"] = MetaValue(ValueType.UINT32, FILE_TYPES[to_type])
        else:
            meta.pop("general.file_type", None)  # a stale value would mislead
        if rotate:
            widths = sorted(signs)
            meta.update({
                HADAMARD + "version": MetaValue(ValueType.UINT32, 1),
                HADAMARD + "block_size": MetaValue(ValueType.UINT32, rotate),
                HADAMARD + "transform": MetaValue(ValueType.STRING, TRANSFORM),
                HADAMARD + "axis": MetaValue(ValueType.STRING, AXIS),
                HADAMARD + "sign_mode": MetaValue(ValueType.STRING, "explicit"),
                HADAMARD + "sign_widths": MetaValue(ValueType.ARRAY, widths, ValueType.INT32),
                HADAMARD + "sign_values": MetaValue(ValueType.ARRAY, np.concatenate([signs[w] for w in widths]),
                                                    ValueType.FLOAT32),
                HADAMARD + "weight_names": MetaValue(ValueType.ARRAY, [s.name for s in steps
                                                                       if s.rotate and s.name != EMBED],
                                                     ValueType.STRING),
                HADAMARD + "inverse_weight_names": MetaValue(ValueType.ARRAY, [s.name for s in steps
                                                                               if s.rotate and s.name == EMBED],
                                                             ValueType.STRING),
            })

        how = {}

        def produce(s: Step):
            t = f.tensors[s.name]
            if s.copy:
                how[s.name] = "copied"
                return t.data
            if s.src in LOW_BIT and s.dst in CODE_FORMATS and not s.rotate:
                q = core.QTensor(t.data, s.src, s.shape)
                try:
                    out = transcode(q, s.dst, what=f"{s.name} ({s.src} -> {s.dst})").data
                    how[s.name] = "repacked (exact)"
                    return out
                except LossyError:
                    if not allow_lossy:
                        raise
            kind = "converted" if s.dst in FLOAT_TYPES else "re-quantized (lossy)" if s.src in LOW_BIT \
                else "quantized"
            how[s.name] = ("rotated+" if s.rotate else "") + kind
            return _transcode(t.data, s, signs.get(s.shape[-1]) if s.rotate else None, rotate, method)

        tensors = [TensorSpec(s.name, type_id(s.dst), s.shape, (lambda s=s: produce(s))) for s in steps]
        write_gguf(dst, meta, tensors, f.alignment, progress=progress)
        size = dst.stat().st_size
    finally:
        f.close()
    return {"tensors": {s.name: (s.src, s.dst, how[s.name]) for s in steps},
            "rotated": [s.name for s in steps if s.rotate], "bytes": size, "block": rotate, "seed": seed}


def _transcode(data, s: Step, signs, block, method) -> np.ndarray:
    """Decode -> (rotate) -> encode, a slab of rows at a time to bound memory."""
    shape = s.shape
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    cols = shape[-1]
    if s.dst == "i2_s":  # one scale per tensor: needs the whole tensor at once
        x = decode_float(data, s.src, (rows, cols))
        if signs is not None:
            x = rotate_rows(x, block, signs)
        return encode(x, "i2_s", method)
    out = np.empty(tensor_nbytes(type_id(s.dst), shape), dtype=np.uint8)
    in_row = tensor_nbytes(type_id(s.src), (1, cols)) if s.src != "i2_s" else None
    out_row = out.size // rows
    step = max(1, CHUNK_WEIGHTS // cols)
    if s.src == "i2_s":  # a per-tensor scale: decode once
        xall = decode_float(data, s.src, (rows, cols))
    raw = np.asarray(data)
    for r in range(0, rows, step):
        r1 = min(rows, r + step)
        if s.src == "i2_s":
            x = xall[r:r1]
        else:
            x = decode_float(raw[r * in_row:r1 * in_row], s.src, (r1 - r, cols))
        if signs is not None:
            x = rotate_rows(x, block, signs)
        out[r * out_row:r1 * out_row] = encode(x, s.dst, method)
    return out
