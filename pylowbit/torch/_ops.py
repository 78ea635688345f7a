"""The `pylowbit` operator namespace: each op declared once (schema, fake, CPU kernel, autograd).

Modules (`pylowbit.torch.Linear`) call only `torch.ops.pylowbit.*`.  The CPU kernels hand tensor
addresses to pylowbit._lowbit's address-level entry points, which check sizes, release the GIL and
call liblowbit: no numpy round trip, no copy of the weights.  Ops are declared with the low-level
`torch.library.Library` API, whose Python dispatch costs less per call than `custom_op`'s.

Threads: every kernel call passes `torch.get_num_threads()` (or `set_threads`' count, or the count
a model holding torch's threads took, `hold_torch_threads`), so pylowbit's pool never runs more
threads than torch was told to use.  (torch's OpenMP workers busy-wait after each parallel op: a
decode loop runs fastest with torch at one intra-op thread and pylowbit at all cores, docs/TORCH.md.)
"""
from __future__ import annotations

import functools

import torch

from pylowbit import _lowbit
from pylowbit.core import FORMATS, format_info

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
WEIGHT_TYPE_IDS = frozenset(f.type_id for f in FORMATS.values())
_FLOAT_WEIGHT_TYPES = frozenset(format_info(n).type_id for n in ("f32", "f16", "bf16"))

_threads: int | None = None  # set_threads
# (pylowbit's count, torch's count before) of each model call holding torch's threads now
_held: list[tuple[int, int]] = []


def set_threads(n: int | None) -> None:
    """The thread count of pylowbit's kernels when called from torch (None: follow
    torch.get_num_threads(), the default)."""
    global _threads
    if n is not None and not 1 <= int(n) <= 256:
        raise ValueError(f"threads must be between 1 and 256, got {n}")
    _threads = None if n is None else int(n)


def kernel_threads() -> int:
    return _threads or (_held[-1][0] if _held else torch.get_num_threads())


def hold_torch_threads(model: torch.nn.Module) -> None:
    """While `model`'s forward (and its generate(), if it has one) runs eagerly, torch's intra-op
    pool runs one thread and pylowbit's kernels the count torch had: the two pools then never
    compete for the cores (torch's OpenMP workers busy-wait after each parallel op, also the small
    ones generate() runs between steps, and would take the cores pylowbit's GEMVs need).
    Meanwhile pylowbit's idle workers stay awake between its calls (_lowbit.pool_keep_awake:
    torch's ops between two products outlast their spin, and a sleeping worker neither reads
    the next weights ahead nor starts a product at once).
    Restored when the call ends, by an exception too; nested calls keep the outer count.
    Nothing changes under torch.compile."""
    if getattr(model, "_pylowbit_holds_threads", False):
        return

    def take(*_):
        if torch.compiler.is_compiling():
            return
        before = torch.get_num_threads()
        _held.append((_held[-1][0] if _held else before, before))
        torch.set_num_threads(1)
        _lowbit.pool_keep_awake(True)

    def give_back(*_):
        if torch.compiler.is_compiling() or not _held:
            return
        torch.set_num_threads(_held.pop()[1])
        _lowbit.pool_keep_awake(False)

    model.register_forward_pre_hook(take)
    model.register_forward_hook(give_back, always_call=True)
    generate = getattr(model, "generate", None)
    if callable(generate):
        @functools.wraps(generate)
        def generate_holding(*args, **kwargs):
            take()
            try:
                return generate(*args, **kwargs)
            finally:
                give_back()
        model.generate = generate_holding
    model._pylowbit_holds_threads = True


lib = torch.library.Library("pylowbit", "DEF")  # noqa: the namespace's one definition
lib.define("gemm(Tensor x, Tensor w, int type_id, int rows, int cols) -> Tensor")
lib.define("dequantize(Tensor w, int type_id, int rows, int cols) -> Tensor")
lib.define("quantize_act(Tensor x, int type_id) -> (Tensor, Tensor, Tensor)")
lib.define("fwht(Tensor x, int block, Tensor? signs=None, bool signs_first=True, "
           "bool normalize=True) -> Tensor")


# ---- argument checks (shared by the CPU kernels and the fake implementations) --------------------

def _check_float_input(x: torch.Tensor, what: str, cpu: bool) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"pylowbit: {what} must be float32, bfloat16 or float16, got {x.dtype}")
    if cpu and x.device.type != "cpu":
        raise ValueError(f"pylowbit: {what} is on {x.device}; pylowbit's kernels run on the CPU")
    if not x.is_contiguous():
        raise ValueError(f"pylowbit: {what} must be contiguous, got a view with strides "
                         f"{tuple(x.stride())} for shape {tuple(x.shape)} (call .contiguous())")


@functools.lru_cache(maxsize=1024)
def _matrix_bytes(type_id: int, rows: int, cols: int) -> int:
    """Bytes of a rows x cols matrix of type_id (a layer asks the same question every call)."""
    if type_id not in WEIGHT_TYPE_IDS:
        raise ValueError(f"pylowbit: unknown weight type id {type_id}; known: {sorted(WEIGHT_TYPE_IDS)}")
    info = format_info(type_id)
    if rows < 0 or cols < 0 or cols % info.block_size:
        raise ValueError(f"pylowbit: a {info.name} matrix needs a row length that is a multiple of "
                         f"{info.block_size}, got ({rows}, {cols})")
    return _lowbit.tensor_nbytes(type_id, rows * cols)


def _check_weights(w: torch.Tensor, type_id: int, rows: int, cols: int, cpu: bool) -> None:
    need = _matrix_bytes(type_id, rows, cols)
    if w.dtype != torch.uint8 or w.dim() != 1:
        raise TypeError(f"pylowbit: packed weights must be a 1-D uint8 tensor, got {w.dtype} "
                        f"of shape {tuple(w.shape)}")
    if cpu and w.device.type != "cpu":
        raise ValueError(f"pylowbit: packed weights are on {w.device}; pylowbit's kernels run on the CPU")
    if not w.is_contiguous():
        raise ValueError("pylowbit: packed weights must be contiguous")
    if w.numel() != need:
        raise ValueError(f"pylowbit: a {format_info(type_id).name} matrix of shape ({rows}, {cols}) "
                         f"takes {need} bytes, the packed weights have {w.numel()}")


def _check_act_type(type_id: int) -> int:
    if type_id not in WEIGHT_TYPE_IDS or type_id in _FLOAT_WEIGHT_TYPES:
        raise ValueError(f"pylowbit: weight type id {type_id} has no activation quantizer")
    return _lowbit.act_group(type_id)


# ---- gemm: y = x . W^T ----------------------------------------------------------------------

def _gemm_shape_check(x, w, type_id, rows, cols, cpu):
    _check_float_input(x, "x", cpu)
    _check_weights(w, type_id, rows, cols, cpu)
    if x.device != w.device:
        raise ValueError(f"pylowbit: x is on {x.device}, the packed weights on {w.device}; "
                         f"pylowbit's kernels run on the CPU (meta tensors: shapes only)")
    if x.dim() < 1 or x.shape[-1] != cols:
        raise ValueError(f"pylowbit: x has shape {tuple(x.shape)}, its last axis must be the "
                         f"matrix's {cols} columns")


# dtypes the address-level entries take as they are (bf16 converted in C); float16 goes through a
# float32 copy
ADDR_DTYPES = {torch.float32: 0, torch.bfloat16: 1}


def _addr_input(x):
    """(the tensor handed to C, its dtype code)."""
    code = ADDR_DTYPES.get(x.dtype)
    return (x, code) if code is not None else (x.to(torch.float32), 0)


def gemm_cpu(x, w, type_id, rows, cols):
    """The CPU kernel of pylowbit::gemm."""
    _gemm_shape_check(x, w, type_id, rows, cols, True)
    xc, code = _addr_input(x)
    y = torch.empty(x.shape[:-1] + (rows,), dtype=xc.dtype)
    _lowbit.addr_gemm(type_id, w.data_ptr(), w.numel(), rows, cols, xc.data_ptr(),
                      x.shape[:-1].numel(), y.data_ptr(), kernel_threads(), code)
    return y if y.dtype == x.dtype else y.to(x.dtype)


def gemm_packed_cpu(x, mats):
    """x . m^T for each weight m of `mats` (a sequence of _lowbit.PackedMatrix sharing x's columns,
    Linear.repack), in one call (one activation quantization, one thread-pool job): a list of
    outputs.  Eager inference only, never traced (the op itself takes the GGUF bytes).  Runs once
    per layer and token: kept to the fewest Python and torch calls."""
    shape = x.shape
    code = ADDR_DTYPES.get(x.dtype)
    if code is None or not x.is_cpu or not x.is_contiguous():
        _check_float_input(x, "x", True)  # raises, or float16: through float32 below
    m = mats[0]
    cols = m.cols
    if not shape or shape[-1] != cols:
        raise ValueError(f"pylowbit: x has shape {tuple(shape)}, its last axis must be the "
                         f"matrix's {cols} columns")
    xc = x if code is not None else x.to(torch.float32)
    n = x.numel() // cols if cols else shape[:-1].numel()
    threads = _threads or (_held[-1][0] if _held else torch.get_num_threads())
    if len(mats) == 1:  # (a 2-D shape allocates fastest)
        y = torch.empty(n, m.rows, dtype=xc.dtype)
        _lowbit.addr_matrix_gemm_multi(mats, xc.data_ptr(), n, (y.data_ptr(),), code or 0, threads)
        ys = [y]
    else:
        ys = [torch.empty(n, m.rows, dtype=xc.dtype) for m in mats]
        _lowbit.addr_matrix_gemm_multi(tuple(mats), xc.data_ptr(), n, tuple([y.data_ptr() for y in ys]),
                                       code or 0, threads)
    if len(shape) != 2:
        ys = [y.view(*shape[:-1], y.shape[1]) for y in ys]
    return ys if xc is x else [y.to(x.dtype) for y in ys]


def _gemm_fake(x, w, type_id, rows, cols):
    _gemm_shape_check(x, w, type_id, rows, cols, False)
    return x.new_empty(x.shape[:-1] + (rows,))


def _gemm_setup_context(ctx, inputs, output):
    _, w, type_id, rows, cols = inputs
    ctx.save_for_backward(w)
    ctx.mat = (type_id, rows, cols)


def input_grad(ctx, grad, w):
    """The gemm ops' backward: weights are frozen, so only the input's gradient, grad . W, through
    a dequantized temporary of the GGUF bytes w that lives for this call only."""
    dense = torch.ops.pylowbit.dequantize(w, *ctx.mat)
    gx = (grad.to(torch.float32) @ dense).to(grad.dtype) if ctx.needs_input_grad[0] else None
    return gx, None, None, None, None


def _gemm_backward(ctx, grad):
    (w,) = ctx.saved_tensors
    return input_grad(ctx, grad, w)


# ---- dequantize -----------------------------------------------------------------------------

def _dequantize_cpu(w, type_id, rows, cols):
    _check_weights(w, type_id, rows, cols, True)
    out = torch.empty((rows, cols), dtype=torch.float32)
    _lowbit.addr_dequantize(type_id, w.data_ptr(), w.numel(), rows * cols, out.data_ptr())
    return out


def _dequantize_fake(w, type_id, rows, cols):
    _check_weights(w, type_id, rows, cols, False)
    return w.new_empty((rows, cols), dtype=torch.float32)


# ---- quantize_act: the activations as the kernels quantize them -------------------------------

def _quantize_act_check(x, type_id, cpu):
    group = _check_act_type(type_id)
    if x.dtype != torch.float32:
        raise TypeError(f"pylowbit: quantize_act takes float32 activations, got {x.dtype}")
    _check_float_input(x, "x", cpu)
    if x.dim() < 1 or x.shape[-1] % group:
        raise ValueError(f"pylowbit: x has shape {tuple(x.shape)}; its last axis must be a "
                         f"multiple of the activation group {group}")
    return group


def _quantize_act_cpu(x, type_id):
    group = _quantize_act_check(x, type_id, True)
    n = x.shape[-1]
    q = torch.empty(x.shape, dtype=torch.int8)
    d = torch.empty(x.shape[:-1] + (n // group,), dtype=torch.float32)
    s = torch.empty(d.shape, dtype=torch.int32)
    _lowbit.addr_quantize_act_for(type_id, x.data_ptr(), x.shape[:-1].numel(), n,
                                  q.data_ptr(), d.data_ptr(), s.data_ptr())
    return q, d, s


def _quantize_act_fake(x, type_id):
    group = _quantize_act_check(x, type_id, False)
    g = x.shape[:-1] + (x.shape[-1] // group,)
    return (x.new_empty(x.shape, dtype=torch.int8), x.new_empty(g, dtype=torch.float32),
            x.new_empty(g, dtype=torch.int32))


# ---- fwht: blockwise Walsh-Hadamard transform with rotation signs ------------------------------

def _fwht_check(x, block, signs, cpu):
    if x.dtype != torch.float32:
        raise TypeError(f"pylowbit: fwht takes float32, got {x.dtype}")
    _check_float_input(x, "x", cpu)
    if x.dim() < 1 or block < 2 or x.shape[-1] % block:
        raise ValueError(f"pylowbit: fwht of shape {tuple(x.shape)} in blocks of {block}: the last "
                         f"axis must be a multiple of the block (>= 2)")
    if signs is not None:
        if signs.dtype != torch.float32 or signs.shape != (x.shape[-1],):
            raise ValueError(f"pylowbit: signs must be float32 of shape ({x.shape[-1]},), got "
                             f"{signs.dtype} {tuple(signs.shape)}")
        _check_float_input(signs, "signs", cpu)


def _fwht_cpu(x, block, signs=None, signs_first=True, normalize=True):
    _fwht_check(x, block, signs, True)
    out = x.clone()
    n = x.shape[-1]
    _lowbit.addr_fwht(out.data_ptr(), x.shape[:-1].numel(), n, block, normalize,
                      0 if signs is None else signs.data_ptr(), 0 if signs_first else 1,
                      kernel_threads())
    return out


def _fwht_fake(x, block, signs=None, signs_first=True, normalize=True):
    _fwht_check(x, block, signs, False)
    return torch.empty_like(x)


lib.impl("gemm", gemm_cpu, "CPU")
lib.impl("dequantize", _dequantize_cpu, "CPU")
lib.impl("quantize_act", _quantize_act_cpu, "CPU")
lib.impl("fwht", _fwht_cpu, "CPU")
torch.library.register_fake("pylowbit::gemm", _gemm_fake, lib=lib)
torch.library.register_fake("pylowbit::dequantize", _dequantize_fake, lib=lib)
torch.library.register_fake("pylowbit::quantize_act", _quantize_act_fake, lib=lib)
torch.library.register_fake("pylowbit::fwht", _fwht_fake, lib=lib)
torch.library.register_autograd("pylowbit::gemm", _gemm_backward, setup_context=_gemm_setup_context,
                                lib=lib)
