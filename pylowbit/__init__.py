"""pylowbit: ternary and 2-bit LLM kernels with run-time ISA dispatch.

    >>> import numpy as np, pylowbit as lb
    >>> w = lb.quantize(np.random.randn(64, 256).astype(np.float32), "tq2_0")
    >>> y = w.gemv(np.random.randn(256).astype(np.float32))
"""
from __future__ import annotations

import os as _os

from pylowbit import _capi  # noqa: F401  (makes the capsule pylowbit._capi.CAPI importable)
from pylowbit import _lowbit
from pylowbit.core import (FORMATS, FormatInfo, PackedTensor, QTensor, as_array, dequantize,
                           format_info, fwht, fwht_quantize_act, gemm, gemv, pack, packing_pays_off,
                           quantize, quantize_act, quantize_act_for, tensor_nbytes)

__version__ = "0.1.0"

isa_compiled = _lowbit.isa_compiled
isa_supported = _lowbit.isa_supported
isa_active = _lowbit.isa_active
set_isa = _lowbit.set_isa
get_threads = _lowbit.get_threads
set_threads = _lowbit.set_threads
set_i2s_act_scale = _lowbit.set_i2s_act_scale
threads_origin = _lowbit.threads_origin  # how get_threads() was chosen, in words
threads_for_topology = _lowbit.threads_for_topology  # the rule applied to a given sysfs tree

if _lowbit.isa_env_error():
    # A bad PYLOWBIT_ISA is a user error: refuse it rather than silently running another variant.
    raise RuntimeError(_lowbit.isa_env_error())


def get_include() -> str:
    """Directory holding lowbit/lowbit.h, for C/C++/Cython code that links liblowbit."""
    return _os.path.join(_os.path.dirname(__file__), "include")


def get_library_dirs() -> list[str]:
    """Directories holding the liblowbit shared library."""
    return [_os.path.dirname(__file__)]


def get_pkgconfig_dir() -> str:
    """Directory holding lowbit.pc (PKG_CONFIG_PATH=$(python -c ...) pkg-config --cflags --libs lowbit)."""
    return _os.path.join(_os.path.dirname(__file__), "pkgconfig")


def show_runtime() -> dict:
    """Version, compiled / supported / active ISA variants and thread default (also printed)."""
    info = {
        "version": __version__,
        "library_version": _lowbit.version(),
        "abi_version": _lowbit.abi_version(),
        "compiled": isa_compiled(),
        "supported": isa_supported(),
        "active": isa_active(),
        "threads": get_threads(),
    }
    for k, v in info.items():
        print(f"{k:16s} {', '.join(v) if isinstance(v, list) else v}")
    return info


def __getattr__(name: str):
    # pylowbit.LLM (the chat / completion API) is imported on first use: `import pylowbit` stays light
    if name == "LLM":
        from pylowbit.llm import LLM

        return LLM
    raise AttributeError(f"module 'pylowbit' has no attribute {name!r}")
