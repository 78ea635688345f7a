# cython: language_level=3, boundscheck=False, wraparound=False
"""relu(W1 x) -> W2, both matrices TQ2_0 bytes (pylowbit.quantize(...).data), without the GIL."""
import numpy as np

from pylowbit.lowbit cimport LOWBIT_OK, lowbit_gemv, lowbit_status_str, lowbit_type_from_name

cdef int TQ2_0 = lowbit_type_from_name(b"tq2_0")


def mlp_tq2_0(const unsigned char[::1] w1, const unsigned char[::1] w2, int hidden, int out,
              const float[::1] x):
    cdef float[::1] h = np.empty(hidden, np.float32)
    cdef float[::1] y = np.empty(out, np.float32)
    cdef int st, i
    cdef int cols = x.shape[0]
    with nogil:
        st = lowbit_gemv(TQ2_0, &w1[0], hidden, cols, &x[0], &h[0], 1)
        if st == LOWBIT_OK:
            for i in range(hidden):
                if h[i] < 0:
                    h[i] = 0
            st = lowbit_gemv(TQ2_0, &w2[0], out, hidden, &h[0], &y[0], 1)
    if st != LOWBIT_OK:
        raise ValueError(lowbit_status_str(st).decode())
    return np.asarray(y)
