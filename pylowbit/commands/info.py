"""`pylowbit info`: version, ISA variants (compiled, supported, active), formats; with -m, a model's
shape; with --kernels, the kernel list and which kernel each format and role runs here."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("info", help="show version, ISA variants and formats (with -m: a model's shape)")
    p.add_argument("-m", "--model", metavar="FILE", help="also describe this GGUF model")
    p.add_argument("-c", "--ctx-size", type=int, default=None, help="context length the cache is sized for")
    p.add_argument("--kernels", action="store_true",
                   help="list every kernel of this build and which one this CPU runs for each format and role")
    p.add_argument("--json", action="store_true",
                   help="print the runtime facts (and with --kernels the kernel list and selection) as JSON")
    return p


def main(args) -> int:
    import pylowbit as lb

    if getattr(args, "json", False):
        if getattr(args, "model", None):
            raise SystemExit("pylowbit info: --json does not describe a model (-m); drop one of them")
        import json

        print(json.dumps(runtime_facts(getattr(args, "kernels", False)), indent=1))
        return 0
    lb.show_runtime()
    print(f"{'threads_origin':16s} {lb.threads_origin()}")
    print("formats          " + ", ".join(
        f"{f.name}({f.type_id}, {f.bits_per_weight:.4g} bpw)" for f in lb.FORMATS.values()))
    if getattr(args, "kernels", False):
        kernels()
    if getattr(args, "model", None):
        describe(args.model, args.ctx_size)
    return 0


# rows of this many weights stand for a model's matrices where a packed kernel depends on the width
KERNEL_COLS = 2560


def usable_variants() -> list:
    import pylowbit as lb

    return [v for v in lb.isa_supported() if v in lb.isa_compiled()]


def selection() -> list:
    """(fmt, layout, role, {variant: kernel name or None}) for every format and role this build
    serves, each usable variant's choice from the dispatcher (lowbit_kernel_selected)."""
    import pylowbit as lb
    from pylowbit import _lowbit

    usable = usable_variants()
    rows = [(None, "none", role) for role in ("quantize", "read", "fwht")]
    rows += [(op, "none", "op") for op in _lowbit.OPS]
    for fmt in lb.FORMATS:
        if fmt in ("f32", "f16", "bf16"):
            rows.append((fmt, "file", "float_gemv"))
            continue
        rows += [(fmt, "file", "gemv"), (fmt, "file", "gemm")]
        for layout in ("packed", "base3", "base3f", "rows16", "rows64", "q8rows"):
            ref = _lowbit.kernel_selected("scalar", fmt, layout, "gemv", KERNEL_COLS)  # it packs so
            # rows16's reference reads any 2-bit matrix: listed where a variant has a kernel of its own
            if ref and (layout != "rows16" or any(
                    _lowbit.kernel_selected(v, fmt, layout, "gemv", KERNEL_COLS) not in (None, ref)
                    for v in usable)):
                rows += [(fmt, layout, r) for r in ("gemv", "pair_gemv", "gemm")]
    return [(fmt, layout, role, {v: _lowbit.kernel_selected(v, fmt, layout, role, KERNEL_COLS) for v in usable})
            for fmt, layout, role in rows]


def runtime_facts(with_kernels: bool) -> dict:
    """What `pylowbit info` prints, as data: the variants, threads, formats; with_kernels: the
    kernel list and, per format and role, the kernel the active variant runs ("kernel") and each
    usable variant's ("variants")."""
    import pylowbit as lb
    from pylowbit import _lowbit

    out = {"version": lb.__version__, "library_version": _lowbit.version(),
           "compiled": lb.isa_compiled(), "supported": lb.isa_supported(), "active": lb.isa_active(),
           "threads": lb.get_threads(), "threads_origin": lb.threads_origin(),
           "formats": list(lb.FORMATS)}
    if with_kernels:
        active = lb.isa_active()
        out["kernel_cols"] = KERNEL_COLS
        out["kernels"] = [{k: v for k, v in kern.items() if k != "index"} for kern in _lowbit.kernels()]
        out["selected"] = [{"fmt": fmt, "layout": layout, "role": role, "kernel": names[active],
                            "variants": names} for fmt, layout, role, names in selection()]
    return out


def kernels() -> None:
    """The C kernel list, then per format and role the kernel this CPU runs (the active variant's)
    and each usable variant's."""
    import pylowbit as lb
    from pylowbit import _lowbit

    ks = _lowbit.kernels()
    print(f"\nkernels          {len(ks)} in this build (name, isa, format, layout, role, when, requires)")
    for k in ks:
        extra = ("" if k["when"] == "any" else f"  when {k['when']}") + (
            f"  requires {k['requires']}" if k["requires"] else "")
        print(f"  {k['name']:32s} {k['isa']:10s} {k['fmt'] or '-':9s} {k['layout']:6s} {k['role']:10s}{extra}")
    usable, active = usable_variants(), lb.isa_active()
    print(f"\nselected         runs here (the active variant, {active}), then each usable variant's;"
          f" packed rows of {KERNEL_COLS} weights")
    print(f"  {'format':9s} {'layout':6s} {'role':10s} {'runs here':30s} " + " ".join(f"{v:30s}" for v in usable))
    for fmt, layout, role, names in selection():
        cells = [names[active]] + [names[v] for v in usable]
        print(f"  {fmt or '-':9s} {layout:6s} {role:10s} " + " ".join(f"{n or '-':30s}" for n in cells))


def describe(path, ctx=None) -> None:
    from collections import Counter

    from pylowbit.model import Model

    m = Model(path, ctx=ctx, notice=None)
    cfg = m.cfg
    kinds = "".join("R" if cfg.is_recurrent(il) else "A" for il in range(cfg.n_layer))
    types = Counter(t.fmt for t in m.file.tensors.values())
    print(f"model            {cfg.arch}, {cfg.n_layer} layers, width {cfg.d_model}, FFN {cfg.n_ff}, "
          f"vocab {cfg.vocab_size}")
    if cfg.ssm is not None:
        s = cfg.ssm
        print(f"layers           {kinds} (R: Gated-DeltaNet, {s.n_k_heads} K / {s.n_v_heads} V heads of "
              f"{s.state_size}, conv {s.conv_kernel}; A: gated attention)")
    print(f"attention        {cfg.n_head} / {cfg.n_head_kv} heads of {cfg.head_dim}, rope dims {cfg.rope_dim}")
    print("tensors          " + ", ".join(f"{n} {k}" for k, n in types.most_common()))
    print(f"rotation         {'prism.hadamard block ' + str(m.rot.block) if m.rot else 'none'}"
          + (", gdn_v_grouped" if m.rot is not None and m.rot.gdn_v_grouped else ""))
    print(f"memory           {m.memory_summary()}")
