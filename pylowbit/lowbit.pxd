# cython: language_level=3
# Public: Cython declarations of the C API (native/include/lowbit/lowbit.h), no Python code.
# (pylowbit/_lowbit.pxd, with the underscore, is private: the _lowbit module's own helpers.)
# Other extensions can `from pylowbit.lowbit cimport *` and call these functions `nogil`,
# compiling with pylowbit.get_include() and linking pylowbit.get_library_dirs() / -llowbit.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t

cdef extern from "lowbit/lowbit.h" nogil:
    ctypedef struct lowbit_act:
        const int8_t *q
        const float *d
        const int32_t *s
        int64_t n
        int64_t group

    int LOWBIT_ABI_VERSION
    int LOWBIT_OK, LOWBIT_EINVAL, LOWBIT_ETYPE, LOWBIT_ESIZE, LOWBIT_ENOMEM, LOWBIT_EISA
    int LOWBIT_ISA_COUNT

    const char *lowbit_version()
    int lowbit_abi_version()
    const char *lowbit_status_str(int status)

    int lowbit_type_known(int type)
    const char *lowbit_type_name(int type)
    int lowbit_type_from_name(const char *name)
    int64_t lowbit_type_block_size(int type)
    int64_t lowbit_type_block_bytes(int type)
    int64_t lowbit_row_bytes(int type, int64_t n)
    int64_t lowbit_tensor_bytes(int type, int64_t nelem)
    int64_t lowbit_act_group(int type)

    int lowbit_quantize(int type, const float *x, int64_t n, void *out)
    int lowbit_dequantize(int type, const void *w, int64_t n, float *out)
    int lowbit_quantize_act(const float *x, int64_t n, int64_t group, int8_t *q, float *d, int32_t *s)
    int lowbit_quantize_act_for(int type, const float *x, int64_t n, int8_t *q, float *d, int32_t *s)

    int lowbit_gemv(int type, const void *w, int64_t rows, int64_t cols, const float *x, float *y, int threads)
    int lowbit_gemm(int type, const void *w, int64_t rows, int64_t cols, const float *x, int64_t batch, float *y, int threads)
    int lowbit_gemm_act(int type, const void *w, int64_t rows, int64_t cols, const lowbit_act *a, int64_t batch, float *y, int threads)

    ctypedef struct lowbit_matrix:
        pass
    lowbit_matrix *lowbit_matrix_pack(int type, const void *w, int64_t rows, int64_t cols, int threads, int *status)
    void lowbit_matrix_free(lowbit_matrix *m)
    int64_t lowbit_matrix_nbytes(const lowbit_matrix *m)
    int LOWBIT_PACKED_ALIGN
    int64_t lowbit_matrix_packed_nbytes(int type, int64_t rows, int64_t cols)
    lowbit_matrix *lowbit_matrix_pack_into(int type, const void *w, int64_t rows, int64_t cols, void *dst, int64_t dst_bytes, int threads, int *status)
    lowbit_matrix *lowbit_matrix_wrap(const void *packed, int64_t nbytes, int *status)
    int lowbit_matrix_unpack(const lowbit_matrix *m, void *file_bytes, int64_t nbytes, int threads)
    int lowbit_matrix_unpack_rows(const lowbit_matrix *m, const int64_t *idx, int64_t n, void *out)
    void *lowbit_weights_alloc(size_t nbytes)
    void lowbit_weights_free(void *p, size_t nbytes)
    int lowbit_matrix_is_packed(const lowbit_matrix *m)
    int lowbit_matrix_type(const lowbit_matrix *m)
    int64_t lowbit_matrix_rows(const lowbit_matrix *m)
    int64_t lowbit_matrix_cols(const lowbit_matrix *m)
    int lowbit_matrix_gemv(const lowbit_matrix *m, const float *x, float *y, int threads)
    int lowbit_matrix_gemm(const lowbit_matrix *m, const float *x, int64_t batch, float *y, int threads)
    int lowbit_matrix_gemm_act(const lowbit_matrix *m, const lowbit_act *a, int64_t batch, float *y, int threads)
    int LOWBIT_MULTI_MAX
    int lowbit_matrix_gemm_multi(const lowbit_matrix **ms, int n, const float *x, int64_t batch, float **ys, int threads)
    int lowbit_matrix_gemm_glu(const lowbit_matrix *gate, const lowbit_matrix *up, int act, const float *x, int64_t batch, float *y, float *y_up, int threads)
    int lowbit_matrix_readahead(const lowbit_matrix **ms, int n, int act, int threads)

    uint64_t lowbit_stream_read(const void *buf, int64_t nbytes, int threads)

    int lowbit_fwht_f32(float *x, int64_t rows, int64_t n, int64_t block, int normalize, const float *signs, int order, int threads)
    int lowbit_fwht_f64(double *x, int64_t rows, int64_t n, int64_t block, int normalize, const double *signs, int order, int threads)
    int lowbit_fwht_quantize_act(const float *x, int64_t n, int64_t block, const float *signs, int64_t group, int8_t *q, float *d, int32_t *s)

    const char *lowbit_isa_name(int isa)
    int lowbit_isa_from_name(const char *name)
    unsigned lowbit_isa_compiled()
    unsigned lowbit_isa_supported()
    int lowbit_isa_active()
    int lowbit_set_isa(int isa)
    const char *lowbit_isa_env_error()

    ctypedef struct lowbit_kernel_info:
        const char *name
        int isa
        int type
        int layout
        int role
        const char *requires
        const char *when
    int LOWBIT_LAYOUT_NONE, LOWBIT_LAYOUT_FILE, LOWBIT_LAYOUT_PACKED
    int LOWBIT_ROLE_GEMV, LOWBIT_ROLE_PAIR_GEMV, LOWBIT_ROLE_GEMM, LOWBIT_ROLE_QUANTIZE
    int LOWBIT_ROLE_FLOAT_GEMV, LOWBIT_ROLE_READ, LOWBIT_ROLE_FWHT, LOWBIT_ROLE_OP, LOWBIT_ROLE_COUNT
    int LOWBIT_OP_COUNT
    const char *lowbit_op_name(int op)
    int lowbit_kernel_count()
    int lowbit_kernel_get(int i, lowbit_kernel_info *info)
    const char *lowbit_role_name(int role)
    const char *lowbit_layout_name(int layout)
    int lowbit_kernel_selected(int isa, int type, int layout, int role, int64_t cols)
    int lowbit_kernel_prefer(int i)

    ctypedef struct lowbit_type_facts:
        int type
        int64_t block_size
        int64_t block_bytes
        int scale_offset
        int scale2_offset
        int64_t act_group
        int act_rule
        int code_offset
    int lowbit_type_facts_get(int type, lowbit_type_facts *out)
    int lowbit_weight_types(int *ids, int cap)
    int LOWBIT_RULE_A8, LOWBIT_RULE_Q8_0, LOWBIT_RULE_Q8_K, LOWBIT_RULE_P2, LOWBIT_RULE_S8

    int lowbit_get_threads()
    int lowbit_set_threads(int threads)
    int lowbit_pool_keep_awake(int on)
    int lowbit_set_i2s_act_scale(int mode)
    const char *lowbit_threads_origin()
    int lowbit_threads_for_topology(const char *sys_root, const char *allowed_cpus, char *why, size_t why_len)
