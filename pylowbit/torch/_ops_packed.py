"""The ops on pylowbit's repacked layout (`Linear.repack()`: the layer's one copy of its weight).

- `gemm_packed(x, packed, type_id, rows, cols) -> y`: `gemm` on the packed bytes instead of the GGUF
  bytes (the same results bit for bit).  `packed` is a 1-D uint8 tensor that
  `_lowbit.PackedMatrix(..., out=)` wrote (`pack_into`): a 64-byte header (type, shape, layout),
  then the codes and scales; `_lowbit.packed_nbytes` bytes at a 64-byte aligned address.  The
  CPU kernel wraps those bytes (`lowbit_matrix_wrap`; no copy, and once per address while the
  header there stays the same).
- `unpack(packed, type_id, rows, cols) -> w`: the GGUF bytes back (`lowbit_matrix_unpack`).

Both have fake implementations (shapes only), so they run under torch.compile and torch.export;
gemm_packed's backward is the input's gradient through the dequantized transpose, as gemm's.
The packed layout depends on the CPU (its ISA variant): these bytes are for this process, never a
file (a Linear's state_dict holds the GGUF bytes).
"""
from __future__ import annotations

import functools
import weakref

import torch

from pylowbit import _lowbit
from pylowbit.core import format_info
from pylowbit.torch._ops import (_addr_input, _check_float_input, _gemm_setup_context, _matrix_bytes,
                                 input_grad, kernel_threads, lib)

lib.define("gemm_packed(Tensor x, Tensor packed, int type_id, int rows, int cols) -> Tensor")
lib.define("unpack(Tensor packed, int type_id, int rows, int cols) -> Tensor")


def packed_nbytes(type_id: int, rows: int, cols: int) -> int:
    """Bytes of the packed copy of a rows x cols matrix of type_id on this CPU, in the layout its
    variant (lb.set_isa, PYLOWBIT_ISA) picks now (0: not repacked)."""
    _matrix_bytes(type_id, rows, cols)  # known type, whole blocks
    return _lowbit.packed_nbytes(type_id, rows, cols)


@functools.lru_cache(maxsize=64)
def _repacked(type_id: int) -> bool:
    """Whether the type has a packed layout: every variant's for the ternary / 2-bit formats,
    Q8_0's and Q1_0's where a variant has a kernel for it (bytes packed there run under any
    variant, so the answer must not depend on the variant of the first call)"""
    info = format_info(type_id)
    return info.name in ("q8_0", "q1_0") or _lowbit.packed_nbytes(type_id, 1, info.block_size) > 0


def _check_packed(p: torch.Tensor, type_id: int, rows: int, cols: int, cpu: bool) -> None:
    """The fake implementations check the size the layout takes now; the CPU kernels leave the
    size to the bytes' header (checked in C: a layer packed under another variant still runs)."""
    _matrix_bytes(type_id, rows, cols)
    if not _repacked(type_id):
        raise ValueError(f"pylowbit: {format_info(type_id).name} is not repacked (use gemm on its "
                         f"GGUF bytes)")
    if p.dtype != torch.uint8 or p.dim() != 1:
        raise TypeError(f"pylowbit: packed weights must be a 1-D uint8 tensor, got {p.dtype} of "
                        f"shape {tuple(p.shape)}")
    if cpu and p.device.type != "cpu":
        raise ValueError(f"pylowbit: packed weights are on {p.device}; pylowbit's kernels run on the CPU")
    if not p.is_contiguous():
        raise ValueError("pylowbit: packed weights must be contiguous")
    need = 0 if cpu else packed_nbytes(type_id, rows, cols)
    if not cpu and p.numel() != need:
        raise ValueError(f"pylowbit: the packed copy of a {format_info(type_id).name} matrix of shape "
                         f"({rows}, {cols}) takes {need} bytes on this CPU, got {p.numel()}")


def _gemm_packed_check(x, p, type_id, rows, cols, cpu):
    _check_float_input(x, "x", cpu)
    _check_packed(p, type_id, rows, cols, cpu)
    if x.device != p.device:
        raise ValueError(f"pylowbit: x is on {x.device}, the packed weights on {p.device}; "
                         f"pylowbit's kernels run on the CPU (meta tensors: shapes only)")
    if x.dim() < 1 or x.shape[-1] != cols:
        raise ValueError(f"pylowbit: x has shape {tuple(x.shape)}, its last axis must be the "
                         f"matrix's {cols} columns")


def gemm_packed_bytes_cpu(x, p, type_id, rows, cols):
    """The CPU kernel of pylowbit::gemm_packed."""
    _gemm_packed_check(x, p, type_id, rows, cols, True)
    xc, code = _addr_input(x)
    y = torch.empty(x.shape[:-1] + (rows,), dtype=xc.dtype)
    _lowbit.addr_packed_gemm(type_id, p.data_ptr(), p.numel(), rows, cols, xc.data_ptr(),
                             x.shape[:-1].numel(), y.data_ptr(), kernel_threads(), code)
    return y if y.dtype == x.dtype else y.to(x.dtype)


def _gemm_packed_fake(x, p, type_id, rows, cols):
    _gemm_packed_check(x, p, type_id, rows, cols, False)
    return x.new_empty(x.shape[:-1] + (rows,))


def _gemm_packed_backward(ctx, grad):
    (p,) = ctx.saved_tensors  # (saved as gemm's: the weight operand and its shape)
    return input_grad(ctx, grad, torch.ops.pylowbit.unpack(p, *ctx.mat))


def unpack_cpu(p, type_id, rows, cols):
    """The CPU kernel of pylowbit::unpack."""
    _check_packed(p, type_id, rows, cols, True)
    out = torch.empty(_matrix_bytes(type_id, rows, cols), dtype=torch.uint8)
    _lowbit.addr_packed_unpack(type_id, p.data_ptr(), p.numel(), rows, cols, out.data_ptr(),
                               out.numel(), kernel_threads())
    return out


def _unpack_fake(p, type_id, rows, cols):
    _check_packed(p, type_id, rows, cols, False)
    return p.new_empty((_matrix_bytes(type_id, rows, cols),), dtype=torch.uint8)


def empty_aligned(nbytes: int) -> torch.Tensor:
    """A new uint8 CPU tensor of nbytes for a packed copy: liblowbit's memory for packed matrices
    (_lowbit.empty_packed: aligned, and in huge pages where the system grants them, as the
    decoder's own; torch's allocator gives 4 KB pages, which a layer streamed from memory pays
    for), kept alive by the tensor."""
    t = torch.from_numpy(_lowbit.empty_packed(nbytes))
    _weight_memory[id(t)] = t
    return t


_weight_memory = weakref.WeakValueDictionary()  # id -> a live tensor empty_aligned made


def in_weight_memory(t: torch.Tensor) -> bool:
    """Whether t is a tensor empty_aligned made (not a view or copy of one)."""
    return _weight_memory.get(id(t)) is t


lib.impl("gemm_packed", gemm_packed_bytes_cpu, "CPU")
lib.impl("unpack", unpack_cpu, "CPU")
torch.library.register_fake("pylowbit::gemm_packed", _gemm_packed_fake, lib=lib)
torch.library.register_fake("pylowbit::unpack", _unpack_fake, lib=lib)
torch.library.register_autograd("pylowbit::gemm_packed", _gemm_packed_backward,
                                setup_context=_gemm_setup_context, lib=lib)
