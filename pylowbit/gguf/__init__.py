"""GGUF v2/v3 reading (mmap, zero-copy numpy views) and writing (atomic), validated against hostile input.

Every count, length, offset and span read from a file is checked against the file size before it is
used, so a malformed file gives a `GGUFError` naming the problem instead of a crash or a giant
allocation.  The type table covers what gguf-py 0.19.0 knows plus the low-bit ids it does not
(36 I2_S, 42 Q2_0, 142 PQ2_0, 143 PTQ1_0).

The modules: `types` (constants, value types, the tensor type table), `values` (metadata values read
and encoded), `reader` (GGUFFile), `writer` (gguf_header, write_gguf), `files` (atomic_file, the
free-space check).  Everything is imported from `pylowbit.gguf`.
"""

from pylowbit.gguf.files import DiskSpaceError, atomic_file, check_disk_space
from pylowbit.gguf.reader import GGUFFile, TensorInfo, is_mapped, open_gguf
from pylowbit.gguf.types import (DEFAULT_ALIGNMENT, GGUF_MAGIC, LAZY_STRING_ARRAY, MAX_ARRAY_NESTING, MAX_DIMS,
                                 MAX_STRING_BYTES, TYPES, GGUFError, TypeInfo, ValueType, tensor_nbytes, type_id,
                                 type_name)
from pylowbit.gguf.values import MetaValue, StringArray
from pylowbit.gguf.writer import TensorSpec, gguf_header, write_gguf

__all__ = [
    "GGUFError",
    "GGUFFile",
    "TensorInfo",
    "TensorSpec",
    "MetaValue",
    "ValueType",
    "TYPES",
    "type_id",
    "type_name",
    "tensor_nbytes",
    "write_gguf",
    "check_disk_space",
    "DiskSpaceError",
    "gguf_header",
    "atomic_file",
    "open_gguf",
    "StringArray",
]
