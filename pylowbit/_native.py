"""liblowbit as a ctypes library: the one place other runtimes (pylowbit.numba, pylowbit.jax) find
the shared library the extension modules link and take its functions' addresses."""
from __future__ import annotations

import ctypes
import functools
import glob
import os

import pylowbit


@functools.lru_cache(maxsize=None)
def library() -> ctypes.CDLL:
    """The liblowbit shared library shipped in the package (the one `import pylowbit` loaded)."""
    here = pylowbit.get_library_dirs()[0]
    names = sorted(glob.glob(os.path.join(here, "liblowbit*.so*")) +
                   glob.glob(os.path.join(here, "liblowbit*.dylib")) +
                   glob.glob(os.path.join(here, "lowbit*.dll")))
    if not names:
        raise ImportError(f"liblowbit not found in {here}: is pylowbit installed (not run from "
                          f"its source tree)?")
    return ctypes.CDLL(names[0])


def function(name: str, restype, argtypes):
    """A liblowbit function as a typed ctypes function (numba calls these from nopython code)."""
    fn = getattr(library(), name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


def address(name: str) -> int:
    """The address of a liblowbit function (e.g. an XLA FFI handler)."""
    return ctypes.cast(getattr(library(), name), ctypes.c_void_p).value
