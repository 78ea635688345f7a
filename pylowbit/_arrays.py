"""Arrays of any runtime as numpy views, checked: numpy itself, DLPack (torch, JAX, CuPy, array-API
arrays) and the buffer protocol, never copied; a clear error for what cannot be read in place."""
from __future__ import annotations

import numpy as np

# DLPack device types (dlpack.h's DLDeviceType); numpy views kDLCPU memory only
_DLPACK_CPU = 1
_DLPACK_DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                   9: "VPI", 10: "ROCm", 11: "ROCm host", 12: "ExtDev", 13: "CUDA managed",
                   14: "oneAPI", 15: "WebGPU", 16: "Hexagon", 17: "MAIA"}


def as_array(a, what: str = "array", writeable: bool = False) -> np.ndarray:
    """A numpy view of any array: numpy itself, an object with ``__dlpack__`` (torch, JAX, CuPy,
    array-API arrays) or the buffer protocol (memoryview, bytearray, array.array), never copied.

    A foreign array must be in CPU memory, of a dtype numpy has and C-contiguous: pylowbit reads
    it in place, so anything else is refused with the reason (device, dtype or strides) rather than
    copied behind the caller's back.  Anything else (lists, scalars) goes through np.asarray."""
    if isinstance(a, np.ndarray):
        arr = a
    elif hasattr(a, "__dlpack__"):
        arr = _from_torch_cpu(a) if type(a).__module__.startswith("torch") else None
        if arr is None:
            arr = _from_dlpack(a, what)
    elif isinstance(a, (bytes, bytearray, memoryview)) or _has_buffer(a):
        arr = np.asarray(memoryview(a))
        if not arr.flags.c_contiguous:
            raise ValueError(f"{what} is a strided buffer (strides {arr.strides}); pylowbit reads "
                             f"arrays in place: pass a C-contiguous one")
    else:
        arr = np.asarray(a)
    if writeable and not arr.flags.writeable:
        raise ValueError(f"{what} is read-only; pass a writeable array"
                         + (" (JAX arrays are immutable)" if is_jax(a) else ""))
    return arr


def _has_buffer(a) -> bool:
    try:
        memoryview(a).release()
        return True
    except TypeError:
        return False


def is_jax(a) -> bool:
    return type(a).__module__.split(".")[0] in ("jax", "jaxlib")


def _describe(a) -> str:
    """`torch.Tensor` / `jaxlib...ArrayImpl`, with its dtype when it has one: for error messages."""
    t = type(a)
    dtype = getattr(a, "dtype", None)
    return f"{t.__module__}.{t.__qualname__}" + (f" of dtype {dtype}" if dtype is not None else "")


def _from_torch_cpu(t):
    """The numpy view of a plain CPU torch tensor (Tensor.numpy(): the view DLPack gives, with less
    per-call overhead), else None: DLPack then says what is wrong (device, dtype, autograd)."""
    if t.device.type != "cpu" or t.requires_grad:
        return None
    try:
        arr = t.numpy()
    except (TypeError, RuntimeError):
        return None
    if not arr.flags.c_contiguous:
        return None
    return arr


def _from_dlpack(a, what: str) -> np.ndarray:
    dev = getattr(a, "__dlpack_device__", None)
    if dev is not None:
        kind, index = (int(v) for v in dev())
        if kind != _DLPACK_CPU:
            name = _DLPACK_DEVICES.get(kind, f"DLPack device type {kind}")
            raise ValueError(f"{what} is on device {name}:{index} ({_describe(a)}); pylowbit "
                             f"computes on the CPU: move it to host memory first (e.g. .cpu())")
    try:
        arr = np.from_dlpack(a)
    except (BufferError, TypeError, RuntimeError, ValueError) as e:
        raise TypeError(f"{what} ({_describe(a)}) cannot be read in place by pylowbit: {e} "
                        f"(pylowbit reads float32 / float64 activations and uint8 weight bytes)") from None
    if not arr.flags.c_contiguous:
        elem = arr.itemsize or 1
        raise ValueError(f"{what} is not C-contiguous (shape {arr.shape}, strides in elements "
                         f"{tuple(s // elem for s in arr.strides)}); pylowbit reads arrays in place: "
                         f"pass a contiguous one (torch: .contiguous(), numpy: np.ascontiguousarray)")
    return arr


def float32_array(x, what: str) -> np.ndarray:
    x = as_array(x, what)
    if x.dtype != np.float32:
        if x.dtype.kind not in "fiu":
            raise TypeError(f"{what} must be a float32 array, got dtype {x.dtype}")
        raise TypeError(f"{what} must be float32, got {x.dtype} (convert with .astype(np.float32))")
    return x


def check_out(out, shape) -> np.ndarray:
    """A numpy view of the caller's `out` (any writeable float32 array, see as_array), checked."""
    if not isinstance(out, np.ndarray) and not is_foreign(out):  # a list would be written and lost
        raise TypeError(f"out must be a float32 array (numpy, DLPack or a buffer), got "
                        f"{type(out).__name__}")
    arr = as_array(out, "out")
    if arr.dtype != np.float32:
        raise TypeError(f"out must be a float32 array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"out must have shape {shape}, got {arr.shape}")
    if not arr.flags.c_contiguous or not arr.flags.writeable:
        raise ValueError("out must be C-contiguous and writeable"
                         + (" (JAX arrays are immutable)" if is_jax(out) else ""))
    return arr


def is_foreign(a) -> bool:
    """An array of another runtime (DLPack) or a buffer (not numpy, not a list): see as_array."""
    return (a is not None and type(a) is not np.ndarray
            and (hasattr(a, "__dlpack__") or _has_buffer(a)))
