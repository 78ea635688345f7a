# Address-level entry points, part of the _lowbit module (included by _lowbit.pyx): for runtimes
# that hold their own tensors (pylowbit.torch) and pass raw data addresses and sizes.  Each checks
# the sizes it is given against the format's, releases the GIL and calls the same liblowbit entry
# point as its numpy twin above.  The caller vouches that each address spans the bytes named.
from libc.string cimport memset


cdef int _addr_check(uintptr_t p, str what) except -1:
    if p == 0:
        raise ValueError(f"{what}: null address")
    return 0


def addr_gemm(int type_id, uintptr_t w, int64_t w_nbytes, int64_t rows, int64_t cols,
              uintptr_t x, int64_t batch, uintptr_t y, int threads=0):
    """y[batch, rows] = x[batch, cols] . W^T: W the w_nbytes GGUF bytes of a rows x cols matrix of
    type_id at address w, x and y float32 C-contiguous at their addresses (gemm's twin)."""
    _check_weights(w_nbytes, type_id, rows, cols)
    if batch < 0:
        raise ValueError(f"addr_gemm: negative batch {batch}")
    if batch == 0 or rows == 0:
        return
    _addr_check(y, "addr_gemm y")
    if cols == 0:
        memset(<void *>y, 0, <size_t>(batch * rows) * sizeof(float))
        return
    _addr_check(w, "addr_gemm weights")
    _addr_check(x, "addr_gemm x")
    check_aligned(<const void *>w, type_id, "gemm")
    cdef int st
    with nogil:
        st = lowbit_gemm(type_id, <const void *>w, rows, cols, <const float *>x, batch,
                         <float *>y, threads)
    check(st, "gemm")


def addr_dequantize(int type_id, uintptr_t w, int64_t w_nbytes, int64_t n, uintptr_t out):
    """out[n] (float32) = the n weights of type_id in the w_nbytes bytes at w (dequantize's twin)."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, n)
    if need < 0:
        check(<int>need, f"dequantize {n} values of type {type_id}")
    if w_nbytes != need:
        raise ValueError(f"dequantize: {n} values of type {type_id} need {need} bytes, got {w_nbytes}")
    if n == 0:
        return
    _addr_check(w, "addr_dequantize weights")
    _addr_check(out, "addr_dequantize out")
    check_aligned(<const void *>w, type_id, "dequantize")
    cdef int st
    with nogil:
        st = lowbit_dequantize(type_id, <const void *>w, n, <float *>out)
    check(st, "dequantize")


def addr_quantize_act_for(int type_id, uintptr_t x, int64_t rows, int64_t n, uintptr_t q,
                          uintptr_t d, uintptr_t s):
    """Each of `rows` float32 vectors of length n at x, quantized as the library does for weight
    type type_id: q int8[rows, n], d float32[rows, n / group], s int32[rows, n / group]
    (quantize_act_for's twin, row by row)."""
    cdef int64_t group = act_group(type_id)
    if rows < 0 or n < 0 or n % group:
        raise ValueError(f"quantize_act_for: length {n} is not a multiple of the group size {group}")
    if rows == 0 or n == 0:
        return
    for p, what in ((x, "x"), (q, "q"), (d, "d"), (s, "s")):
        _addr_check(p, f"addr_quantize_act_for {what}")
    cdef int64_t r, ng = n // group
    cdef int st = LOWBIT_OK
    with nogil:
        for r in range(rows):
            st = lowbit_quantize_act_for(type_id, <const float *>x + r * n, n,
                                         <int8_t *>q + r * n, <float *>d + r * ng,
                                         <int32_t *>s + r * ng)
            if st != LOWBIT_OK:
                break
    check(st, f"quantize_act_for type {type_id}")


def addr_fwht(uintptr_t x, int64_t rows, int64_t n, int64_t block, bint normalize,
              uintptr_t signs, int order, int threads=0):
    """In place on `rows` float32 vectors of length n at x: the blockwise Walsh-Hadamard transform
    (lowbit_fwht_f32; signs: n float32 +-1 at that address, or 0 for none; order 0: signs first)."""
    if rows < 0 or n < 0:
        raise ValueError(f"fwht: negative size ({rows}, {n})")
    if rows == 0 or n == 0:
        return
    _addr_check(x, "addr_fwht x")
    cdef int st
    with nogil:
        st = lowbit_fwht_f32(<float *>x, rows, n, block, normalize, <const float *>signs, order,
                             threads)
    check(st, f"fwht of length {n} in blocks of {block}")


def addr_matrix_gemm(PackedMatrix m not None, uintptr_t x, int64_t batch, uintptr_t y,
                     int threads=0):
    """y[batch, m.rows] = x[batch, m.cols] . m^T, float32 at those addresses (PackedMatrix.gemm's
    twin)."""
    if batch < 0:
        raise ValueError(f"addr_matrix_gemm: negative batch {batch}")
    if batch == 0:
        return
    _addr_check(x, "addr_matrix_gemm x")
    _addr_check(y, "addr_matrix_gemm y")
    cdef int st
    with nogil:
        st = lowbit_matrix_gemm(m.m, <const float *>x, batch, <float *>y, threads)
    check(st, "gemm")
