# Private to pylowbit's own extension modules: the cdef helpers of the _lowbit module, defined
# once in _lowbit.pyx and cimported by the others (``from pylowbit._lowbit cimport check``).
# Not the C API: Cython declarations of liblowbit itself are the public pylowbit/lowbit.pxd.

# Status code -> exception (ValueError; MemoryError for ENOMEM, RuntimeError for EISA).
cdef int check(int status, str what) except -1

from pylowbit.lowbit cimport lowbit_matrix

# The liblowbit matrix of a PackedMatrix (TypeError for anything else).
cdef const lowbit_matrix *matrix_of(object m) except NULL

from libc.stdint cimport int64_t, uint16_t

# Float dtypes of tensors handed over by address (pylowbit.torch): the kernels take float32, bf16
# is widened on the way in and rounded to nearest even on the way out, as torch rounds.
cdef enum:
    ADDR_F32 = 0
    ADDR_BF16 = 1
cdef void bf16_to_f32(const uint16_t *src, float *dst, int64_t n) noexcept nogil
cdef void f32_to_bf16(const float *src, uint16_t *dst, int64_t n) noexcept nogil
