/* The liblowbit function table as a Python capsule, for extensions that call the kernels without
 * linking liblowbit themselves (they find it through the already-imported pylowbit).
 *
 *     #include <Python.h>
 *     #include "lowbit/capi.h"
 *     const lowbit_capi *api = lowbit_capi_import(LOWBIT_ABI_VERSION);  // NULL + exception on error
 *     api->gemv(LOWBIT_TYPE_TQ2_0, w, rows, cols, x, y, 1);
 *
 * The table only grows at its end; `size` tells how much of it the running pylowbit provides, and
 * `abi_version` must equal the version the extension was compiled against.
 */
#ifndef LOWBIT_CAPI_H
#define LOWBIT_CAPI_H

#include "lowbit/lowbit.h"

#define LOWBIT_CAPSULE_NAME "pylowbit._capi.CAPI"

typedef struct lowbit_capi {
    int abi_version; /* LOWBIT_ABI_VERSION of the pylowbit that made the table */
    size_t size;     /* sizeof(lowbit_capi) there */
    const char *(*version)(void);
    const char *(*status_str)(int status);
    int64_t (*tensor_bytes)(int type, int64_t nelem);
    int (*quantize)(int type, const float *x, int64_t n, void *out);
    int (*dequantize)(int type, const void *w, int64_t n, float *out);
    int (*gemv)(int type, const void *w, int64_t rows, int64_t cols, const float *x, float *y,
                int threads);
    int (*gemm)(int type, const void *w, int64_t rows, int64_t cols, const float *x, int64_t batch,
                float *y, int threads);
    int (*fwht_f32)(float *x, int64_t rows, int64_t n, int64_t block, int normalize,
                    const float *signs, int order, int threads);
    int (*isa_active)(void);
    const char *(*isa_name)(int isa);
} lowbit_capi;

#ifdef Py_PYTHON_H
/* Import the table from pylowbit; on any mismatch set a Python exception and return NULL. */
static inline const lowbit_capi *lowbit_capi_import(int abi_version) {
    const lowbit_capi *api = (const lowbit_capi *)PyCapsule_Import(LOWBIT_CAPSULE_NAME, 0);
    if (!api) return NULL;
    if (api->abi_version != abi_version) {
        PyErr_Format(PyExc_ImportError,
                     "pylowbit C API version mismatch: this extension was built against ABI %d, "
                     "the installed pylowbit provides ABI %d; rebuild the extension",
                     abi_version, api->abi_version);
        return NULL;
    }
    if (api->size < sizeof(lowbit_capi)) {
        PyErr_SetString(PyExc_ImportError,
                        "pylowbit C API table is older than this extension expects; upgrade pylowbit");
        return NULL;
    }
    return api;
}
#endif

#endif /* LOWBIT_CAPI_H */
