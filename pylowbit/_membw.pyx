# cython: language_level=3, boundscheck=False, wraparound=False
"""Read-bandwidth probe for the benchmark's roofline (C body in native/src/membw.h)."""
from libc.stdint cimport uint64_t

cdef extern from "membw.h" nogil:
    uint64_t membw_xor(const uint64_t *p, size_t n)


def read_words(const uint64_t[::1] buf not None) -> int:
    """XOR-fold every 64-bit word of buf (the result keeps the loads alive); releases the GIL so
    several threads can stream at once."""
    cdef uint64_t r = 0
    if buf.shape[0]:
        with nogil:
            r = membw_xor(&buf[0], buf.shape[0])
    return r
