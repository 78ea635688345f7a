# Private to pylowbit's own extension modules: the cdef helpers of the _lowbit module, defined
# once in _lowbit.pyx and cimported by the others (``from pylowbit._lowbit cimport check``).
# Not the C API: Cython declarations of liblowbit itself are the public pylowbit/lowbit.pxd.

# Status code -> exception (ValueError; MemoryError for ENOMEM, RuntimeError for EISA).
cdef int check(int status, str what) except -1

from pylowbit.lowbit cimport lowbit_matrix

# The liblowbit matrix of a PackedMatrix (TypeError for anything else).
cdef const lowbit_matrix *matrix_of(object m) except NULL
