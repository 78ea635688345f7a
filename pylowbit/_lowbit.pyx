# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin wrappers over liblowbit: check arrays, release the GIL, call C, turn status codes into
exceptions.  Friendlier objects (QTensor, format names) live in pylowbit/core.py."""
import os

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uintptr_t
from libc.stdlib cimport malloc, free

from pylowbit.lowbit cimport *

cnp.import_array()

ABI_VERSION = LOWBIT_ABI_VERSION


cdef int check(int status, str what) except -1:
    if status == LOWBIT_OK:
        return 0
    msg = f"{what}: {lowbit_status_str(status).decode()}"
    if status == LOWBIT_ENOMEM:
        raise MemoryError(msg)
    if status == LOWBIT_EISA:
        raise RuntimeError(msg)
    raise ValueError(msg)


def version():
    return lowbit_version().decode()


def abi_version():
    return lowbit_abi_version()


# ---- types ----------------------------------------------------------------------------------

def type_info(int type_id):
    """(name, type_id, block_size, block_bytes) of a GGUF type id known to liblowbit."""
    if not lowbit_type_known(type_id):
        raise ValueError(f"unknown tensor type id {type_id}")
    return (lowbit_type_name(type_id).decode(), type_id, lowbit_type_block_size(type_id),
            lowbit_type_block_bytes(type_id))


def type_from_name(str name):
    cdef int t = lowbit_type_from_name(name.encode())
    if t < 0:
        raise ValueError(f"unknown format name {name!r}")
    return t


def tensor_nbytes(int type_id, int64_t nelem):
    cdef int64_t b = lowbit_tensor_bytes(type_id, nelem)
    if b < 0:
        check(<int>b, f"{nelem} elements of type {type_id}")
    return b


def act_group(int type_id):
    cdef int64_t g = lowbit_act_group(type_id)
    if g < 0:
        check(<int>g, f"type {type_id}")
    return g


_RULE_NAMES = {LOWBIT_RULE_A8: "a8", LOWBIT_RULE_Q8_0: "q8_0", LOWBIT_RULE_Q8_K: "q8_k",
               LOWBIT_RULE_P2: "p2", LOWBIT_RULE_S8: "s8"}


def type_facts(int type_id):
    """The format facts table's row (lowbit_type_facts_get): block size and bytes, the byte offset
    of the fp16 scale in a block (-1: none), of a second scale (-1: none), activation group and
    rule name, code offset."""
    cdef lowbit_type_facts f
    check(lowbit_type_facts_get(type_id, &f), f"type {type_id}")
    return {"block_size": f.block_size, "block_bytes": f.block_bytes,
            "scale_offset": f.scale_offset, "scale2_offset": f.scale2_offset,
            "act_group": f.act_group, "act_rule": _RULE_NAMES[f.act_rule],
            "code_offset": f.code_offset}


cdef int check_aligned(const void *p, int type_id, str what) except -1:
    # Blocks hold fp16 scales (2-byte aligned structs); F32 needs 4.
    cdef uintptr_t need = 4 if type_id == 0 else 2
    if (<uintptr_t>p) % need:
        raise ValueError(f"{what}: buffer address is not {need}-byte aligned; copy it "
                         f"(np.ascontiguousarray(..., dtype=np.uint8).copy())")
    return 0


# ---- codecs ---------------------------------------------------------------------------------

def quantize(const float[::1] x not None, int type_id):
    """Quantize a flat float32 array (a whole tensor) into a new uint8 array of GGUF bytes."""
    cdef int64_t n = x.shape[0]
    cdef int64_t nbytes = lowbit_tensor_bytes(type_id, n)
    if nbytes < 0:
        check(<int>nbytes, f"quantize {n} values to type {type_id}")
    out = np.empty(nbytes, dtype=np.uint8)
    cdef uint8_t[::1] o = out
    cdef int st
    with nogil:
        st = lowbit_quantize(type_id, &x[0] if n else NULL, n, &o[0] if nbytes else NULL)
    if n == 0:
        return out
    if st == LOWBIT_EINVAL:
        raise ValueError("quantize: input contains NaN or infinity")
    check(st, "quantize")
    return out


def dequantize(const uint8_t[::1] data not None, int type_id, int64_t n):
    """Decode n values of type `type_id` from GGUF bytes into a new float32 array."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, n)
    if need < 0:
        check(<int>need, f"dequantize {n} values of type {type_id}")
    if data.shape[0] != need:
        raise ValueError(f"dequantize: {n} values of type {type_id} need {need} bytes, "
                         f"got {data.shape[0]}")
    out = np.empty(n, dtype=np.float32)
    if n == 0:
        return out
    cdef float[::1] o = out
    check_aligned(&data[0], type_id, "dequantize")
    cdef int st
    with nogil:
        st = lowbit_dequantize(type_id, &data[0], n, &o[0])
    check(st, "dequantize")
    return out


def quantize_act(const float[::1] x not None, int64_t group):
    """A8 activation quantization: returns (codes int8[n], scales float32[n/group], sums int32)."""
    cdef int64_t n = x.shape[0]
    if group <= 0 or n % group:
        raise ValueError(f"quantize_act: length {n} is not a multiple of the group size {group}")
    q = np.empty(n, dtype=np.int8)
    d = np.empty(n // group, dtype=np.float32)
    s = np.empty(n // group, dtype=np.int32)
    if n == 0:
        return q, d, s
    cdef int8_t[::1] qv = q
    cdef float[::1] dv = d
    cdef int32_t[::1] sv = s
    cdef int st
    with nogil:
        st = lowbit_quantize_act(&x[0], n, group, &qv[0], &dv[0], &sv[0])
    check(st, "quantize_act")
    return q, d, s


def quantize_act_for(const float[::1] x not None, int type_id):
    """A8 activation quantization as the library does it for weight type `type_id` (its group
    lowbit_act_group and its rounding rule, formats.h): (codes int8[n], scales float32[n/group],
    sums int32)."""
    cdef int64_t n = x.shape[0]
    cdef int64_t group = act_group(type_id)
    if n % group:
        raise ValueError(f"quantize_act_for: length {n} is not a multiple of the group size {group}")
    q = np.empty(max(n, 1), dtype=np.int8)  # n == 0 still asks C whether the type quantizes
    d = np.empty(max(n // group, 1), dtype=np.float32)
    s = np.empty(max(n // group, 1), dtype=np.int32)
    cdef float x0 = 0
    cdef const float *xp = &x[0] if n else &x0
    cdef int8_t[::1] qv = q
    cdef float[::1] dv = d
    cdef int32_t[::1] sv = s
    cdef int st
    with nogil:
        st = lowbit_quantize_act_for(type_id, xp, n, &qv[0], &dv[0], &sv[0])
    check(st, f"quantize_act_for type {type_id}")
    return q[:n], d[:n // group], s[:n // group]


# ---- matrix products ------------------------------------------------------------------------

def gemm(const uint8_t[::1] w not None, int type_id, int64_t rows, int64_t cols,
         const float[:, ::1] x not None, float[:, ::1] out not None, int threads=0):
    """out[batch, rows] = x[batch, cols] . W^T for W (rows x cols) in GGUF bytes of `type_id`."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, rows * cols) if rows >= 0 and cols >= 0 else -1
    if need < 0:
        check(<int>need if need < 0 else LOWBIT_EINVAL, f"matrix {rows}x{cols} of type {type_id}")
    if w.shape[0] != need:
        raise ValueError(f"weights of type {type_id}, shape ({rows}, {cols}) need {need} bytes, "
                         f"got {w.shape[0]}")
    if x.shape[1] != cols:
        raise ValueError(f"activations have {x.shape[1]} columns, the matrix has {cols}")
    if out.shape[0] != x.shape[0] or out.shape[1] != rows:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), "
                         f"expected ({x.shape[0]}, {rows})")
    cdef int64_t batch = x.shape[0]
    if batch == 0 or rows == 0:
        return
    if cols == 0:
        out[:, :] = 0
        return
    check_aligned(&w[0], type_id, "gemm")
    cdef int st
    with nogil:
        st = lowbit_gemm(type_id, &w[0], rows, cols, &x[0, 0], batch, &out[0, 0], threads)
    check(st, "gemm")


def gemv_act(const uint8_t[::1] w not None, int type_id, int64_t rows, int64_t cols,
             const int8_t[::1] q not None, const float[::1] d not None,
             const int32_t[::1] s not None, float[::1] out not None, int threads=0):
    """GEMV with activations already in A8 form (for kernel tests)."""
    cdef int64_t need = lowbit_tensor_bytes(type_id, rows * cols)
    if need < 0:
        check(<int>need, f"matrix {rows}x{cols} of type {type_id}")
    cdef int64_t G = lowbit_act_group(type_id)
    if w.shape[0] != need or q.shape[0] != cols or d.shape[0] * G != cols or s.shape[0] * G != cols \
            or out.shape[0] != rows:
        raise ValueError("gemv_act: inconsistent array sizes")
    if rows == 0 or cols == 0:
        return
    check_aligned(&w[0], type_id, "gemv_act")
    cdef lowbit_act a
    a.q = &q[0]
    a.d = &d[0]
    a.s = &s[0]
    a.n = cols
    a.group = G
    cdef int st
    with nogil:
        st = lowbit_gemm_act(type_id, &w[0], rows, cols, &a, 1, &out[0], threads)
    check(st, "gemv_act")


# ---- packed matrices ------------------------------------------------------------------------

cdef class PackedMatrix:
    """A weight matrix repacked once into liblowbit's row-interleaved layout (lowbit_matrix).

    For types that are not repacked (Q8_0, Q1_0, F16, F32) it borrows the given buffer, and keeps
    a reference to it so the buffer outlives the C object."""
    cdef lowbit_matrix *m
    cdef object _keep
    cdef readonly int type_id
    cdef readonly int64_t rows, cols

    def __cinit__(self, const uint8_t[::1] w not None, int type_id, int64_t rows, int64_t cols,
                  int threads=0):
        self.m = NULL
        cdef int64_t need = lowbit_tensor_bytes(type_id, rows * cols) if rows >= 0 and cols >= 0 else -1
        if need < 0:
            check(<int>need if need < 0 else LOWBIT_EINVAL, f"matrix {rows}x{cols} of type {type_id}")
        if w.shape[0] != need:
            raise ValueError(f"weights of type {type_id}, shape ({rows}, {cols}) need {need} bytes, "
                             f"got {w.shape[0]}")
        if need == 0:
            raise ValueError("cannot pack an empty matrix")
        check_aligned(&w[0], type_id, "pack")
        cdef int st = 0
        with nogil:
            self.m = lowbit_matrix_pack(type_id, &w[0], rows, cols, threads, &st)
        check(st, "pack")
        if self.m == NULL:
            raise MemoryError("pack")
        self._keep = None if lowbit_matrix_is_packed(self.m) else w
        self.type_id, self.rows, self.cols = type_id, rows, cols

    def __dealloc__(self):
        if self.m != NULL:
            lowbit_matrix_free(self.m)
            self.m = NULL

    @property
    def nbytes(self):
        """Bytes owned by the packed copy (0 when the file buffer is borrowed)."""
        return lowbit_matrix_nbytes(self.m)

    @property
    def is_packed(self):
        return bool(lowbit_matrix_is_packed(self.m))

    def gemm(self, const float[:, ::1] x not None, float[:, ::1] out not None, int threads=0):
        """out[batch, rows] = x[batch, cols] . W^T"""
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
            st = lowbit_matrix_gemm(self.m, &x[0, 0], batch, &out[0, 0], threads)
        check(st, "gemm")

    def gemv_act(self, const int8_t[::1] q not None, const float[::1] d not None,
                 const int32_t[::1] s not None, float[::1] out not None, int threads=0):
        """GEMV with activations already in A8 form (for kernel tests)."""
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
            st = lowbit_matrix_gemm_act(self.m, &a, 1, &out[0], threads)
        check(st, "gemv_act")


cdef float *_f32_matrix(object a, int64_t rows, int64_t cols, bint out, str what,
                        Py_ssize_t idx=-1) except NULL:
    """Data pointer of a C-contiguous float32 (rows, cols) array (writeable if out), else raise.
    (The name is `what`, or `what[idx]`, formatted only on error: this runs ~300 times a token.)"""
    if not cnp.PyArray_Check(a):
        raise TypeError(f"{_name(what, idx)} must be a numpy array, not {type(a).__name__}")
    cdef cnp.ndarray arr = <cnp.ndarray>a
    if cnp.PyArray_TYPE(arr) != cnp.NPY_FLOAT32 or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
        raise ValueError(f"{_name(what, idx)} must be a C-contiguous float32 array")
    if cnp.PyArray_NDIM(arr) != 2 or cnp.PyArray_DIM(arr, 0) != rows or cnp.PyArray_DIM(arr, 1) != cols:
        raise ValueError(f"{_name(what, idx)} has shape {a.shape}, expected ({rows}, {cols})")
    if out and not cnp.PyArray_ISWRITEABLE(arr):
        raise ValueError(f"{_name(what, idx)} is read-only")
    return <float *>cnp.PyArray_DATA(arr)


cdef str _name(str what, Py_ssize_t idx):
    return what if idx < 0 else f"{what}[{idx}]"


cdef int64_t _batch(object x, str what) except -1:
    if not cnp.PyArray_Check(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != 2:
        raise ValueError(f"{what}: x must be a 2-D float32 array (batch, cols)")
    return cnp.PyArray_DIM(<cnp.ndarray>x, 0)


cdef const lowbit_matrix *matrix_of(object m) except NULL:
    if not isinstance(m, PackedMatrix):
        raise TypeError(f"expected a PackedMatrix, got {type(m).__name__}")
    return (<PackedMatrix>m).m


def gemm_multi(tuple mats not None, x, tuple outs not None, int threads=0):
    """outs[j][batch, rows_j] = x[batch, cols] . mats[j]^T for PackedMatrix objects sharing x:
    one activation quantization and one thread-pool job for all of them (a decode step's q, k, v).
    mats and outs are tuples; no output may overlap x or another output."""
    cdef Py_ssize_t n = len(mats), j
    if n < 1 or n > LOWBIT_MULTI_MAX or len(outs) != n:
        raise ValueError(f"gemm_multi: 1 to {LOWBIT_MULTI_MAX} matrices with one output each, "
                         f"got {n} and {len(outs)}")
    cdef const lowbit_matrix *ms[8]  # LOWBIT_MULTI_MAX
    cdef float *ys[8]
    cdef PackedMatrix pm
    cdef int64_t batch = _batch(x, "gemm_multi"), cols = 0
    for j in range(n):
        if not isinstance(mats[j], PackedMatrix):
            raise TypeError(f"gemm_multi: matrix {j} is a {type(mats[j]).__name__}, not a PackedMatrix")
        pm = <PackedMatrix>mats[j]
        if j == 0:
            cols = pm.cols
        elif pm.cols != cols:
            raise ValueError(f"gemm_multi: matrix {j} has {pm.cols} columns, matrix 0 has {cols}")
        ms[j] = pm.m
        ys[j] = _f32_matrix(outs[j], batch, pm.rows, True, "outs", j) if batch else NULL
    if batch == 0:
        return
    cdef const float *xp = _f32_matrix(x, batch, cols, False, "x")
    cdef int st
    with nogil:
        st = lowbit_matrix_gemm_multi(ms, <int>n, xp, batch, ys, threads)
    check(st, "gemm_multi")


def gemm_glu(PackedMatrix gate not None, PackedMatrix up not None, int act, x, out, up_out,
             int threads=0):
    """out = act(x . gate^T) * (x . up^T), act an id of pylowbit._ops.ACTIVATIONS; up_out
    (same shape as out, another array) receives x . up^T.  One job of the thread pool."""
    if gate.rows != up.rows or gate.cols != up.cols:
        raise ValueError(f"gemm_glu: gate is ({gate.rows}, {gate.cols}), up is ({up.rows}, {up.cols})")
    cdef int64_t batch = _batch(x, "gemm_glu")
    if out is up_out:
        raise ValueError("gemm_glu: out and up_out must be different arrays")
    if batch == 0:
        return
    cdef const float *xp = _f32_matrix(x, batch, gate.cols, False, "x")
    cdef float *yp = _f32_matrix(out, batch, gate.rows, True, "out")
    cdef float *up_ = _f32_matrix(up_out, batch, gate.rows, True, "up_out")
    cdef int st
    with nogil:
        st = lowbit_matrix_gemm_glu(gate.m, up.m, act, xp, batch, yp, up_, threads)
    check(st, "gemm_glu")


def stream_read(const uint8_t[::1] buf not None, int threads=0):
    """Read every byte of buf (a trailing part of under 64 bytes is skipped) on `threads` pool
    threads; returns the sum of its 64-bit words mod 2^64.  Time it to measure the machine's
    streaming read bandwidth."""
    cdef int64_t n = buf.shape[0] // 64 * 64
    cdef uint64_t r = 0
    if n:
        with nogil:
            r = lowbit_stream_read(&buf[0], n, threads)
    return r


# ---- ISA dispatch and threads ---------------------------------------------------------------

def _isa_list(unsigned mask):
    return [lowbit_isa_name(i).decode() for i in range(LOWBIT_ISA_COUNT) if mask & (1u << i)]


def isa_compiled():
    return _isa_list(lowbit_isa_compiled())


def isa_supported():
    return _isa_list(lowbit_isa_supported())


def isa_active():
    return lowbit_isa_name(lowbit_isa_active()).decode()


def isa_env_error():
    cdef const char *e = lowbit_isa_env_error()
    return None if e == NULL else e.decode()


def set_isa(str name):
    cdef int isa = lowbit_isa_from_name(name.encode())
    if isa < 0:
        raise ValueError(f"unknown ISA variant {name!r}; known: scalar, avx2, avx512vnni, neon, dotprod")
    if not (lowbit_isa_compiled() >> isa) & 1:
        raise RuntimeError(f"ISA variant {name!r} is not compiled into this build "
                           f"(compiled: {', '.join(isa_compiled())})")
    if lowbit_set_isa(isa) != LOWBIT_OK:
        raise RuntimeError(f"this CPU does not support ISA variant {name!r} "
                           f"(supported: {', '.join(isa_supported())})")


# ---- the kernel list -------------------------------------------------------------------------

LAYOUTS = ("none", "file", "packed", "base3")
ROLES = tuple(lowbit_role_name(i).decode() for i in range(LOWBIT_ROLE_COUNT))
OPS = tuple(lowbit_op_name(i).decode() for i in range(LOWBIT_OP_COUNT))  # role "op": its "fmt"


def kernels():
    """Every kernel of this build (the C kernel list, in its order): dicts with name, isa,
    fmt (the weight format's name, None: any; role "op": the op's name, one of OPS), layout,
    role, requires, when."""
    cdef lowbit_kernel_info k
    out = []
    for i in range(lowbit_kernel_count()):
        check(lowbit_kernel_get(i, &k), f"kernel {i}")
        fmt = (lowbit_op_name(k.type) if k.role == LOWBIT_ROLE_OP else
               lowbit_type_name(k.type) if k.type >= 0 else NULL)
        out.append({"index": i, "name": k.name.decode(), "isa": lowbit_isa_name(k.isa).decode(),
                    "fmt": fmt.decode() if fmt != NULL else None,
                    "layout": lowbit_layout_name(k.layout).decode(),
                    "role": lowbit_role_name(k.role).decode(), "requires": k.requires.decode(),
                    "when": k.when.decode()})
    return out


def kernel_selected(str isa, fmt, str layout, str role, int64_t cols=0):
    """The name of the kernel variant `isa` runs for (fmt, layout, role) on rows of `cols`
    weights (fmt None: the quantizer, the read probe, the FWHT; role "op": fmt is the op's name,
    one of OPS), or None (none: no pairing, or a layout the format does not take)."""
    cdef int isa_id = lowbit_isa_from_name(isa.encode())
    if isa_id < 0:
        raise ValueError(f"unknown ISA variant {isa!r}")
    if layout not in LAYOUTS or role not in ROLES:
        raise ValueError(f"layout must be one of {LAYOUTS} and role one of {ROLES}")
    cdef int t = -1
    if role == "op":
        if fmt not in OPS:
            raise ValueError(f"an op kernel's fmt must be one of {OPS}, got {fmt!r}")
        t = OPS.index(fmt)
    elif fmt is not None:
        t = lowbit_type_from_name(fmt.encode())
        if t < 0:
            raise ValueError(f"unknown format {fmt!r}")
    cdef int i = lowbit_kernel_selected(isa_id, t, LAYOUTS.index(layout), ROLES.index(role), cols)
    if i == LOWBIT_EISA:
        raise RuntimeError(f"ISA variant {isa!r} is not usable here")
    if i < -1:
        check(i, "kernel_selected")
    if i < 0:
        return None
    cdef lowbit_kernel_info k
    check(lowbit_kernel_get(i, &k), f"kernel {i}")
    return k.name.decode()


def prefer_kernel(name):
    """Tests: the named kernel wins wherever it fits (lowbit_kernel_prefer), None restores the
    list's order.  Matrices packed before keep their kernels."""
    cdef int i = -1
    if name is not None:
        names = [k["name"] for k in kernels()]
        if name not in names:
            raise ValueError(f"no kernel named {name!r} in this build")
        i = names.index(name)
    check(lowbit_kernel_prefer(i), "prefer_kernel")


def get_threads():
    return lowbit_get_threads()


def set_threads(int n):
    if lowbit_set_threads(n) != LOWBIT_OK:
        raise ValueError(f"threads must be between 1 and 256, got {n}")


I2S_ACT_SCALES = ("bitnet", "pow2")


def set_i2s_act_scale(mode):
    """I2_S's activation scale, process-wide: "bitnet" (the default: bitnet.cpp's 127 / max|x| per
    vector) or "pow2" (that step rounded up to a power of two: up to one bit of activation
    resolution less).  Returns the previous mode."""
    if mode not in I2S_ACT_SCALES:
        raise ValueError(f"I2_S activation scale must be one of {I2S_ACT_SCALES}, got {mode!r}")
    return I2S_ACT_SCALES[lowbit_set_i2s_act_scale(I2S_ACT_SCALES.index(mode))]


def threads_origin():
    return lowbit_threads_origin().decode()


def threads_for_topology(sys_root, allowed_cpus=None):
    cdef char why[256]
    cdef bytes root_b = None if sys_root is None else os.fsencode(sys_root)
    cdef bytes allowed_b = None if allowed_cpus is None else str(allowed_cpus).encode()
    cdef const char *root_p = NULL
    cdef const char *allowed_p = NULL
    if root_b is not None:
        root_p = root_b
    if allowed_b is not None:
        allowed_p = allowed_b
    cdef int n = lowbit_threads_for_topology(root_p, allowed_p, why, sizeof(why))
    if n < 0:
        raise ValueError(f"allowed_cpus: {why.decode()} (expected a CPU list such as '0-3,8')")
    return n, why.decode()
