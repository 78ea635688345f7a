"""The C surface, used the four ways other runtimes use it, against the installed package only:
a C program linking liblowbit, ctypes, a Cython extension that cimports pylowbit, and a C
extension that takes the capsule."""
import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import numpy as np
import pytest

import pylowbit as lb

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")  # present on every CI machine


def libdir():
    return lb.get_library_dirs()[0]


def compile_extension(tmp_path, name, c_file):
    """Build a Python extension module from one C file and import it."""
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    out = tmp_path / f"{name}{ext}"
    cmd = [CC, "-shared", "-fPIC", "-O1", str(c_file), "-o", str(out),
           f"-I{sysconfig.get_paths()['include']}", f"-I{lb.get_include()}",
           f"-L{libdir()}", f"-Wl,-rpath,{libdir()}", "-llowbit"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    spec = importlib.util.spec_from_file_location(name, out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference(rows=8, cols=512, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    x = rng.standard_normal(cols).astype(np.float32)
    q = lb.quantize(w, "tq2_0")
    return w, x, q, q.gemv(x, threads=1)


def test_installed_files_are_there():
    assert os.path.isfile(os.path.join(lb.get_include(), "lowbit", "lowbit.h"))
    assert os.path.isfile(os.path.join(lb.get_include(), "lowbit", "formats.h"))
    assert any(f.startswith("liblowbit") for f in os.listdir(libdir()))
    pc = open(os.path.join(lb.get_pkgconfig_dir(), "lowbit.pc")).read()
    assert "-llowbit" in pc


def test_c_program_links_and_computes_gemv(tmp_path):
    src = tmp_path / "prog.c"
    src.write_text(textwrap.dedent(r"""
        #include <stdio.h>
        #include <stdlib.h>
        #include "lowbit/lowbit.h"
        int main(void) {
            enum { R = 8, C = 512 };
            if (lowbit_abi_version() != LOWBIT_ABI_VERSION) { puts("abi mismatch"); return 2; }
            float *w = malloc(sizeof(float) * R * C), x[C], y[R];
            FILE *f = fopen("in.bin", "rb");
            if (fread(w, sizeof(float), R * C, f) != R * C || fread(x, sizeof(float), C, f) != C) return 3;
            fclose(f);
            void *q = malloc(lowbit_tensor_bytes(LOWBIT_TYPE_TQ2_0, R * C));
            int st = lowbit_quantize(LOWBIT_TYPE_TQ2_0, w, R * C, q);
            if (!st) st = lowbit_gemv(LOWBIT_TYPE_TQ2_0, q, R, C, x, y, 1);
            if (st) { printf("error %s\n", lowbit_status_str(st)); return 1; }
            /* a bad size is reported, not crashed on */
            if (lowbit_gemv(LOWBIT_TYPE_TQ2_0, q, R, C - 1, x, y, 1) != LOWBIT_ESIZE) return 4;
            for (int i = 0; i < R; i++) printf("%.9g\n", y[i]);
            printf("isa %s\n", lowbit_isa_name(lowbit_isa_active()));
            return 0;
        }
    """))
    w, x, _, expect = reference()
    (tmp_path / "in.bin").write_bytes(w.tobytes() + x.tobytes())
    exe = tmp_path / "prog"
    subprocess.run([CC, str(src), "-o", str(exe), f"-I{lb.get_include()}", f"-L{libdir()}",
                    f"-Wl,-rpath,{libdir()}", "-llowbit"], check=True, capture_output=True)
    r = subprocess.run([str(exe)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.split("\n")
    np.testing.assert_array_equal(np.array(lines[:8], dtype=np.float32), expect)
    assert lines[8] == f"isa {lb.isa_active()}"


def test_ctypes_session():
    lib = ctypes.CDLL(os.path.join(libdir(), "liblowbit.so" if sys.platform != "darwin"
                                   else "liblowbit.dylib"))
    lib.lowbit_version.restype = ctypes.c_char_p
    assert lib.lowbit_version().decode() == lb._lowbit.version()
    w, x, q, expect = reference(seed=1)
    y = np.empty(8, np.float32)
    lib.lowbit_gemv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    st = lib.lowbit_gemv(35, q.data.ctypes.data, 8, 512, x.ctypes.data, y.ctypes.data, 1)
    assert st == 0
    np.testing.assert_array_equal(y, expect)
    lib.lowbit_status_str.restype = ctypes.c_char_p
    st = lib.lowbit_gemv(77, q.data.ctypes.data, 8, 512, x.ctypes.data, y.ctypes.data, 1)
    assert lib.lowbit_status_str(st).decode() == "unknown or unsupported tensor type"


def test_cython_extension_cimports_pylowbit_and_runs_nogil(tmp_path):
    pyx = tmp_path / "cy_user.pyx"
    pyx.write_text(textwrap.dedent("""
        # cython: language_level=3
        from pylowbit.lowbit cimport lowbit_gemv, LOWBIT_OK
        def gemv(const unsigned char[::1] w, int rows, int cols, const float[::1] x, float[::1] y):
            cdef int st
            with nogil:
                st = lowbit_gemv(35, &w[0], rows, cols, &x[0], &y[0], 1)
            return st == LOWBIT_OK
    """))
    pkg_parent = os.path.dirname(os.path.dirname(lb.__file__))
    r = subprocess.run([sys.executable, "-m", "cython", "-3", str(pyx), "-I", pkg_parent, "-o",
                        str(tmp_path / "cy_user.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    mod = compile_extension(tmp_path, "cy_user", tmp_path / "cy_user.c")
    w, x, q, expect = reference(seed=2)
    y = np.empty(8, np.float32)
    assert mod.gemv(q.data, 8, 512, x, y)
    np.testing.assert_array_equal(y, expect)


CAPSULE_USER = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "lowbit/capi.h"

static PyObject *gemv(PyObject *self, PyObject *args) {
    Py_buffer w, x, y;
    int rows, cols;
    if (!PyArg_ParseTuple(args, "y*y*w*ii", &w, &x, &y, &rows, &cols)) return NULL;
    const lowbit_capi *api = lowbit_capi_import(LOWBIT_ABI_VERSION);
    int st = -100;
    if (api) {
        Py_BEGIN_ALLOW_THREADS
        st = api->gemv(LOWBIT_TYPE_TQ2_0, w.buf, rows, cols, (const float *)x.buf, (float *)y.buf, 1);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&w); PyBuffer_Release(&x); PyBuffer_Release(&y);
    if (!api) return NULL;
    return PyLong_FromLong(st);
}

static PyObject *import_abi(PyObject *self, PyObject *args) {
    int abi;
    if (!PyArg_ParseTuple(args, "i", &abi)) return NULL;
    if (!lowbit_capi_import(abi)) return NULL;
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {{"gemv", gemv, METH_VARARGS, NULL},
                                {"import_abi", import_abi, METH_VARARGS, NULL}, {NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "capsule_user", NULL, -1, methods};
PyMODINIT_FUNC PyInit_capsule_user(void) { return PyModule_Create(&mod); }
"""


def test_extension_takes_the_capsule(tmp_path):
    src = tmp_path / "capsule_user.c"
    src.write_text(CAPSULE_USER)
    mod = compile_extension(tmp_path, "capsule_user", src)
    w, x, q, expect = reference(seed=3)
    y = np.empty(8, np.float32)
    assert mod.gemv(q.data.tobytes(), x.tobytes(), y, 8, 512) == 0
    np.testing.assert_array_equal(y, expect)
    # An extension built against another ABI is refused with a message, not a crash.
    with pytest.raises(ImportError, match="ABI 999.*provides ABI 1"):
        mod.import_abi(999)
