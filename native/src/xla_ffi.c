/* XLA FFI handlers: liblowbit's GEMM and FWHT as custom calls of JAX / XLA on the CPU
 * (pylowbit/jax.py registers them with jax.ffi.register_ffi_target and calls them with
 * jax.ffi.ffi_call).
 *
 * The library is built without jaxlib: below are our own declarations of the part of the XLA FFI C
 * ABI these handlers use (xla/ffi/api/c_api.h, API version 0.x: the call frame, its buffers and
 * attributes, error creation, the metadata extension).  That ABI is versioned and its structs carry
 * their sizes: a handler checks both before reading anything and answers a clear error if the
 * runtime's layout is not the one declared here.
 *
 * Each handler only unpacks buffers and attributes and calls the public entry points the numpy API
 * calls (lowbit_gemm / lowbit_gemv, lowbit_fwht_f32): no kernel logic lives here. */
#include <stdio.h>
#include <string.h>

#include "lowbit/lowbit.h"

/* ---- the XLA FFI C ABI (API version 0) --------------------------------------------------------- */

enum { XFFI_EXTENSION_METADATA = 1 };

typedef struct xffi_extension {
    size_t struct_size;
    int type;
    struct xffi_extension *next;
} xffi_extension;

typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    int major_version;
    int minor_version;
} xffi_api_version;

typedef struct xffi_error xffi_error; /* opaque, made by the runtime */

enum {
    XFFI_ERR_INVALID_ARGUMENT = 3,
    XFFI_ERR_RESOURCE_EXHAUSTED = 8,
    XFFI_ERR_FAILED_PRECONDITION = 9,
    XFFI_ERR_UNIMPLEMENTED = 12,
    XFFI_ERR_INTERNAL = 13,
};

typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    const char *message;
    int errc;
} xffi_error_create_args;

typedef xffi_error *xffi_error_create_fn(xffi_error_create_args *args);

/* The leading fields of XLA_FFI_Api: all these handlers call is XLA_FFI_Error_Create. */
typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    xffi_api_version api_version;
    const void *internal_api;
    xffi_error_create_fn *error_create;
} xffi_api;

enum { XFFI_U8 = 6, XFFI_S32 = 4, XFFI_S64 = 5, XFFI_PRED = 1, XFFI_F32 = 11 };
enum { XFFI_ARG_BUFFER = 1, XFFI_ATTR_SCALAR = 3, XFFI_STAGE_EXECUTE = 3 };

typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    int dtype;
    void *data;
    int64_t rank;
    int64_t *dims;
} xffi_buffer;

typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    int64_t size;
    int *types;
    void **items;
} xffi_list; /* XLA_FFI_Args and XLA_FFI_Rets */

typedef struct {
    const char *ptr;
    size_t len;
} xffi_bytes;

typedef struct {
    int dtype;
    void *value;
} xffi_scalar;

typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    int64_t size;
    int *types;
    xffi_bytes **names;
    void **attrs;
} xffi_attrs;

typedef struct {
    size_t struct_size;
    xffi_extension *extension_start;
    const xffi_api *api;
    void *ctx;
    int stage;
    xffi_list args;
    xffi_list rets;
    xffi_attrs attrs;
} xffi_call_frame;

typedef struct {
    size_t struct_size;
    xffi_api_version api_version;
    uint32_t traits;
} xffi_metadata;

typedef struct {
    xffi_extension extension_base;
    xffi_metadata *metadata;
} xffi_metadata_extension;

/* The version these declarations follow: its structs begin with every field used here. */
#define XFFI_API_MAJOR 0
#define XFFI_API_MINOR 1

/* ---- unpacking a call frame -------------------------------------------------------------------- */

static xffi_error *fail(const xffi_call_frame *f, int errc, const char *what, const char *msg) {
    char buf[256];
    snprintf(buf, sizeof buf, "pylowbit %s: %s", what, msg);
    xffi_error_create_args a = {sizeof a, NULL, buf, errc};
    return f->api->error_create(&a);
}

static xffi_error *fail_status(const xffi_call_frame *f, const char *what, int status) {
    return fail(f, status == LOWBIT_ENOMEM ? XFFI_ERR_RESOURCE_EXHAUSTED : XFFI_ERR_INVALID_ARGUMENT,
                what, lowbit_status_str(status));
}

/* Whether the call frame is a call to run: 0 to run it; 1 when there is nothing to run (the
 * runtime asking for the handler's metadata, answered here, or a stage before execution); -1 with
 * *err set when this runtime's ABI is not the one declared above.  (A frame without the API table
 * cannot even be answered with an error; XLA always passes one.) */
static int frame_kind(xffi_call_frame *f, const char *what, xffi_error **err) {
    *err = NULL;
    xffi_extension *e = f->extension_start;
    if (e && e->type == XFFI_EXTENSION_METADATA) {
        xffi_metadata *m = ((xffi_metadata_extension *)e)->metadata;
        m->api_version.major_version = XFFI_API_MAJOR;
        m->api_version.minor_version = XFFI_API_MINOR;
        m->traits = 0;
        return 1;
    }
    if (!f->api || f->api->struct_size < sizeof(xffi_api) || !f->api->error_create) return 1;
    if (f->api->api_version.major_version != XFFI_API_MAJOR || f->struct_size < sizeof(*f) ||
        f->args.struct_size < sizeof(xffi_list) || f->rets.struct_size < sizeof(xffi_list) ||
        f->attrs.struct_size < sizeof(xffi_attrs)) {
        *err = fail(f, XFFI_ERR_FAILED_PRECONDITION, what,
                    "this XLA runtime's FFI ABI is not the version liblowbit was built for");
        return -1;
    }
    return f->stage == XFFI_STAGE_EXECUTE ? 0 : 1;
}

static const xffi_buffer *arg_buffer(const xffi_list *l, int64_t i) {
    if (i >= l->size || l->types[i] != XFFI_ARG_BUFFER) return NULL;
    const xffi_buffer *b = (const xffi_buffer *)l->items[i];
    return b->struct_size >= sizeof(xffi_buffer) ? b : NULL;
}

static int64_t elements(const xffi_buffer *b, int64_t from, int64_t to) {
    int64_t n = 1;
    for (int64_t i = from; i < to; i++) n *= b->dims[i];
    return n;
}

/* An integer attribute (an S32, S64 or PRED scalar) by name; 0 if found. */
static int attr_int(const xffi_attrs *a, const char *name, int64_t *out) {
    size_t len = strlen(name);
    for (int64_t i = 0; i < a->size; i++) {
        const xffi_bytes *n = a->names[i];
        if (a->types[i] != XFFI_ATTR_SCALAR || n->len != len || memcmp(n->ptr, name, len)) continue;
        const xffi_scalar *s = (const xffi_scalar *)a->attrs[i];
        switch (s->dtype) {
        case XFFI_S64: *out = *(const int64_t *)s->value; return 0;
        case XFFI_S32: *out = *(const int32_t *)s->value; return 0;
        case XFFI_PRED: *out = *(const uint8_t *)s->value; return 0;
        default: return -1;
        }
    }
    return -1;
}

#define PREAMBLE(what)                                                                           \
    xffi_error *err_;                                                                              \
    if (frame_kind(f, what, &err_)) return err_

/* ---- the handlers -------------------------------------------------------------------------------- */

/* y[..., rows] = x[..., cols] . W^T for W (rows x cols) of type `type` in GGUF bytes (u8 of any
 * shape, lowbit_tensor_bytes(type, rows * cols) bytes in all).  Attributes: type, rows, cols,
 * threads (<= 0: the library default). */
LOWBIT_API xffi_error *lowbit_xla_gemm(xffi_call_frame *f) {
    PREAMBLE("gemm");
    int64_t type, rows, cols, threads;
    if (attr_int(&f->attrs, "type", &type) || attr_int(&f->attrs, "rows", &rows) ||
        attr_int(&f->attrs, "cols", &cols) || attr_int(&f->attrs, "threads", &threads))
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "gemm",
                    "needs integer attributes type, rows, cols and threads");
    const xffi_buffer *w = arg_buffer(&f->args, 0), *x = arg_buffer(&f->args, 1);
    const xffi_buffer *y = arg_buffer(&f->rets, 0);
    if (!w || !x || !y || f->args.size != 2 || f->rets.size != 1)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "gemm", "takes (weights, x) and returns one array");
    if (w->dtype != XFFI_U8 || x->dtype != XFFI_F32 || y->dtype != XFFI_F32)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "gemm", "weights must be uint8, x and y float32");
    if (x->rank < 1 || y->rank != x->rank || x->dims[x->rank - 1] != cols ||
        y->dims[y->rank - 1] != rows)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "gemm",
                    "x must be (..., cols) and y (..., rows) of the matrix");
    int64_t batch = elements(x, 0, x->rank - 1);
    if (elements(y, 0, y->rank - 1) != batch)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "gemm", "x and y have different batch shapes");
    int64_t need = lowbit_tensor_bytes((int)type, rows * cols);
    if (need < 0) return fail_status(f, "gemm", (int)need);
    if (elements(w, 0, w->rank) != need)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "gemm",
                    "the weights' byte count does not match type, rows and cols (vmap over the "
                    "weights is not supported)");
    int st = batch == 1 ? lowbit_gemv((int)type, w->data, rows, cols, x->data, y->data, (int)threads)
                        : lowbit_gemm((int)type, w->data, rows, cols, x->data, batch, y->data,
                                      (int)threads);
    return st ? fail_status(f, "gemm", st) : NULL;
}

/* y = the Walsh-Hadamard transform of x (float32, ..., n) along its last axis, block by block;
 * an optional second argument holds the n signs (any shape of n elements).  Attributes: block,
 * normalize, order (LOWBIT_FWHT_*), threads. */
LOWBIT_API xffi_error *lowbit_xla_fwht(xffi_call_frame *f) {
    PREAMBLE("fwht");
    int64_t block, normalize, order, threads;
    if (attr_int(&f->attrs, "block", &block) || attr_int(&f->attrs, "normalize", &normalize) ||
        attr_int(&f->attrs, "order", &order) || attr_int(&f->attrs, "threads", &threads))
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "fwht",
                    "needs integer attributes block, normalize, order and threads");
    const xffi_buffer *x = arg_buffer(&f->args, 0), *y = arg_buffer(&f->rets, 0);
    const xffi_buffer *s = f->args.size > 1 ? arg_buffer(&f->args, 1) : NULL;
    if (!x || !y || f->args.size > 2 || (f->args.size == 2 && !s) || f->rets.size != 1)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "fwht", "takes (x[, signs]) and returns one array");
    if (x->dtype != XFFI_F32 || y->dtype != XFFI_F32 || (s && s->dtype != XFFI_F32))
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "fwht", "x, signs and y must be float32");
    if (x->rank < 1 || y->rank != x->rank || elements(x, 0, x->rank) != elements(y, 0, y->rank))
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "fwht", "y must have the shape of x");
    int64_t n = x->dims[x->rank - 1], total = elements(x, 0, x->rank);
    if (s && elements(s, 0, s->rank) != n)
        return fail(f, XFFI_ERR_INVALID_ARGUMENT, "fwht", "signs must hold n (last axis) values");
    if (total == 0) return NULL;
    if (y->data != x->data) memcpy(y->data, x->data, (size_t)total * sizeof(float));
    int st = lowbit_fwht_f32(y->data, total / n, n, block, (int)normalize, s ? s->data : NULL,
                             (int)order, (int)threads);
    return st ? fail_status(f, "fwht", st) : NULL;
}
