# cython: language_level=3
"""Exports liblowbit's function table as the capsule `pylowbit._capi.CAPI` (see lowbit/capi.h)."""
from cpython.pycapsule cimport PyCapsule_New

from pylowbit.lowbit cimport *

cdef extern from "lowbit/capi.h":
    ctypedef struct lowbit_capi:
        int abi_version
        size_t size
        void *version
        void *status_str
        void *tensor_bytes
        void *quantize
        void *dequantize
        void *gemv
        void *gemm
        void *fwht_f32
        void *isa_active
        void *isa_name
    const char *LOWBIT_CAPSULE_NAME

cdef lowbit_capi TABLE
TABLE.abi_version = LOWBIT_ABI_VERSION
TABLE.size = sizeof(lowbit_capi)
TABLE.version = <void *>lowbit_version
TABLE.status_str = <void *>lowbit_status_str
TABLE.tensor_bytes = <void *>lowbit_tensor_bytes
TABLE.quantize = <void *>lowbit_quantize
TABLE.dequantize = <void *>lowbit_dequantize
TABLE.gemv = <void *>lowbit_gemv
TABLE.gemm = <void *>lowbit_gemm
TABLE.fwht_f32 = <void *>lowbit_fwht_f32
TABLE.isa_active = <void *>lowbit_isa_active
TABLE.isa_name = <void *>lowbit_isa_name

CAPI = PyCapsule_New(<void *>&TABLE, LOWBIT_CAPSULE_NAME, NULL)
ABI_VERSION = LOWBIT_ABI_VERSION
