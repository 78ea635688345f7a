"""liblowbit's XLA FFI handlers called directly through hand-made call frames (ctypes): the metadata
query is answered, a runtime of another ABI major version gets an error rather than a wrong
answer, and the declarations match the XLA FFI header jaxlib ships (jax.ffi.include_dir())."""
import ctypes
import os
import re
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int64, c_size_t, c_uint32,
                    c_void_p)

import jax
import numpy as np

import pylowbit as lb
from pylowbit import _native


class Ext(Structure):
    _fields_ = [("struct_size", c_size_t), ("type", c_int), ("next", c_void_p)]


class Version(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("major", c_int), ("minor", c_int)]


class ErrArgs(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("message", c_char_p), ("errc", c_int)]


ERROR_CREATE = CFUNCTYPE(c_void_p, POINTER(ErrArgs))


class Api(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("version", Version),
                ("internal", c_void_p), ("error_create", ERROR_CREATE)]


class Buffer(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("dtype", c_int), ("data", c_void_p),
                ("rank", c_int64), ("dims", POINTER(c_int64))]


class List(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("size", c_int64),
                ("types", POINTER(c_int)), ("items", POINTER(c_void_p))]


class ByteSpan(Structure):
    _fields_ = [("ptr", c_char_p), ("len", c_size_t)]


class Scalar(Structure):
    _fields_ = [("dtype", c_int), ("value", c_void_p)]


class Attrs(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("size", c_int64),
                ("types", POINTER(c_int)), ("names", POINTER(POINTER(ByteSpan))),
                ("attrs", POINTER(c_void_p))]


class Frame(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("api", POINTER(Api)), ("ctx", c_void_p),
                ("stage", c_int), ("args", List), ("rets", List), ("attrs", Attrs),
                ("future", c_void_p)]


class Metadata(Structure):
    _fields_ = [("struct_size", c_size_t), ("version", Version), ("traits", c_uint32),
                ("state_type_id", c_int64)]


class MetadataExt(Structure):
    _fields_ = [("base", Ext), ("metadata", POINTER(Metadata))]


U8, S32, S64, F32, EXECUTE = 6, 4, 5, 11, 3


class Call:
    """A call frame for lowbit_xla_gemm on numpy arrays, and the errors the handler creates."""

    def __init__(self, major=0):
        self.messages = []
        self._create = ERROR_CREATE(self._record)
        self.api = Api(ctypes.sizeof(Api), None, Version(ctypes.sizeof(Version), None, major, 3),
                       None, self._create)
        self.keep = []

    def _record(self, args):
        self.messages.append(args.contents.message.decode())
        return 1  # any non-NULL pointer stands for the error

    def _buffers(self, arrays, dtypes):
        bufs = []
        for a, dt in zip(arrays, dtypes):
            dims = (c_int64 * a.ndim)(*a.shape)
            b = Buffer(ctypes.sizeof(Buffer), None, dt, a.ctypes.data, a.ndim, dims)
            self.keep += [dims, b]
            bufs.append(ctypes.cast(ctypes.pointer(b), c_void_p))
        types = (c_int * len(bufs))(*([1] * len(bufs)))
        items = (c_void_p * len(bufs))(*bufs)
        self.keep += [types, items]
        return List(ctypes.sizeof(List), None, len(bufs), types, items)

    def _attrs(self, **kw):
        names, values = [], []
        for k, (dt, v) in kw.items():
            raw = k.encode()
            span = ByteSpan(raw, len(raw))
            val = (c_int64 if dt == S64 else ctypes.c_int32)(v)
            sc = Scalar(dt, ctypes.cast(ctypes.pointer(val), c_void_p))
            self.keep += [raw, span, val, sc]
            names.append(ctypes.pointer(span))
            values.append(ctypes.cast(ctypes.pointer(sc), c_void_p))
        n = len(names)
        types = (c_int * n)(*([3] * n))
        self.keep += [types]
        return Attrs(ctypes.sizeof(Attrs), None, n, types, (POINTER(ByteSpan) * n)(*names),
                     (c_void_p * n)(*values))

    def gemm(self, w, x, y, ext=None):
        f = Frame(ctypes.sizeof(Frame), ext, ctypes.pointer(self.api), None, EXECUTE,
                  self._buffers([w.data, x], [U8, F32]), self._buffers([y], [F32]),
                  self._attrs(type=(S32, w.type_id), rows=(S64, w.shape[0]), cols=(S64, w.shape[1]),
                              threads=(S32, 1)), None)
        fn = ctypes.CFUNCTYPE(c_void_p, POINTER(Frame))(_native.address("lowbit_xla_gemm"))
        return fn(ctypes.byref(f))


def _w():
    return lb.quantize(np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32), "tq2_0")


def test_a_hand_made_frame_runs_the_numpy_apis_product():
    w, x, y = _w(), np.ones(256, np.float32), np.zeros(8, np.float32)
    c = Call()
    assert c.gemm(w, x, y) is None and c.messages == []
    np.testing.assert_array_equal(y, w.gemv(x))


def test_metadata_query_is_answered_without_running():
    w, x, y = _w(), np.ones(256, np.float32), np.zeros(8, np.float32)
    md = Metadata(ctypes.sizeof(Metadata), Version(ctypes.sizeof(Version), None, -1, -1), 7, 0)
    ext = MetadataExt(Ext(ctypes.sizeof(MetadataExt), 1, None), ctypes.pointer(md))
    c = Call()
    assert c.gemm(w, x, y, ext=ctypes.cast(ctypes.pointer(ext), c_void_p)) is None
    assert (md.version.major, md.traits) == (0, 0) and md.version.minor >= 1
    assert not y.any()  # nothing ran


def test_another_abi_major_version_is_an_error_not_a_wrong_answer():
    w, x, y = _w(), np.ones(256, np.float32), np.zeros(8, np.float32)
    c = Call(major=1)
    assert c.gemm(w, x, y) is not None
    assert c.messages == ["pylowbit gemm: this XLA runtime's FFI ABI is not the version liblowbit "
                          "was built for"]
    assert not y.any()


def test_declarations_match_jaxlibs_header():
    # The fields read by native/src/xla_ffi.c, in the order this test's ctypes mirror declares them.
    header = open(os.path.join(jax.ffi.include_dir(), "xla", "ffi", "api", "c_api.h")).read()
    major = int(re.search(r"#define XLA_FFI_API_MAJOR (\d+)", header).group(1))
    assert major == 0

    def fields(struct):
        body = re.search(r"struct %s \{(.*?)\};" % struct, header, re.S).group(1)
        body = re.sub(r"//[^\n]*", "", body)
        return [re.findall(r"\w+", stmt)[-1] for stmt in body.split(";") if stmt.strip()]

    assert fields("XLA_FFI_Buffer") == ["struct_size", "extension_start", "dtype", "data", "rank", "dims"]
    assert fields("XLA_FFI_CallFrame")[:8] == ["struct_size", "extension_start", "api", "ctx",
                                              "stage", "args", "rets", "attrs"]
    assert fields("XLA_FFI_Attrs") == ["struct_size", "extension_start", "size", "types", "names", "attrs"]
    assert fields("XLA_FFI_Args") == ["struct_size", "extension_start", "size", "types", "args"]
    assert fields("XLA_FFI_Error_Create_Args") == ["struct_size", "extension_start", "message", "errc"]
    api = re.search(r"struct XLA_FFI_Api \{(.*?)\};", header, re.S).group(1)
    assert re.findall(r"\w+", api.split("internal_api;")[1])[:2] == ["_XLA_FFI_API_STRUCT_FIELD",
                                                                      "XLA_FFI_Error_Create"]
    assert "XLA_FFI_DataType_U8 = 6" in header and "XLA_FFI_DataType_F32 = 11" in header
    assert "XLA_FFI_ExecutionStage_EXECUTE = 3" in header and "XLA_FFI_AttrType_SCALAR = 3" in header
