"""The model's matrix products: a Linear (one matrix, its input rotation and preparation), and
the groups of Linears that read one input and run in one liblowbit call."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import _lowbit, _ops
from .hadamard import Rotation
from .tensors import round_bf16


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
