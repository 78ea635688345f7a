// A C++ extension module that calls pylowbit's GEMV through the capsule pylowbit._capi.CAPI, so it
// needs pylowbit's headers to build but links nothing: the function table comes from the running
// pylowbit, whichever ISA variant it picked.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "lowbit/capi.h"

namespace {

const lowbit_capi *api = nullptr;

// A buffer held for the length of one call and released however the call ends.
struct Buffer {
    Py_buffer view{};
    bool held = false;
    bool get(PyObject *obj, int flags) { return held = PyObject_GetBuffer(obj, &view, flags) == 0; }
    ~Buffer() {
        if (held) PyBuffer_Release(&view);
    }
};

// gemv(type_id, w, rows, cols, x, y): y = W x for W stored in GGUF type `type_id` (the bytes of a
// pylowbit QTensor), x and y contiguous float32 buffers.
PyObject *gemv(PyObject *, PyObject *args) {
    int type;
    PyObject *wo, *xo, *yo;
    long long rows, cols;
    if (!PyArg_ParseTuple(args, "iOLLOO", &type, &wo, &rows, &cols, &xo, &yo)) return nullptr;
    Buffer w, x, y;
    if (!w.get(wo, PyBUF_C_CONTIGUOUS) || !x.get(xo, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) ||
        !y.get(yo, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE))
        return nullptr;
    const long long need = api->tensor_bytes(type, rows * cols);
    if (need < 0) {  // a status: unknown type, or not a whole number of blocks
        PyErr_Format(PyExc_ValueError, "type %d at %lld x %lld: %s", type, rows, cols,
                     api->status_str(static_cast<int>(need)));
        return nullptr;
    }
    if (w.view.len != need) {
        PyErr_Format(PyExc_ValueError, "w holds %zd bytes; type %d at %lld x %lld needs %lld", w.view.len,
                     type, rows, cols, need);
        return nullptr;
    }
    if (x.view.itemsize != 4 || x.view.len != cols * 4 || y.view.itemsize != 4 || y.view.len != rows * 4) {
        PyErr_SetString(PyExc_ValueError, "x must be float32 of length cols, y float32 of length rows");
        return nullptr;
    }
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = api->gemv(type, w.view.buf, rows, cols, static_cast<const float *>(x.view.buf),
                   static_cast<float *>(y.view.buf), 0);
    Py_END_ALLOW_THREADS
    if (st != LOWBIT_OK) {
        PyErr_SetString(PyExc_ValueError, api->status_str(st));
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyObject *isa(PyObject *, PyObject *) { return PyUnicode_FromString(api->isa_name(api->isa_active())); }

PyMethodDef methods[] = {
    {"gemv", gemv, METH_VARARGS, "gemv(type_id, w, rows, cols, x, y): y = W x through pylowbit"},
    {"isa", isa, METH_NOARGS, "the ISA variant pylowbit runs"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "lowbit_capsule_user", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_lowbit_capsule_user() {
    // Importing the capsule imports pylowbit; an ABI mismatch is an ImportError with a message.
    api = lowbit_capi_import(LOWBIT_ABI_VERSION);
    if (!api) return nullptr;
    return PyModule_Create(&module);
}
