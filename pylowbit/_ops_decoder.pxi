# The decoder's layer loop (native/src/decoder.c), part of the _ops module: included by _ops.pyx,
# whose array checks (_f32, _p, _shape) it uses.

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memset

from pylowbit._lowbit cimport matrix_of
from pylowbit.lowbit cimport LOWBIT_EINVAL, lowbit_matrix

cdef extern from "lowbit/decoder.h" nogil:
    int LOWBIT_GROUP_MAX
    int LOWBIT_BLOCK_ATTENTION, LOWBIT_BLOCK_GATED_ATTENTION, LOWBIT_BLOCK_GDN
    int LOWBIT_PREP_NONE, LOWBIT_PREP_ROUND_BF16, LOWBIT_PREP_GROUPED_HEADS

    ctypedef struct lowbit_decoder_group:
        int n
        const lowbit_matrix *m[4]
        int64_t rows[4]
        int64_t cols
        int glu
        int prep
        int64_t rot_block
        const float *rot_signs
        int host_id

    ctypedef struct lowbit_decoder_config:
        int64_t n_layer, d_model, n_ff, n_head, n_head_kv, head_dim, v_head_dim, ctx, rope_half
        int rope_neox
        float eps, attn_scale
        int ffn_act
        int64_t ssm_k_heads, ssm_v_heads, ssm_state, ssm_conv

    ctypedef struct lowbit_decoder_layer:
        int kind
        const float *attn_norm
        lowbit_decoder_group qkv
        const float *q_norm
        const float *k_norm
        int rope
        int64_t window
        float *k_cache
        float *v_cache
        const float *attn_sub_norm
        lowbit_decoder_group gdn_in[2]
        const float *conv_w
        float *conv_state
        const float *ssm_a
        const float *ssm_dt
        float *ssm_state
        const float *ssm_norm
        lowbit_decoder_group out
        const float *post_attn_norm
        const float *ffn_norm
        lowbit_decoder_group ffn_glu
        const float *ffn_sub_norm
        lowbit_decoder_group ffn_down
        const float *post_ffw_norm

    ctypedef int (*lowbit_decoder_host_fn)(void *ctx, int host_id, const float *x, int64_t T,
                                           float *const *ys)
    int lowbit_decoder_check(const lowbit_decoder_config *cfg, const lowbit_decoder_layer *layers,
                             char *why, size_t why_len)
    int64_t lowbit_decoder_scratch_floats(const lowbit_decoder_config *cfg, int64_t T)
    int lowbit_decoder_run(const lowbit_decoder_config *cfg, const lowbit_decoder_layer *layers,
                           float *x, int64_t T, int64_t pos, const float *const *rope_cos,
                           const float *const *rope_sin, float *scratch, lowbit_decoder_host_fn host,
                           void *host_ctx, int threads)
    void lowbit_decoder_timing(int enable, double *recurrent_us, double *total_us)

BLOCK_KINDS = {"attention": LOWBIT_BLOCK_ATTENTION, "gated_attention": LOWBIT_BLOCK_GATED_ATTENTION,
               "gdn": LOWBIT_BLOCK_GDN}
INPUT_PREPS = {None: LOWBIT_PREP_NONE, "round_bf16": LOWBIT_PREP_ROUND_BF16,
               "grouped_heads": LOWBIT_PREP_GROUPED_HEADS}
CONFIG_FIELDS = ("d_model", "n_ff", "n_head", "n_head_kv", "head_dim", "v_head_dim", "ctx",
                 "rope_half", "rope_neox", "eps", "attn_scale", "ffn_act", "ssm_k_heads", "ssm_v_heads",
                 "ssm_state", "ssm_conv")


cdef cnp.ndarray _view(float *p, int64_t rows, int64_t cols):
    """A (rows, cols) float32 array over memory the caller keeps alive."""
    cdef cnp.npy_intp dims[2]
    dims[0], dims[1] = rows, cols
    return cnp.PyArray_SimpleNewFromData(2, dims, cnp.NPY_FLOAT32, p)


cdef int _host_call(void *ctx, int host_id, const float *x, int64_t T, float *const *ys) noexcept with gil:
    """Runs a host group (Python's Linear / LinearGroup / GatedFFN) for the C loop; an exception
    is kept on the Decoder and re-raised when the run returns."""
    cdef Decoder dec = <Decoder>ctx
    cdef int j
    try:
        fn, rows, cols = dec._host[host_id]
        outs = tuple(_view(ys[j], T, rows[j]) for j in range(len(rows)))
        res = fn(_view(<float *>x, T, cols), dec._threads, outs if len(outs) > 1 else outs[0])
        res = res if isinstance(res, tuple) else (res,)
        for j in range(len(res)):  # (a GatedFFN returns its gate output only)
            if res[j] is not outs[j]:
                np.copyto(outs[j], res[j])
    except BaseException as e:
        dec._error = e
        return LOWBIT_EINVAL
    return 0


cdef class Decoder:
    """A model's layers as one lowbit_decoder_run call with the GIL released (native/src/decoder.c,
    whose header documents every field).  config: a dict of CONFIG_FIELDS (n_layer is len(layers));
    layers: one dict per layer of the lowbit_decoder_layer fields (kind a BLOCK_KINDS name, norm
    vectors and states as float32 arrays or None, groups as group specs).  A group spec is (host, mats, rows, cols, glu,
    prep, rot_block, signs): mats the PackedMatrix of each row block, or None to have the C loop
    call host(x, threads, out) (a matrix that is not a liblowbit one)."""
    cdef lowbit_decoder_config cfg
    cdef lowbit_decoder_layer *layers
    cdef list _keep   # every array and matrix the layers point into
    cdef list _host   # host_id -> (callable, rows, cols)
    cdef object _error, _threads
    cdef cnp.ndarray _scratch1  # a one-token run's scratch, reused

    def __cinit__(self, dict config not None, list layers not None):
        for k in CONFIG_FIELDS:
            if k not in config:
                raise ValueError(f"decoder config lacks {k!r}")
        c = config
        self.cfg.n_layer, self.cfg.d_model, self.cfg.n_ff = len(layers), c["d_model"], c["n_ff"]
        self.cfg.n_head, self.cfg.n_head_kv = c["n_head"], c["n_head_kv"]
        self.cfg.head_dim, self.cfg.v_head_dim, self.cfg.ctx = c["head_dim"], c["v_head_dim"], c["ctx"]
        self.cfg.rope_half, self.cfg.rope_neox = c["rope_half"], c["rope_neox"]
        self.cfg.eps, self.cfg.attn_scale, self.cfg.ffn_act = c["eps"], c["attn_scale"], c["ffn_act"]
        self.cfg.ssm_k_heads, self.cfg.ssm_v_heads = c["ssm_k_heads"], c["ssm_v_heads"]
        self.cfg.ssm_state, self.cfg.ssm_conv = c["ssm_state"], c["ssm_conv"]
        if not layers:
            raise ValueError("the decoder needs at least one layer")
        self.layers = <lowbit_decoder_layer *>PyMem_Malloc(len(layers) * sizeof(lowbit_decoder_layer))
        if not self.layers:
            raise MemoryError()
        memset(self.layers, 0, len(layers) * sizeof(lowbit_decoder_layer))
        self._keep, self._host = [], []
        cdef int il
        cdef lowbit_decoder_layer *L
        for il in range(len(layers)):
            spec, L = layers[il], &self.layers[il]
            L.kind = BLOCK_KINDS[spec["kind"]]
            L.attn_norm, L.ffn_norm = self._vec(spec, "attn_norm"), self._vec(spec, "ffn_norm")
            L.post_attn_norm, L.ffn_sub_norm = self._vec(spec, "post_attn_norm"), self._vec(spec, "ffn_sub_norm")
            L.post_ffw_norm = self._vec(spec, "post_ffw_norm")
            self._group(&L.out, spec["out"])
            self._group(&L.ffn_glu, spec["ffn_glu"])
            self._group(&L.ffn_down, spec["ffn_down"])
            if L.kind == LOWBIT_BLOCK_GDN:
                groups = spec["gdn_in"]
                if not 1 <= len(groups) <= 2:
                    raise ValueError(f"layer {il}: gdn_in must be one or two groups")
                for j in range(len(groups)):
                    self._group(&L.gdn_in[j], groups[j])
                L.conv_w, L.ssm_a = self._vec(spec, "conv_w"), self._vec(spec, "ssm_a")
                L.ssm_dt, L.ssm_norm = self._vec(spec, "ssm_dt"), self._vec(spec, "ssm_norm")
                L.conv_state, L.ssm_state = self._vec(spec, "conv_state", True), self._vec(spec, "ssm_state", True)
                self._sized(spec, il, {"conv_w": (self._C(), self.cfg.ssm_conv),
                                       "conv_state": (self._C(), self.cfg.ssm_conv - 1),
                                       "ssm_a": (self.cfg.ssm_v_heads,), "ssm_dt": (self.cfg.ssm_v_heads,),
                                       "ssm_norm": (self.cfg.ssm_state,),
                                       "ssm_state": (self.cfg.ssm_v_heads, self.cfg.ssm_state, self.cfg.ssm_state)})
            else:
                self._group(&L.qkv, spec["qkv"])
                L.q_norm, L.k_norm = self._vec(spec, "q_norm"), self._vec(spec, "k_norm")
                L.attn_sub_norm = self._vec(spec, "attn_sub_norm")
                L.k_cache, L.v_cache = self._vec(spec, "k_cache", True), self._vec(spec, "v_cache", True)
                L.rope, L.window = spec["rope"], spec["window"]
                hd, vd, Hkv = self.cfg.head_dim, self.cfg.v_head_dim, self.cfg.n_head_kv
                self._sized(spec, il, {"q_norm": (hd,), "k_norm": (hd,),
                                       "attn_sub_norm": (self.cfg.n_head * vd,),
                                       "k_cache": (Hkv, self.cfg.ctx, hd), "v_cache": (Hkv, self.cfg.ctx, vd)})
            d = self.cfg.d_model
            self._sized(spec, il, {"attn_norm": (d,), "ffn_norm": (d,), "post_attn_norm": (d,),
                                   "post_ffw_norm": (d,), "ffn_sub_norm": (self.cfg.n_ff,)})
        cdef char why[256]
        why[0] = 0
        if lowbit_decoder_check(&self.cfg, self.layers, why, sizeof(why)) != 0:
            raise ValueError(why.decode())

    cdef int64_t _C(self):
        return (2 * self.cfg.ssm_k_heads + self.cfg.ssm_v_heads) * self.cfg.ssm_state

    cdef void _sized(self, dict spec, int il, dict shapes) except *:
        for name, shape in shapes.items():
            a = spec.get(name)
            if a is not None and _shape(a) != shape:
                raise ValueError(f"layer {il}: {name} has shape {_shape(a)}, expected {shape}")

    cdef float *_vec(self, dict spec, str name, bint writable=False) except? NULL:
        a = spec.get(name)
        if a is None:
            return NULL
        cdef cnp.ndarray arr = _f32(a, name, -1, writable)
        self._keep.append(arr)
        return _p(arr)

    cdef void _group(self, lowbit_decoder_group *g, tuple spec) except *:
        host, mats, rows, cols, glu, prep, block, signs = spec
        if not 1 <= len(rows) <= LOWBIT_GROUP_MAX:
            raise ValueError(f"a group has 1 to {LOWBIT_GROUP_MAX} matrices, got {len(rows)}")
        g.n, g.cols, g.glu, g.prep, g.rot_block = len(rows), cols, glu, INPUT_PREPS[prep], block
        cdef int j
        for j in range(g.n):
            g.rows[j] = rows[j]
            if mats is None:  # (not a conditional expression: it would drop the const)
                g.m[j] = NULL
            else:
                g.m[j] = matrix_of(mats[j])
        if mats is None:
            g.host_id = len(self._host)
            self._host.append((host, tuple(rows), cols))
        else:
            self._keep.append(mats)
        g.rot_signs = NULL
        if signs is not None:
            a = _f32(signs, "signs", 1)
            if a.shape[0] != cols:
                raise ValueError(f"signs has {a.shape[0]} values for a {cols}-wide input")
            self._keep.append(a)
            g.rot_signs = _p(a)

    def __dealloc__(self):
        PyMem_Free(self.layers)

    def run(self, x, int64_t pos, list cos not None, list sin not None, threads=None):
        """x (T, d) in place through every layer at positions pos..pos + T - 1; cos / sin: the
        (T, rope_half) tables of those positions, one per layer `rope` index.  threads: None (the
        default) or >= 1."""
        cdef cnp.ndarray xa = _f32(x, "x", 2, True)
        cdef int64_t T = cnp.PyArray_DIM(xa, 0)
        if cnp.PyArray_DIM(xa, 1) != self.cfg.d_model:
            raise ValueError(f"x must have shape (T, {self.cfg.d_model}), got {_shape(xa)}")
        if T < 1 or pos < 0 or pos > self.cfg.ctx - T:
            raise ValueError(f"positions {pos}..{pos + T - 1} do not fit the cache of {self.cfg.ctx}")
        if len(cos) != len(sin):
            raise ValueError(f"{len(cos)} cos tables but {len(sin)} sin tables")
        cdef int il, j, n_tab = len(cos)
        for il in range(self.cfg.n_layer):
            if self.layers[il].kind != LOWBIT_BLOCK_GDN and self.layers[il].rope >= n_tab:
                raise ValueError(f"layer {il} needs cos / sin table {self.layers[il].rope}, got {n_tab}")
        cdef const float **tabs = <const float **>PyMem_Malloc((2 * n_tab + 1) * sizeof(void *))
        if not tabs:
            raise MemoryError()
        cdef cnp.ndarray a, scratch
        cdef int64_t need = lowbit_decoder_scratch_floats(&self.cfg, T)
        cdef int st
        cdef float *xp
        cdef float *sp
        cdef int nth = 0 if threads is None else threads
        try:
            for j in range(2 * n_tab):
                a = _f32((cos, sin)[j % 2][j // 2], "cos" if j % 2 == 0 else "sin", 2)
                if cnp.PyArray_DIM(a, 0) != T or cnp.PyArray_DIM(a, 1) != self.cfg.rope_half:
                    raise ValueError(f"rope tables must be (T, {self.cfg.rope_half}), got {_shape(a)}")
                tabs[(j % 2) * n_tab + j // 2] = _p(a)  # the cos tables, then the sin tables
            if T == 1 and self._scratch1 is not None:
                scratch = self._scratch1
            else:
                scratch = np.empty(need, np.float32)
                if T == 1:
                    self._scratch1 = scratch
            xp, sp = _p(xa), _p(scratch)
            self._threads, self._error = threads, None
            with nogil:
                st = lowbit_decoder_run(&self.cfg, self.layers, xp, T, pos, tabs, tabs + n_tab, sp,
                                        _host_call, <void *>self, nth)
        finally:
            PyMem_Free(tabs)
        if self._error is not None:
            e, self._error = self._error, None
            raise e
        check(st, "decoder layers")


def decoder_timing(bint enable):
    """Benchmark timing of Decoder.run (lowbit_decoder_timing): returns (recurrent, total) seconds
    summed since the last call, then resets them; enable=False stops timing.  The recurrent part
    is the Gated-DeltaNet blocks' work between their input projections and ssm_out."""
    cdef double r = 0, t = 0
    lowbit_decoder_timing(enable, &r, &t)
    return r * 1e-6, t * 1e-6
