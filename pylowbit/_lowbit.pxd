# C-level helpers defined once in _lowbit.pyx and cimported by the other extension modules
# (``from pylowbit._lowbit cimport check``), so each lives in one place.

# Status code -> exception (ValueError; MemoryError for ENOMEM, RuntimeError for EISA).
cdef int check(int status, str what) except -1

from pylowbit.lowbit cimport lowbit_matrix

# The liblowbit matrix of a PackedMatrix (TypeError for anything else).
cdef const lowbit_matrix *matrix_of(object m) except NULL
