# ISA dispatch, threads and the kernel list, part of the _lowbit module: included by _lowbit.pyx.

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
        raise ValueError(f"unknown ISA variant {name!r}; known: "
                         f"{', '.join(_isa_list((1u << LOWBIT_ISA_COUNT) - 1))}")
    if not (lowbit_isa_compiled() >> isa) & 1:
        raise RuntimeError(f"ISA variant {name!r} is not compiled into this build "
                           f"(compiled: {', '.join(isa_compiled())})")
    if lowbit_set_isa(isa) != LOWBIT_OK:
        raise RuntimeError(f"this CPU does not support ISA variant {name!r} "
                           f"(supported: {', '.join(isa_supported())})")


# ---- the kernel list -------------------------------------------------------------------------

LAYOUTS = ("none", "file", "packed", "base3", "rows16", "base3f", "rows64", "q8rows")
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


def pool_keep_awake(bint on):
    """Hold (True) or release (False) the thread pool's idle workers awake between calls
    (lowbit_pool_keep_awake); holds nest.  Returns the holds left."""
    return lowbit_pool_keep_awake(1 if on else 0)


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
