# PackedMatrix, part of the _lowbit module (included by _lowbit.pyx): a weight matrix repacked into
# liblowbit's layout, in memory of its own (lowbit_matrix_pack) or in a caller's buffer
# (lowbit_matrix_pack_into / lowbit_matrix_wrap: one copy of the weights, held by the caller, e.g. a
# torch buffer), and the file bytes back (lowbit_matrix_unpack).

cdef object _WRAP = object()  # PackedMatrix's constructor called by wrap(): filled in there


def packed_nbytes(int type_id, int64_t rows, int64_t cols):
    """Bytes PackedMatrix(..., out=buf) needs in buf for a rows x cols matrix of type_id, in the
    layout this CPU's variant (and PYLOWBIT_ISA) picks; 0 if the type is not repacked (F16, ...;
    Q1_0 and Q8_0 where the variant has no kernel for their packed layouts: PackedMatrix borrows
    the file bytes for those) or the matrix is empty."""
    cdef int64_t n = lowbit_matrix_packed_nbytes(type_id, rows, cols)
    if n < 0:
        check(<int>n, f"packed size of a {rows}x{cols} matrix of type {type_id}")
    return n


cdef char *_BYTE_FORMAT = b"B"  # the buffer format of unsigned bytes


cdef class WeightMemory:
    """nbytes (> 0) from liblowbit's allocator of packed matrices (lowbit_weights_alloc: aligned
    to PACKED_ALIGN; on Linux in huge pages, shared slabs), as a writable byte buffer; given back
    when the last array or tensor made over it goes."""
    cdef void *ptr
    cdef size_t n
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self, int64_t nbytes):
        self.ptr = NULL
        if nbytes <= 0:
            raise ValueError(f"WeightMemory: the size must be positive, got {nbytes}")
        self.ptr = lowbit_weights_alloc(<size_t>nbytes)
        if self.ptr == NULL:
            raise MemoryError(f"WeightMemory: cannot allocate {nbytes} bytes")
        self.n = <size_t>nbytes

    def __dealloc__(self):
        if self.ptr != NULL:
            lowbit_weights_free(self.ptr, self.n)

    def __getbuffer__(self, Py_buffer *buf, int flags):
        self.shape[0] = <Py_ssize_t>self.n
        self.strides[0] = 1
        buf.buf = self.ptr
        buf.obj = self
        buf.len = <Py_ssize_t>self.n
        buf.readonly = 0
        buf.itemsize = 1
        buf.format = _BYTE_FORMAT if flags & PyBUF_FORMAT else NULL
        buf.ndim = 1
        buf.shape = self.shape
        buf.strides = self.strides
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer *buf):
        pass


def empty_packed(int64_t nbytes):
    """A new uint8 numpy array of nbytes at a PACKED_ALIGN-aligned address, as PackedMatrix's `out`
    needs: memory of WeightMemory (huge pages where the system grants them, as the library's own
    packed copies), kept alive by the array."""
    if nbytes < 0:
        raise ValueError(f"empty_packed: negative size {nbytes}")
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(WeightMemory(nbytes), dtype=np.uint8)


PACKED_ALIGN = LOWBIT_PACKED_ALIGN


cdef uint8_t[::1] _packed_buffer(object buf, int64_t need, str what):
    """buf as a writable byte view of at least `need` bytes at an aligned address, else raise."""
    cdef uint8_t[::1] v
    try:
        v = buf
    except (ValueError, TypeError, BufferError) as e:
        raise TypeError(f"{what}: the buffer must be a writable, C-contiguous uint8 array "
                        f"(numpy; a torch tensor's .numpy()), got {type(buf).__name__}: {e}") from None
    if v.shape[0] < need:
        raise ValueError(f"{what}: the buffer has {v.shape[0]} bytes, the packed matrix needs {need}")
    if v.shape[0] == 0 or (<uintptr_t>&v[0]) % LOWBIT_PACKED_ALIGN:
        raise ValueError(f"{what}: the buffer's address is not a multiple of {LOWBIT_PACKED_ALIGN} "
                         f"bytes (pylowbit._lowbit.empty_packed makes one that is)")
    return v


cdef class PackedMatrix:
    """A weight matrix repacked once into liblowbit's row-interleaved layout (lowbit_matrix).

    PackedMatrix(w, type_id, rows, cols, threads=0): the packed copy in memory of its own.  For types
    that are not repacked (F16, F32; Q1_0 and Q8_0 where the variant has no kernel for their packed
    layouts: is_packed) it borrows w, and keeps a reference to it so the buffer outlives the C
    object.

    PackedMatrix(w, type_id, rows, cols, threads, out=buf): the packed copy written into `buf` (a
    writable uint8 buffer of at least packed_nbytes(type_id, rows, cols) bytes, its address a
    multiple of PACKED_ALIGN: empty_packed makes one), which it borrows and keeps a reference to;
    w may be dropped afterwards.  PackedMatrix.wrap(buf) is a matrix over such bytes packed earlier
    (in this process: the layout depends on the CPU).  unpack() gives the file bytes back."""
    cdef lowbit_matrix *m
    cdef object _keep
    cdef readonly int type_id
    cdef readonly int64_t rows, cols

    def __cinit__(self, w, int type_id, int64_t rows, int64_t cols, int threads=0, out=None):
        self.m = NULL
        if w is _WRAP:
            return
        if w is None:
            raise TypeError("PackedMatrix: w must be the matrix's file bytes, not None")
        cdef const uint8_t[::1] wv = w
        cdef int64_t need = _check_weights(wv.shape[0], type_id, rows, cols)
        if need == 0:
            raise ValueError("cannot pack an empty matrix")
        check_aligned(&wv[0], type_id, "pack")
        cdef int st = 0
        cdef int64_t size
        cdef uint8_t[::1] dst
        if out is None:
            with nogil:
                self.m = lowbit_matrix_pack(type_id, &wv[0], rows, cols, threads, &st)
            check(st, "pack")
            self._keep = None if lowbit_matrix_is_packed(self.m) else w
        else:
            size = packed_nbytes(type_id, rows, cols)
            if size == 0:
                raise ValueError(f"pack_into: type {type_id} is not repacked (pack it without out=)")
            dst = _packed_buffer(out, size, "pack_into")
            with nogil:
                self.m = lowbit_matrix_pack_into(type_id, &wv[0], rows, cols, &dst[0], dst.shape[0],
                                                 threads, &st)
            check(st, "pack_into")
            self._keep = out
        if self.m == NULL:
            raise MemoryError("pack")
        self.type_id, self.rows, self.cols = type_id, rows, cols

    @staticmethod
    def wrap(buf):
        """The matrix held in `buf`: bytes PackedMatrix(..., out=buf) wrote in this process (or a
        copy of them, at an aligned address), borrowed, not packed again."""
        cdef uint8_t[::1] v = _packed_buffer(buf, 0, "wrap")
        cdef int st = 0
        cdef PackedMatrix pm = PackedMatrix(_WRAP, -1, 0, 0)
        pm.m = lowbit_matrix_wrap(&v[0], v.shape[0], &st)
        if st == LOWBIT_EINVAL:
            raise ValueError("wrap: the buffer does not hold a matrix packed by "
                             "PackedMatrix(..., out=) (no valid header)")
        if st == LOWBIT_ESIZE:
            raise ValueError(f"wrap: the buffer's {v.shape[0]} bytes are short of the matrix its "
                             f"header describes")
        check(st, "wrap")
        pm._keep = buf
        pm.type_id = lowbit_matrix_type(pm.m)
        pm.rows, pm.cols = lowbit_matrix_rows(pm.m), lowbit_matrix_cols(pm.m)
        return pm

    def __dealloc__(self):
        if self.m != NULL:
            lowbit_matrix_free(self.m)
            self.m = NULL

    cdef const lowbit_matrix *_matrix(self) except NULL:
        if self.m == NULL:
            raise ValueError("PackedMatrix: not initialized")
        return self.m

    @property
    def nbytes(self):
        """Bytes owned by the packed copy (0 when it lies in a borrowed buffer: the file bytes
        of a type that is not repacked, or `out`)."""
        return lowbit_matrix_nbytes(self._matrix())

    @property
    def is_packed(self):
        return bool(lowbit_matrix_is_packed(self._matrix()))

    @property
    def buffer(self):
        """The buffer it borrows (`out`, wrap's buf, or the file bytes), or None."""
        return self._keep

    def unpack(self, out=None, int threads=0):
        """The matrix's file (GGUF) bytes, into `out` (a writable uint8 array of exactly that size)
        or a new numpy array: the bytes that were packed, for a canonically written file
        (lowbit_matrix_unpack: the same weights in any case)."""
        cdef const lowbit_matrix *m = self._matrix()
        cdef int64_t n = lowbit_tensor_bytes(self.type_id, self.rows * self.cols)
        if out is None:
            out = np.empty(n, dtype=np.uint8)
        cdef uint8_t[::1] o
        try:
            o = out
        except (ValueError, TypeError, BufferError) as e:
            raise TypeError(f"unpack: out must be a writable, C-contiguous uint8 array: {e}") from None
        if o.shape[0] != n:
            raise ValueError(f"unpack: the file bytes take {n} bytes, out has {o.shape[0]}")
        if n == 0:
            return out
        cdef int st
        with nogil:
            st = lowbit_matrix_unpack(m, &o[0], n, threads)
        check(st, "unpack")
        return out

    def unpack_rows(self, idx):
        """The file (GGUF) bytes of rows idx (ints in [0, rows)), as a new uint8 array of shape
        (len(idx), row bytes), row i the bytes of row idx[i] (lowbit_matrix_unpack_rows: a lookup
        in a matrix kept only packed, such as a tied embedding table).  Not for I2_S."""
        cdef const lowbit_matrix *m = self._matrix()
        cdef const int64_t[::1] iv = np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)
        cdef int64_t rb = lowbit_row_bytes(self.type_id, self.cols)
        check(<int>rb if rb < 0 else 0, "unpack_rows")
        cdef int64_t n = iv.shape[0]
        out = np.empty((n, rb), dtype=np.uint8)
        if n == 0:
            return out
        cdef uint8_t[:, ::1] o = out
        cdef int st
        with nogil:
            st = lowbit_matrix_unpack_rows(m, &iv[0], n, &o[0, 0])
        if st == LOWBIT_EINVAL:
            raise IndexError(f"unpack_rows: a row index out of range 0..{self.rows - 1}")
        check(st, "unpack_rows")
        return out

    def gemm(self, const float[:, ::1] x not None, float[:, ::1] out not None, int threads=0):
        """out[batch, rows] = x[batch, cols] . W^T"""
        cdef const lowbit_matrix *m = self._matrix()
        if x.shape[1] != self.cols:
            raise ValueError(f"activations have {x.shape[1]} columns, the matrix has {self.cols}")
        if out.shape[0] != x.shape[0] or out.shape[1] != self.rows:
            raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), "
                             f"expected ({x.shape[0]}, {self.rows})")
        cdef int64_t batch = x.shape[0]
        if batch == 0:
            return
        cdef int st
        with nogil:
            st = lowbit_matrix_gemm(m, &x[0, 0], batch, &out[0, 0], threads)
        check(st, "gemm")

    def gemv_act(self, const int8_t[::1] q not None, const float[::1] d not None,
                 const int32_t[::1] s not None, float[::1] out not None, int threads=0):
        """GEMV with activations already in A8 form (for kernel tests)."""
        cdef const lowbit_matrix *m = self._matrix()
        cdef int64_t G = lowbit_act_group(self.type_id)
        if q.shape[0] != self.cols or d.shape[0] * G != self.cols or s.shape[0] * G != self.cols \
                or out.shape[0] != self.rows:
            raise ValueError("gemv_act: inconsistent array sizes")
        cdef lowbit_act a
        a.q = &q[0]
        a.d = &d[0]
        a.s = &s[0]
        a.n = self.cols
        a.group = G
        cdef int st
        with nogil:
            st = lowbit_matrix_gemm_act(m, &a, 1, &out[0], threads)
        check(st, "gemv_act")
