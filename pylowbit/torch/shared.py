"""Eager decoding's bookkeeping around repacked layers (`Linear.repack()`): the read-ahead of the
next layer's weights, and sibling layers (q/k/v, gate/up) multiplied in one call."""
from __future__ import annotations

import weakref

import torch

from pylowbit import _lowbit
from pylowbit.torch._ops import gemm_packed_cpu, kernel_threads


def version_of(t: torch.Tensor):
    """t's version counter (bumped by every in-place change); None for an inference tensor, which
    has none (it cannot be changed in place outside inference mode)."""
    return None if t.is_inference() else t._version


_last_multiply = None  # weakref to the Linear / SharedInput whose repacked multiply ran last
# the attributes read_ahead_next keeps on a Linear / SharedInput: not copied or pickled
READ_AHEAD_LINKS = ("_weakself", "_next_multiply")


def read_ahead_next(owner, x: torch.Tensor) -> None:
    """Eager decoding multiplies the same layers in the same order every token.  After `owner`'s
    one-vector multiply: note `owner` as what followed the previous one, and ask the pool's idle
    threads to start reading the first weights of what followed `owner` last time
    (lowbit_matrix_readahead), while torch runs the ops in between (norms, rotary, attention).  A
    wrong guess costs some bandwidth, never a result.  Runs once per layer and token."""
    global _last_multiply
    d = owner.__dict__
    me = d.get("_weakself")
    if me is None:
        me = d["_weakself"] = weakref.ref(owner)
    if _last_multiply is not me:
        prev = _last_multiply() if _last_multiply is not None else None
        if prev is not None:
            prev.__dict__["_next_multiply"] = me  # a plain attribute, not a submodule
        _last_multiply = me
    ref = d.get("_next_multiply")
    nxt = ref() if ref is not None else None
    if nxt is None or x.numel() != x.shape[-1]:
        return
    threads = kernel_threads()
    if threads < 2:
        return
    mats = nxt.packed_matrices()
    if mats is not None:
        _lowbit.addr_matrix_readahead(mats, threads)


class SharedInput:
    """Sibling layers that their parent calls one after another on the same input: an attention's
    q, k and v projections, an MLP's gate and up.  On the eager path (Linear.forward), with every
    sibling repacked, the first call multiplies the input by all of them in one gemm_multi (one
    activation quantization, one thread-pool job instead of three) and keeps the others' outputs;
    a sibling's own call then takes its output if it comes with that very tensor (the same object,
    and for a tensor that tracks versions, unmodified since), and is computed on its own
    otherwise.  The kept input and outputs are released as soon as every sibling has taken its."""

    def __init__(self, layers):
        self.layers = tuple(layers)
        self._x, self._version, self._outs = None, None, {}

    def __getstate__(self):  # (deepcopy, pickle) the links and kept outputs are per-object caches
        state = {k: v for k, v in self.__dict__.items() if k not in READ_AHEAD_LINKS}
        state.update(_x=None, _version=None, _outs={})
        return state

    def packed_matrices(self):
        """Every sibling's PackedMatrix, or None unless all are repacked."""
        mats = tuple(m._packed_matrix() for m in self.layers)
        return None if any(m is None for m in mats) else mats

    def output(self, layer, x: torch.Tensor) -> torch.Tensor:
        outs = self._outs
        if self._x is x and layer in outs and self._version == version_of(x):
            y = outs.pop(layer)
            if not outs:
                self._x = None
            return y
        mats = self.packed_matrices()
        if mats is None:
            return gemm_packed_cpu(x, (layer._packed_matrix(),))[0]
        ys = gemm_packed_cpu(x, mats)
        read_ahead_next(self, x)
        self._x, self._version = x, version_of(x)
        self._outs = {m: y for m, y in zip(self.layers, ys) if m is not layer}
        return ys[self.layers.index(layer)]
