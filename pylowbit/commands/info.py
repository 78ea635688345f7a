"""`pylowbit info`: version, ISA variants (compiled, supported, active), formats; with -m, a model's shape."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("info", help="show version, ISA variants and formats (with -m: a model's shape)")
    p.add_argument("-m", "--model", metavar="FILE", help="also describe this GGUF model")
    p.add_argument("-c", "--ctx-size", type=int, default=None, help="context length the cache is sized for")
    return p


def main(args) -> int:
    import pylowbit as lb

    lb.show_runtime()
    print(f"{'threads_origin':16s} {lb.threads_origin()}")
    print("formats          " + ", ".join(
        f"{f.name}({f.type_id}, {f.bits_per_weight:.4g} bpw)" for f in lb.FORMATS.values()))
    if getattr(args, "model", None):
        describe(args.model, args.ctx_size)
    return 0


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
