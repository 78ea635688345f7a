"""Weights of a GGUF model: matrices as pylowbit QTensors over the mapped file (zero copy), norm
vectors as float32, and decode-at-load for types without a pylowbit kernel."""

from __future__ import annotations

import mmap
import sys
from collections import Counter
from typing import Callable

import numpy as np

from .. import _lowbit, _ops
from .. import core as lb
from ..gguf import TYPES, GGUFFile, TensorInfo, type_id
from .config import Config, ModelError
from .hadamard import Rotation

# Types liblowbit has GEMV/GEMM kernels for (its weight types): used straight from the mapped file.
KERNEL_FORMATS = frozenset(_lowbit.type_info(t)[0] for t in _lowbit.weight_types())
FOREIGN_POLICIES = ("q8_0", "f16", "f32")


def _gguf_dequantize(data: np.ndarray, tid: int, shape) -> np.ndarray:
    """Decode a type pylowbit has no kernel for through gguf-py's numpy dequantizers."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    try:
        qt = GGMLQuantizationType(tid)
    except ValueError:
        raise ModelError(f"no decoder for GGML type {TYPES[tid].name}") from None
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    out = dequantize(np.asarray(data).reshape(rows, -1), qt)
    return np.ascontiguousarray(out, dtype=np.float32).reshape(shape)


def anon_array(shape, dtype=np.uint8) -> np.ndarray:
    """Zeroed memory in its own anonymous mapping: pages are paid for once written and go back to
    the system as a whole when freed.  (Long-lived buffers from malloc's heap pin the freed
    temporaries below them, and np.zeros asks for transparent huge pages on large arrays, committing
    2 MB at the first write: docs/PERFORMANCE.md#decoder-memory.)"""
    n = int(np.prod(shape, dtype=np.int64))
    nbytes = n * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype, count=n).reshape(shape)


# Legacy 32-weight blocks whose codes fit Q8_0's int8 with the same fp16 scale:
# Q4_0 (d, qs[16]): value d * (nibble - 8);  Q5_0 (d, qh u32, qs[16]): value d * (5-bit code - 16).
# Weight j < 16 is the low nibble of qs[j], weight j + 16 the high one; Q5_0's fifth bit of weight
# j is bit j of qh.  (Facts from ggml's block_q4_0 / block_q5_0.)
_LOSSLESS_TO_Q8_0 = {"q4_0": 8, "q5_0": 16}  # code offset
_Q5_SHIFTS = np.arange(32, dtype=np.uint32)


def _legacy_to_q8_0(src: np.ndarray, fmt: str, dst: np.ndarray) -> None:
    """Q4_0 / Q5_0 blocks src (nb, 18 or 22) -> Q8_0 blocks dst (nb, 34), exactly."""
    dst[:, :2] = src[:, :2]  # the fp16 scale, unchanged
    qs = src[:, -16:]
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1)  # (nb, 32) codes 0..15
    if fmt == "q5_0":
        qh = np.ascontiguousarray(src[:, 2:6]).view("<u4")  # (nb, 1)
        q |= (((qh >> _Q5_SHIFTS) & 1) << 4).astype(np.uint8)
    dst[:, 2:] = q - np.uint8(_LOSSLESS_TO_Q8_0[fmt])  # wraps to the int8 bytes of code - offset


def convert_foreign(t: TensorInfo, fmt: str, chunk_bytes: int = 1 << 20) -> np.ndarray:
    """A tensor of a type without kernels as `fmt` (q8_0, f16 or f32) bytes, converted a chunk of
    rows at a time (temporaries stay ~chunk_bytes of float32) into an anon_array.  Q4_0 / Q5_0 go
    to Q8_0 without loss; other types through gguf-py's dequantizer and pylowbit's quantizer."""
    ti = TYPES[t.type_id]
    cols = t.shape[-1]
    rows = t.n_elements // cols if cols else 0
    to = TYPES[type_id(fmt)]
    src_row = cols // ti.block_size * ti.type_size
    dst_row = cols // to.block_size * to.type_size
    out = anon_array((rows, dst_row))
    src = np.asarray(t.data).reshape(rows, src_row)
    step = max(1, chunk_bytes // (4 * max(cols, 1)))
    for r in range(0, rows, step):
        s = src[r:r + step]
        if fmt == "q8_0" and t.fmt in _LOSSLESS_TO_Q8_0:
            nb = s.shape[0] * cols // to.block_size
            _legacy_to_q8_0(s.reshape(nb, -1), t.fmt, out[r:r + step].reshape(nb, to.type_size))
            continue
        x = _gguf_dequantize(s, t.type_id, (s.shape[0], cols))
        if fmt == "q8_0":
            out[r:r + step] = np.asarray(lb.quantize(x, "q8_0").data).reshape(s.shape[0], dst_row)
        else:
            out[r:r + step] = x.astype(np.float16 if fmt == "f16" else np.float32).view(np.uint8)
    return out.reshape(-1)


def bf16_to_f32(data) -> np.ndarray:
    """The bytes of the float32 values of a BF16 tensor (exact: BF16 is float32's upper 16 bits)."""
    b = np.frombuffer(data, dtype="<u2")
    out = anon_array((b.size,), np.uint32)
    np.left_shift(b, 16, out=out, dtype=np.uint32)
    return out.view(np.uint8)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to BF16 (nearest even; NaN stays a quiet NaN), as float32: what llama.cpp's BF16
    dot product multiplies a BF16 matrix with.  The matrix itself is exact in F32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) & np.uint32(0xFFFF0000)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        r = np.where(nan, (u & np.uint32(0xFFFF0000)) | np.uint32(0x00400000), r)
    return r.view(np.float32)


class GroupedHeads:
    """P of prism.hadamard.gdn_v_grouped: (T, D_v) from llama.cpp's tiled V-head order (slot
    rho * Hk + kappa) to the grouped order ssm_out was folded in (slot kappa * r + rho)."""

    def __init__(self, s):
        self.r, self.hk, self.dh = s.n_v_heads // s.n_k_heads, s.n_k_heads, s.state_size

    def __call__(self, x: np.ndarray) -> np.ndarray:
        T = x.shape[0]
        return np.ascontiguousarray(x.reshape(T, self.r, self.hk, self.dh).transpose(0, 2, 1, 3)).reshape(T, -1)


def prep_name(prepare) -> str | None:
    """The name of a Linear's input preparation, as the C decoder knows it (_ops.INPUT_PREPS)."""
    if prepare is None:
        return None
    if prepare is round_bf16:
        return "round_bf16"
    if isinstance(prepare, GroupedHeads):
        return "grouped_heads"
    raise ValueError(f"unknown input preparation {prepare!r}")


def dequantize_info(t: TensorInfo) -> np.ndarray:
    """float32 copy of any tensor (reference paths and small vectors)."""
    if t.fmt == "f32":
        return np.frombuffer(t.data, dtype="<f4").reshape(t.shape).astype(np.float32)
    if t.fmt == "f16":
        return np.frombuffer(t.data, dtype="<f2").reshape(t.shape).astype(np.float32)
    if t.fmt == "bf16":
        return bf16_to_f32(t.data).view(np.float32).reshape(t.shape)
    if t.fmt in KERNEL_FORMATS:
        return np.asarray(lb.dequantize(t.data, t.fmt, t.shape), dtype=np.float32).reshape(t.shape)
    return _gguf_dequantize(t.data, t.type_id, t.shape)


class Linear:
    """y[T, rows] = x[T, cols] . W^T; W a QTensor.  A folded rotation rotates x first."""

    def __init__(self, name: str, w, rot: Rotation | None = None, on_change: Callable[[], None] | None = None):
        self.name = name
        self.on_change = on_change  # called when the matrix is swapped: a decoder holds its pointer
        self.w = w
        self.rot = rot
        self.prepare = None  # an input transform before the rotation: round_bf16, GroupedHeads
        self.rows, self.cols = w.shape

    @property
    def w(self):
        return self._w

    @w.setter
    def w(self, w):
        self._w = w
        # the liblowbit matrix of a PackedTensor, called directly (and by LinearGroup and the C
        # decoder); None for anything else, which goes through w.gemm_into (tests swap w for recorders)
        self.m = getattr(w, "_m", None)

    @property
    def m(self):
        return self._mat

    @m.setter
    def m(self, m):
        self._mat = m
        if self.on_change is not None:
            self.on_change()

    def __call__(self, x: np.ndarray, threads: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        # x: (T, cols) float32; out: (T, rows) float32 to write, or None for a new array
        if self.prepare is not None:
            x = self.prepare(x)
        if self.rot is not None:
            x = self.rot.rotate(x)
        x = np.ascontiguousarray(x, dtype=np.float32)
        if out is None:
            out = np.empty((x.shape[0], self.rows), dtype=np.float32)
        if self.m is not None:  # the shortest path to C
            _lowbit.gemm_multi((self.m,), x, (out,), threads or 0)
            return out
        return self.w.gemm_into(x, out, threads)


class LinearGroup:
    """Linears that read the same input (a layer's q, k, v): when all are packed (PackedTensor) and
    share their input rotation, one liblowbit call runs them all: one activation quantization and
    one thread-pool job instead of one of each per matrix.  Otherwise one call each.  Returns one
    (T, rows) array per linear: the caller's `out` arrays if given, else those of a one-token call
    are reused by the next one-token call (the decoder consumes them within the layer)."""

    def __init__(self, *linears: Linear):
        self.linears = linears
        self.rot, self.prep = linears[0].rot, linears[0].prepare
        self._same_rot = all(lin.rot is self.rot and lin.prepare is self.prep for lin in linears)
        self._one = tuple(np.empty((1, lin.rows), dtype=np.float32) for lin in linears)

    def _prepare(self, x: np.ndarray, out=None):
        """(matrices, input, outputs) of the one-call path, or None for one call each.  The
        matrices are looked up per call: tests swap a linear's weights for recorders."""
        mats = tuple([lin.m for lin in self.linears])
        if None in mats or not self._same_rot:
            return None
        if self.prep is not None:
            x = self.prep(x)
        if self.rot is not None:
            x = self.rot.rotate(x)
        x = np.ascontiguousarray(x, dtype=np.float32)
        T = x.shape[0]
        if out is not None:
            outs = tuple(out)
        elif T == 1:
            outs = self._one
        else:
            outs = tuple(np.empty((T, lin.rows), dtype=np.float32) for lin in self.linears)
        return mats, x, outs

    def __call__(self, x: np.ndarray, threads: int | None = None, out=None):
        """out: one (T, rows) float32 array per linear to write, or None."""
        call = self._prepare(x, out)
        if call is None:
            outs = out if out is not None else (None,) * len(self.linears)
            return tuple(lin(x, threads, o) for lin, o in zip(self.linears, outs))
        _lowbit.gemm_multi(*call, threads or 0)
        return call[2]


class GatedFFN(LinearGroup):
    """act(gate(x)) * up(x), the input of ffn_down, in one liblowbit call: the activation is
    applied to each row tile as soon as both of its products are done, on every thread."""

    def __init__(self, gate: Linear, up: Linear, act: str):
        super().__init__(gate, up)
        self.act = act
        self._act_id = _ops.ACTIVATIONS[act]

    def __call__(self, x: np.ndarray, threads: int | None = None, out=None) -> np.ndarray:
        """out: (gate, up) (T, rows) float32 arrays to write (the result is gate's), or None."""
        call = self._prepare(x, out)
        if call is None:
            g, u = (lin(x, threads, o) for lin, o in zip(self.linears, out or (None, None)))
            return _ops.act_mul(self.act, g, u, g)
        (gate, up), x, (g, u) = call
        _lowbit.gemm_glu(gate, up, self._act_id, x, g, u, threads or 0)
        return g


class Embedding:
    """Row lookup from the mapped table, decoding only the rows asked for."""

    def __init__(self, t: TensorInfo, rot: Rotation | None):
        self.t = t
        self.rows, self.cols = t.shape
        self.rot = rot if (rot is not None and t.name in rot.inverse_names) else None
        ti = TYPES[t.type_id]
        if t.fmt == "i2_s":
            self.row_bytes = self.cols // 4
            self.tail = np.asarray(t.data[-32:])
        else:
            self.row_bytes = self.cols // ti.block_size * ti.type_size
        self.table = np.asarray(t.data[: self.rows * self.row_bytes]).reshape(self.rows, self.row_bytes)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if tokens.size == 1:  # a decode step: one id checked and one row sliced, in plain Python
            tok = int(tokens[0])
            if not 0 <= tok < self.rows:
                raise ModelError(f"token id {tok} out of range 0..{self.rows - 1}")
            raw = self.table[tok:tok + 1]
        else:
            if tokens.size and (tokens.min() < 0 or tokens.max() >= self.rows):
                bad = tokens[(tokens < 0) | (tokens >= self.rows)][0]
                raise ModelError(f"token id {bad} out of range 0..{self.rows - 1}")
            raw = self.table[tokens]  # (T, row_bytes) gathered bytes
        shape = (len(tokens), self.cols)
        fmt = self.t.fmt
        if fmt == "f32":
            x = raw.view("<f4").astype(np.float32)
        elif fmt == "f16":
            x = raw.view("<f2").astype(np.float32)
        elif fmt == "i2_s":  # per-tensor scale lives in the tail: re-attach it to the gathered rows
            buf = np.concatenate([raw.reshape(-1), self.tail])
            x = np.asarray(lb.dequantize(buf, fmt, shape), dtype=np.float32).reshape(shape)
        elif fmt in KERNEL_FORMATS:  # whole rows of whole blocks: the codec directly
            x = _lowbit.dequantize(np.ascontiguousarray(raw).reshape(-1), self.t.type_id,
                                   shape[0] * shape[1]).reshape(shape)
        else:
            x = _gguf_dequantize(raw, self.t.type_id, shape)
        if self.rot is not None:
            x = self.rot.unrotate_embedding(x)
        return x


def stderr_notice(msg: str) -> None:
    print(msg, file=sys.stderr)


class Weights:
    """All tensors of one model.  layers[i] is a dict: 'attn_q' -> Linear, 'attn_norm' -> ndarray...,
    and the groups the decoder calls: 'attn_in' (q, k, v), 'gdn_in' and 'ffn_glu' (act(gate) * up)."""

    MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

    def __init__(self, f: GGUFFile, cfg: Config, rot: Rotation | None, foreign: str = "q8_0",
                 notice: Callable[[str], None] | None = stderr_notice, pack: bool = True):
        self.pack = pack
        self.on_matrix_change: Callable[[], None] | None = None  # set by the model: its decoder is stale
        if foreign not in FOREIGN_POLICIES:
            raise ValueError(f"foreign must be one of {FOREIGN_POLICIES}, got {foreign!r}")
        self.f, self.cfg, self.rot, self.foreign = f, cfg, rot, foreign
        self._converted: Counter = Counter()
        self.token_embd = Embedding(f.tensor("token_embd.weight"), rot)
        if self.token_embd.cols != cfg.d_model:
            raise ModelError(f"token_embd.weight has width {self.token_embd.cols}, model width is {cfg.d_model}")
        self.output_norm = self.vector("output_norm.weight", cfg.d_model)
        if "output.weight" in f.tensors:
            self.output = self.linear("output.weight", (cfg.vocab_size, cfg.d_model))
        else:  # tied head: the embedding table, rotated input if the table is stored rotated
            self.output = self.linear("token_embd.weight", (cfg.vocab_size, cfg.d_model),
                                      rotated=self.token_embd.rot is not None)
        self.layers = [self._gdn_layer(i) if cfg.is_recurrent(i) else self._attention_layer(i)
                       for i in range(cfg.n_layer)]
        if self._converted and notice is not None:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(self._converted.items()))
            notice(f"notice: no pylowbit kernel for {kinds} tensors: decoded at load and kept as {foreign}")

    def _ffn(self, i: int, layer: dict) -> None:
        """The feed-forward half every block kind shares: its norm, gate / up / down, act(gate) * up."""
        cfg, p = self.cfg, f"blk.{i}."
        d, ff = cfg.d_model, cfg.n_ff
        # qwen35 names the pre-FFN norm post_attention_norm (its only second norm)
        layer["ffn_norm"] = self.vector(p + ("post_attention_norm" if cfg.arch == "qwen35" else "ffn_norm")
                                        + ".weight", d)
        for k, shape in (("ffn_gate", (ff, d)), ("ffn_up", (ff, d)), ("ffn_down", (d, ff))):
            layer[k] = self.linear(f"{p}{k}.weight", shape)
        if cfg.sub_norms:
            layer["ffn_sub_norm"] = self.vector(p + "ffn_sub_norm.weight", ff)
        if cfg.post_norms:
            layer["post_ffw_norm"] = self.vector(p + "post_ffw_norm.weight", d)
        layer["ffn_glu"] = GatedFFN(layer["ffn_gate"], layer["ffn_up"], cfg.ffn_act)

    def _attention_layer(self, i: int) -> dict:
        cfg, p, d = self.cfg, f"blk.{i}.", self.cfg.d_model
        H, Hkv, hd, vd = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim
        q_rows = H * hd * (2 if cfg.attn_gate else 1)  # gated: query and gate interleaved per head
        shapes = {"attn_q": (q_rows, d), "attn_k": (Hkv * hd, d), "attn_v": (Hkv * vd, d),
                  "attn_output": (d, H * vd)}
        layer = {k: self.linear(f"{p}{k}.weight", s) for k, s in shapes.items()}
        layer["attn_norm"] = self.vector(p + "attn_norm.weight", d)
        if cfg.qk_norm:
            layer.update(attn_q_norm=self.vector(p + "attn_q_norm.weight", hd),
                         attn_k_norm=self.vector(p + "attn_k_norm.weight", hd))
        if cfg.sub_norms:
            layer["attn_sub_norm"] = self.vector(p + "attn_sub_norm.weight", d)
        if cfg.post_norms:
            layer["post_attention_norm"] = self.vector(p + "post_attention_norm.weight", d)
        layer["attn_in"] = LinearGroup(layer["attn_q"], layer["attn_k"], layer["attn_v"])
        self._ffn(i, layer)
        return layer

    def _gdn_layer(self, i: int) -> dict:
        """A Gated-DeltaNet layer (QWEN35.md 3.4): the input projections, conv taps, gates' constants,
        the gated norm and ssm_out.  ssm_alpha / ssm_beta read the unrotated input."""
        cfg, p, d, s = self.cfg, f"blk.{i}.", self.cfg.d_model, self.cfg.ssm
        layer = {"attn_norm": self.vector(p + "attn_norm.weight", d)}
        for k, rows in (("attn_qkv", s.conv_channels), ("attn_gate", s.value_dim), ("ssm_beta", s.n_v_heads),
                        ("ssm_alpha", s.n_v_heads)):
            layer[k] = self.linear(f"{p}{k}.weight", (rows, d))
        layer["ssm_out"] = self.linear(p + "ssm_out.weight", (d, s.value_dim))
        if layer["ssm_out"].rot is not None and self.rot.gdn_v_grouped:
            if layer["ssm_out"].prepare is not None:
                raise ModelError(f"{p}ssm_out.weight: a BF16 matrix cannot take a folded rotation")
            layer["ssm_out"].prepare = GroupedHeads(s)
        layer["ssm_conv1d"] = self.vector(p + "ssm_conv1d.weight", (s.conv_channels, s.conv_kernel), f32_only=True)
        layer["ssm_a"] = self.vector(p + "ssm_a", s.n_v_heads, f32_only=True)
        layer["ssm_dt"] = self.vector(p + "ssm_dt.bias", s.n_v_heads, f32_only=True)
        layer["ssm_norm"] = self.vector(p + "ssm_norm.weight", s.state_size)
        proj = (layer["attn_qkv"], layer["attn_gate"], layer["ssm_beta"], layer["ssm_alpha"])
        if all(lin.rot is proj[0].rot and lin.prepare is proj[0].prepare for lin in proj):
            layer["gdn_in"] = (LinearGroup(*proj),)  # one call for the four
        else:  # alpha / beta read the unrotated input (and BF16 ones a rounded copy)
            layer["gdn_in"] = (LinearGroup(*proj[:2]), LinearGroup(*proj[2:]))
        self._ffn(i, layer)
        return layer

    def _matrix_changed(self) -> None:
        if self.on_matrix_change is not None:
            self.on_matrix_change()

    def all_linears(self):
        """Every Linear of the model, the head first (tests wrap them to record their inputs)."""
        yield self.output
        for layer in self.layers:
            yield from (v for v in layer.values() if isinstance(v, Linear))

    def vector(self, name: str, n, f32_only: bool = False) -> np.ndarray:
        """A small float32 tensor of shape (n,) (or n itself when a tuple).  f32_only: the tensor
        must be stored as F32 (llama.cpp has no other kernel for it: a wrong type is a bad file)."""
        t = self.f.tensor(name)
        shape = tuple(n) if isinstance(n, tuple) else (n,)
        if tuple(t.shape) != shape:
            raise ModelError(f"{name} has shape {t.shape}, expected {shape}")
        if f32_only and t.fmt != "f32":
            raise ModelError(f"{name} has type {t.fmt}, expected f32")
        return np.ascontiguousarray(dequantize_info(t), dtype=np.float32)

    def linear(self, name: str, shape: tuple[int, int], rotated: bool | None = None) -> Linear:
        t = self.f.tensor(name)
        if tuple(t.shape) != tuple(shape):
            raise ModelError(f"{name} has shape {t.shape}, expected {shape}")
        if t.fmt in KERNEL_FORMATS:
            w = lb.QTensor(t.data, t.fmt, t.shape)
            if self.pack and lb.packing_pays_off():
                # Repack once into the row-interleaved layout decoding streams fastest; the mapped
                # pages are then dropped so that peak memory stays near the file size (the tied
                # embedding table is still read by the lookup and stays mapped).
                w = w.pack()
                if w.is_packed and name != "token_embd.weight":
                    self.f.release(t)
        else:
            self._converted[t.fmt] += 1
            fmt = self.foreign if (self.foreign != "q8_0" or t.shape[-1] % 32 == 0) else "f32"
            w = lb.QTensor(convert_foreign(t, fmt), fmt, t.shape)
            self.f.release(t)
        if rotated is None:
            rotated = self.rot is not None and name in self.rot.weight_names
        lin = Linear(name, w, self.rot if rotated else None, on_change=self._matrix_changed)
        if t.fmt == "bf16":
            lin.prepare = round_bf16
        return lin
