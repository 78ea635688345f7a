"""pylowbit's kernels inside JAX (``pip install pylowbit[jax]``): XLA FFI custom calls on the CPU.

    >>> import jax, jax.numpy as jnp, pylowbit as lb, pylowbit.jax as lbj
    >>> w = lb.quantize(W, "tq2_0")               # a QTensor
    >>> wj = lbj.weights(w)                        # its bytes as a uint8 jax.Array (+ format, shape)
    >>> f = jax.jit(lambda w, x: lbj.fwht(lbj.gemv(w, x)))
    >>> y = f(wj, jnp.asarray(x))                  # the numpy API's result, bit for bit

The handlers (``lowbit_xla_gemm``, ``lowbit_xla_fwht``) live in liblowbit itself (native/src/
xla_ffi.c) and call the entry points the numpy API calls; importing this module registers them
with XLA for the CPU platform.  Inside ``jax.jit`` a product is one ``custom_call`` in the compiled
program: no Python and no host callback run per call.  Shapes and dtypes are checked while tracing.
``jax.vmap`` over the activations batches them into one GEMM (the weights are not batched).

Weights are a ``Weights`` pytree: the GGUF bytes as an ordinary uint8 ``jax.Array`` (donate it,
shard it, save it with numpy or orbax) with the format and matrix shape as static metadata.  A
QTensor is accepted too (its bytes then enter the traced program as a constant).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from pylowbit import _native
from pylowbit.core import QTensor, format_info, tensor_nbytes

__all__ = ["Weights", "weights", "gemv", "gemm", "fwht", "TARGETS"]

# target name -> liblowbit symbol of its handler
TARGETS = {"pylowbit_gemm": "lowbit_xla_gemm", "pylowbit_fwht": "lowbit_xla_fwht"}


def _register():
    import ctypes

    for name, symbol in TARGETS.items():
        fn = ctypes.cast(getattr(_native.library(), symbol), ctypes.c_void_p)
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(fn), platform="cpu")


_register()


@dataclasses.dataclass(frozen=True)
class Weights:
    """A weight matrix for pylowbit.jax: `data` (uint8 jax.Array of the GGUF bytes, a pytree leaf),
    `fmt` (format name) and `shape` (rows, cols), the last two static."""

    data: jax.Array
    fmt: str
    shape: tuple


# (the explicit field lists: the form every jax since 0.4.38 takes)
jax.tree_util.register_dataclass(Weights, data_fields=["data"], meta_fields=["fmt", "shape"])


def weights(w: QTensor, device=None) -> Weights:
    """A QTensor's bytes as a uint8 jax.Array on `device` (default: JAX's default CPU device)."""
    if not isinstance(w, QTensor):
        raise TypeError(f"weights must be a pylowbit.QTensor, not {type(w).__name__}")
    rows, cols = w._matrix_shape()
    if w.data is None:
        raise ValueError("this PackedTensor dropped its file bytes; pass the QTensor (or pack with "
                         "keep_source=True): JAX computes on the file layout")
    dev = device if device is not None else jax.devices("cpu")[0]
    return Weights(jax.device_put(w.data, dev), w.fmt, (rows, cols))


def _as_weights(w) -> Weights:
    if isinstance(w, Weights):
        return w
    if isinstance(w, QTensor):
        rows, cols = w._matrix_shape()
        if w.data is None:
            return weights(w)  # raises the PackedTensor error
        return Weights(jnp.asarray(w.data), w.fmt, (rows, cols))
    raise TypeError(f"weights must be a pylowbit.QTensor or pylowbit.jax.Weights, "
                    f"not {type(w).__name__}")


def _check_float32(x, what: str):
    dtype = getattr(x, "dtype", None)
    if dtype != jnp.float32:
        raise TypeError(f"{what} must be float32, got {dtype} (convert with .astype(jnp.float32))")


def _check_cpu(x, what: str):
    """Refuse a concrete array committed to another platform (traced values are placed by XLA)."""
    devs = getattr(x, "devices", None)
    if devs is None or isinstance(x, jax.core.Tracer):
        return
    for d in devs():
        if d.platform != "cpu":
            raise ValueError(f"{what} is on {d} (platform {d.platform}); pylowbit's XLA kernels "
                             f"run on the CPU: jax.device_put it on jax.devices('cpu')[0]")


def gemm(w, x, threads: int = 0):
    """Y[..., rows] = X[..., cols] . W^T inside or outside jax.jit (W: Weights or QTensor)."""
    wj = _as_weights(w)
    info = format_info(wj.fmt)
    rows, cols = wj.shape
    x = jnp.asarray(x) if not isinstance(x, jax.Array) else x
    _check_float32(x, "x")
    _check_cpu(x, "x")
    _check_cpu(wj.data, "weights")
    if x.ndim < 1 or x.shape[-1] != cols:
        raise ValueError(f"x must have shape (..., {cols}) for a {rows}x{cols} matrix, got {x.shape}")
    need = tensor_nbytes(info, rows * cols)
    if wj.data.dtype != jnp.uint8 or wj.data.size != need:
        raise ValueError(f"{info.name} weights of shape {wj.shape} need {need} uint8 bytes, got "
                         f"{wj.data.size} of {wj.data.dtype}")
    call = jax.ffi.ffi_call("pylowbit_gemm", jax.ShapeDtypeStruct(x.shape[:-1] + (rows,), jnp.float32),
                            vmap_method="expand_dims")
    return call(wj.data.reshape(-1), x, type=np.int32(info.type_id), rows=np.int64(rows),
                cols=np.int64(cols), threads=np.int32(threads))


def gemv(w, x, threads: int = 0):
    """y[rows] = W . x[cols] (x 1-D; under jax.vmap, a batch of them is one GEMM)."""
    x = jnp.asarray(x) if not isinstance(x, jax.Array) else x
    if getattr(x, "ndim", None) != 1:
        raise ValueError(f"x must be 1-D (cols,), got shape {x.shape}; use gemm for a batch")
    return gemm(w, x, threads)


_ORDERS = {"signs-then-rotate": 0, "rotate-then-signs": 1}


def fwht(x, *, block: int | None = None, normalize: bool = True, signs=None,
         order: str = "signs-then-rotate", threads: int = 0):
    """The Walsh-Hadamard transform along the last axis of float32 x (pylowbit.fwht's options)."""
    from pylowbit._fwht import is_supported_size

    x = jnp.asarray(x) if not isinstance(x, jax.Array) else x
    _check_float32(x, "x")
    _check_cpu(x, "x")
    if x.ndim < 1:
        raise ValueError("x must have at least one dimension")
    n = x.shape[-1]
    blk = n if block is None else int(block)
    if not is_supported_size(blk):
        raise ValueError(f"{'last dimension' if block is None else 'block'}={blk} is not a "
                         f"supported Hadamard size (a power of two >= 2, or m * 2^k with m in "
                         f"{{12, 20, 28}})")
    if n % blk:
        raise ValueError(f"last dimension {n} is not a multiple of block={blk}")
    if order not in _ORDERS:
        raise ValueError(f"order must be 'signs-then-rotate' or 'rotate-then-signs', got {order!r}")
    args = [x]
    if signs is not None:
        signs = jnp.asarray(signs, jnp.float32)
        if signs.shape != (n,):
            raise ValueError(f"signs must be a 1-D vector of length {n}, got shape {signs.shape}")
        args.append(signs)
    call = jax.ffi.ffi_call("pylowbit_fwht", jax.ShapeDtypeStruct(x.shape, jnp.float32),
                            vmap_method="expand_dims")
    return call(*args, block=np.int64(blk), normalize=np.int32(bool(normalize)),
                order=np.int32(_ORDERS[order]), threads=np.int32(threads))
