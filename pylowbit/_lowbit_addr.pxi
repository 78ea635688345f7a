# Address-level entry points, part of the _lowbit module (included by _lowbit.pyx): for runtimes
# that hold their own tensors (pylowbit.torch) and pass raw data addresses and sizes.  Each checks
# the sizes it is given against the format's, releases the GIL and calls the same liblowbit entry
# point as its numpy twin above.  The caller vouches that each address spans the bytes named.
from libc.string cimport memcmp, memset


cdef int _addr_check(uintptr_t p, str what) except -1:
    if p == 0:
        raise ValueError(f"{what}: null address")
    return 0


def addr_gemm(int type_id, uintptr_t w, int64_t w_nbytes, int64_t rows, int64_t cols,
              uintptr_t x, int64_t batch, uintptr_t y, int threads=0, int dtype=ADDR_F32):
    """y[batch, rows] = x[batch, cols] . W^T: W the w_nbytes GGUF bytes of a rows x cols matrix of
    type_id at address w, x and y C-contiguous at their addresses, both float32 (dtype ADDR_F32)
    or both bfloat16 (ADDR_BF16) (gemm's twin)."""
    _check_weights(w_nbytes, type_id, rows, cols)
    if batch < 0:
        raise ValueError(f"addr_gemm: negative batch {batch}")
    if dtype != ADDR_F32 and dtype != ADDR_BF16:
        raise ValueError(f"addr_gemm: unknown dtype code {dtype}")
    if batch == 0 or rows == 0:
        return
    _addr_check(y, "addr_gemm y")
    if cols == 0:
        memset(<void *>y, 0, <size_t>(batch * rows) * (sizeof(float) if dtype == ADDR_F32 else 2))
        return
    _addr_check(w, "addr_gemm weights")
    _addr_check(x, "addr_gemm x")
    check_aligned(<const void *>w, type_id, "gemm")
    cdef const float *xf = <const float *>x
    cdef float *yf = <float *>y
    cdef float *tmp = NULL
    if dtype == ADDR_BF16:
        tmp = <float *>malloc(<size_t>(batch * (cols + rows)) * sizeof(float))
        if tmp == NULL:
            raise MemoryError("addr_gemm")
        bf16_to_f32(<const uint16_t *>x, tmp, batch * cols)
        xf, yf = tmp, tmp + batch * cols
    cdef int st
    with nogil:
        st = lowbit_gemm(type_id, <const void *>w, rows, cols, xf, batch, yf, threads)
        if dtype == ADDR_BF16:
            if st == LOWBIT_OK:
                f32_to_bf16(yf, <uint16_t *>y, batch * rows)
            free(tmp)
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


# ---- bfloat16 in and out (the conversions in C, not one torch op each way per call) -------------

cdef void bf16_to_f32(const uint16_t *src, float *dst, int64_t n) noexcept nogil:
    cdef int64_t i
    cdef uint32_t *d = <uint32_t *>dst
    for i in range(n):
        d[i] = (<uint32_t>src[i]) << 16


cdef void f32_to_bf16(const float *src, uint16_t *dst, int64_t n) noexcept nogil:
    # round to nearest even; a NaN becomes the quiet NaN 0x7fc0 (torch's rule)
    cdef int64_t i
    cdef const uint32_t *s = <const uint32_t *>src
    cdef uint32_t u
    for i in range(n):
        u = s[i]
        if (u & 0x7fffffff) > 0x7f800000:
            dst[i] = 0x7fc0
        else:
            dst[i] = <uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16)


def addr_matrix_gemm_multi(tuple mats not None, uintptr_t x, int64_t batch, tuple ys not None,
                           int dtype, int threads=0):
    """ys[j][batch, mats[j].rows] = x[batch, cols] . mats[j]^T for PackedMatrix objects sharing x, at
    those addresses, all float32 (dtype ADDR_F32) or all bfloat16 (ADDR_BF16): one activation
    quantization and one thread-pool job for all of them (gemm_multi's twin; one matrix:
    PackedMatrix.gemm's)."""
    cdef Py_ssize_t n = len(mats), j
    if n < 1 or n > LOWBIT_MULTI_MAX or len(ys) != n:
        raise ValueError(f"addr_matrix_gemm_multi: 1 to {LOWBIT_MULTI_MAX} matrices with one output "
                         f"each, got {n} and {len(ys)}")
    if dtype != ADDR_F32 and dtype != ADDR_BF16:
        raise ValueError(f"addr_matrix_gemm_multi: unknown dtype code {dtype}")
    if batch < 0:
        raise ValueError(f"addr_matrix_gemm_multi: negative batch {batch}")
    cdef const lowbit_matrix *ms[8]  # LOWBIT_MULTI_MAX
    cdef float *yf[8]
    cdef uintptr_t yaddr[8]
    cdef int64_t rows[8]
    cdef int64_t cols = 0, total = 0
    for j in range(n):
        ms[j] = matrix_of(mats[j])
        rows[j] = (<PackedMatrix>mats[j]).rows
        if j == 0:
            cols = (<PackedMatrix>mats[j]).cols
        elif (<PackedMatrix>mats[j]).cols != cols:
            raise ValueError(f"addr_matrix_gemm_multi: matrix {j} has {(<PackedMatrix>mats[j]).cols} "
                             f"columns, matrix 0 has {cols}")
        yaddr[j] = ys[j]
        _addr_check(yaddr[j], "addr_matrix_gemm_multi y")
        total += rows[j]
    if batch == 0:
        return
    _addr_check(x, "addr_matrix_gemm_multi x")
    cdef const float *xf = <const float *>x
    cdef float *tmp = NULL
    cdef int st
    cdef int64_t off
    if dtype == ADDR_BF16:  # float32 copies of x and of every output
        tmp = <float *>malloc(<size_t>(batch * (cols + total)) * sizeof(float))
        if tmp == NULL:
            raise MemoryError("addr_matrix_gemm_multi")
        bf16_to_f32(<const uint16_t *>x, tmp, batch * cols)
        xf = tmp
        off = batch * cols
        for j in range(n):
            yf[j] = tmp + off
            off += batch * rows[j]
    else:
        for j in range(n):
            yf[j] = <float *>yaddr[j]
    with nogil:
        if n == 1:
            st = lowbit_matrix_gemm(ms[0], xf, batch, yf[0], threads)
        else:
            st = lowbit_matrix_gemm_multi(ms, <int>n, xf, batch, yf, threads)
        if dtype == ADDR_BF16:
            if st == LOWBIT_OK:
                for j in range(n):
                    f32_to_bf16(yf[j], <uint16_t *>yaddr[j], batch * rows[j])
            free(tmp)
    check(st, "gemm")


def addr_matrix_readahead(tuple mats not None, int threads=0):
    """Read-ahead hint for the next addr_matrix_gemm_multi of one vector on `mats` with `threads`
    (lowbit_matrix_readahead): the pool's idle threads start reading the first weights each thread
    will take while the caller does other work.  Returns at once; changes no result."""
    cdef Py_ssize_t n = len(mats), j
    if n < 1 or n > LOWBIT_MULTI_MAX:
        raise ValueError(f"addr_matrix_readahead: 1 to {LOWBIT_MULTI_MAX} matrices, got {n}")
    cdef const lowbit_matrix *ms[8]  # LOWBIT_MULTI_MAX
    for j in range(n):
        ms[j] = matrix_of(mats[j])
    check(lowbit_matrix_readahead(ms, <int>n, -1, threads), "readahead")


# ---- the packed copy in a runtime's buffer (PackedMatrix(..., out=) wrote it) -----------------

cdef lowbit_matrix *_addr_wrap(uintptr_t p, int64_t nbytes, int type_id, int64_t rows,
                               int64_t cols, str what) except NULL:
    """A matrix borrowing the packed bytes at p, checked to be type_id rows x cols."""
    _addr_check(p, what)
    if p % LOWBIT_PACKED_ALIGN:
        raise ValueError(f"{what}: the packed bytes' address is not a multiple of "
                         f"{LOWBIT_PACKED_ALIGN} bytes")
    cdef int st = 0
    cdef lowbit_matrix *m = lowbit_matrix_wrap(<const void *>p, nbytes, &st)
    if m == NULL:
        if st == LOWBIT_EINVAL:
            raise ValueError(f"{what}: the bytes do not hold a matrix packed by this process "
                             f"(no valid header)")
        if st == LOWBIT_ESIZE:
            raise ValueError(f"{what}: the packed bytes ({nbytes}) are short of the matrix their "
                             f"header describes")
        check(st, what)
    if lowbit_matrix_type(m) != type_id or lowbit_matrix_rows(m) != rows \
            or lowbit_matrix_cols(m) != cols:
        got = (lowbit_matrix_type(m), lowbit_matrix_rows(m), lowbit_matrix_cols(m))
        lowbit_matrix_free(m)
        raise ValueError(f"{what}: the packed bytes hold type {got[0]} ({got[1]}, {got[2]}), "
                         f"expected type {type_id} ({rows}, {cols})")
    return m


# The matrices wrapped at each (address, size) so far: a compiled graph multiplies the same layers
# every call, and wrapping plans the kernels anew (a walk of the kernel list).  An entry is used
# only while the caller's live tensor spans those bytes and their header is the one wrapped (the
# same type, shape and layout: the same geometry over the same address, whatever the tensor).
cdef dict _wrapped = {}


cdef const lowbit_matrix *_addr_matrix(uintptr_t p, int64_t nbytes, int type_id, int64_t rows,
                                       int64_t cols, str what) except NULL:
    cdef object entry = _wrapped.get((p, nbytes)) if p % LOWBIT_PACKED_ALIGN == 0 and nbytes >= 64 else None
    cdef PackedMatrix pm
    cdef const char *h
    if entry is not None:
        pm = <PackedMatrix>entry[0]
        h = entry[1]
        if memcmp(<const void *>p, h, 64) == 0 and pm.type_id == type_id and pm.rows == rows \
                and pm.cols == cols:
            return pm.m
    cdef lowbit_matrix *m = _addr_wrap(p, nbytes, type_id, rows, cols, what)
    pm = PackedMatrix(_WRAP, -1, 0, 0)
    pm.m = m  # borrowing raw memory: used only as above
    pm.type_id, pm.rows, pm.cols = type_id, rows, cols
    if len(_wrapped) >= 4096:
        _wrapped.clear()
    _wrapped[(p, nbytes)] = (pm, (<const char *>p)[:64])
    return m


def addr_packed_gemm(int type_id, uintptr_t w, int64_t w_nbytes, int64_t rows, int64_t cols,
                     uintptr_t x, int64_t batch, uintptr_t y, int threads=0, int dtype=ADDR_F32):
    """addr_gemm's twin on packed bytes (PackedMatrix(..., out=) wrote them): wrapped (once for
    each address, size and header), not copied."""
    if batch < 0:
        raise ValueError(f"addr_packed_gemm: negative batch {batch}")
    if dtype != ADDR_F32 and dtype != ADDR_BF16:
        raise ValueError(f"addr_packed_gemm: unknown dtype code {dtype}")
    cdef const lowbit_matrix *m = _addr_matrix(w, w_nbytes, type_id, rows, cols, "gemm_packed")
    if batch == 0:
        return
    if x == 0 or y == 0:
        raise ValueError("addr_packed_gemm: null address")
    cdef const float *xf = <const float *>x
    cdef float *yf = <float *>y
    cdef float *tmp = NULL
    if dtype == ADDR_BF16:
        tmp = <float *>malloc(<size_t>(batch * (cols + rows)) * sizeof(float))
        if tmp == NULL:
            raise MemoryError("addr_packed_gemm")
        bf16_to_f32(<const uint16_t *>x, tmp, batch * cols)
        xf, yf = tmp, tmp + batch * cols
    cdef int st
    with nogil:
        st = lowbit_matrix_gemm(m, xf, batch, yf, threads)
        if dtype == ADDR_BF16:
            if st == LOWBIT_OK:
                f32_to_bf16(yf, <uint16_t *>y, batch * rows)
            free(tmp)
    check(st, "gemm_packed")


def addr_packed_unpack(int type_id, uintptr_t w, int64_t w_nbytes, int64_t rows, int64_t cols,
                       uintptr_t out, int64_t out_nbytes, int threads=0):
    """The file bytes (out_nbytes of them, at out) of the packed bytes at w (PackedMatrix.unpack's
    twin)."""
    cdef const lowbit_matrix *m = _addr_matrix(w, w_nbytes, type_id, rows, cols, "unpack")
    if out == 0:
        raise ValueError("addr_packed_unpack: null address")
    cdef int st
    with nogil:
        st = lowbit_matrix_unpack(m, <void *>out, out_nbytes, threads)
    check(st, "unpack")
