"""`quantize_(model, ...)`: swap a model's linear layers for `pylowbit.torch.Linear`, in place."""
from __future__ import annotations

from collections import Counter

from torch import nn

from pylowbit.core import format_info
from pylowbit.torch._ops import hold_torch_threads
from pylowbit.torch.linear import Linear, SharedInput, log
from pylowbit.torch.norm import RMS_NORM_CLASSES, RMSNorm

BITNET_CLASSES = ("BitLinear", "AutoBitLinear")  # transformers.integrations.bitnet
# children that a transformers attention / MLP calls one after another on one input
SIBLING_NAMES = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def _is_bitnet(module: nn.Module) -> bool:
    return type(module).__name__ in BITNET_CLASSES and type(module).__module__.startswith("transformers.")


def quantize_(model: nn.Module, format: str | None = None, head: str | None = None,
              skip: tuple[str, ...] = ("lm_head",), repack: bool = False,
              fuse: bool = True, threads: str = "auto") -> nn.Module:
    """Convert `model` in place and return it.

    - every transformers BitLinear / AutoBitLinear becomes a Linear in I2_S, losslessly (its
      ternary codes, weight_scale, bias and RMSNorm as they are);
    - with `format` (e.g. "i2_s", "tq2_0", "q8_0"), every other nn.Linear whose qualified name
      contains none of the `skip` strings is quantized to it (ternary formats: absmean);
    - with `head` ("q8_0", "f16", ...), the output embedding (`get_output_embeddings()`, else
      a module named "lm_head") is converted to that format too, whatever `skip` says: it is
      the largest matrix a decode step reads;
    - with `repack`, every converted layer holds its weight in pylowbit's repacked layout in place
      of the GGUF bytes (Linear.repack: faster, the same memory; state_dict still saves the GGUF
      bytes);
    - with `fuse` (the default), transformers' Llama-family RMSNorms become pylowbit.torch.RMSNorm
      (one liblowbit call each on the eager path, same parameter), and the sibling projections a
      module calls on one input (q/k/v, gate/up) share a SharedInput (Linear.siblings): once they
      are repacked, they are multiplied in one call;
    - `threads`: "hold" makes torch's intra-op pool run one thread while the model's forward runs
      and gives pylowbit's kernels the count torch had (hold_torch_threads); "follow" leaves torch
      alone, the kernels then run torch.get_num_threads() threads beside it; "auto" (the default)
      holds when no float nn.Linear is left in the model (every large product is pylowbit's),
      and follows otherwise (a float head wants torch's threads).
    Logs (logger "pylowbit.torch") how many modules were converted, by kind."""
    if threads not in ("auto", "hold", "follow"):
        raise ValueError(f"quantize_(threads={threads!r}): expected 'auto', 'hold' or 'follow'")
    if format is not None:
        format_info(format)
    head_module = None
    if head is not None:
        format_info(head)
        get = getattr(model, "get_output_embeddings", None)
        head_module = get() if callable(get) else getattr(model, "lm_head", None)
        if not isinstance(head_module, nn.Linear):
            raise ValueError(f"quantize_(head={head!r}): this model has no nn.Linear output head "
                             f"(found {type(head_module).__name__})")
    plan, converted = [], ()
    for name, module in model.named_modules():
        if isinstance(module, (Linear, RMSNorm)) or name.startswith(converted):
            continue  # (a BitLinear's own RMSNorm goes with it)
        if _is_bitnet(module) or module is head_module:
            converted += (name + ".",)
        if _is_bitnet(module):
            plan.append((name, "bitlinear", Linear.from_bitlinear, ()))
        elif module is head_module:
            plan.append((name, f"head {head}", Linear.from_linear, (head, False)))
        elif format is not None and isinstance(module, nn.Linear) and not any(s in name for s in skip):
            plan.append((name, f"linear {format}", Linear.from_linear, (format,)))
        elif fuse and type(module).__name__ in RMS_NORM_CLASSES:
            plan.append((name, "rms_norm", RMSNorm.from_module, ()))
    counts = Counter()
    for name, kind, make, args in plan:
        layer = make(model.get_submodule(name), *args)
        model.set_submodule(name, layer.repack() if repack and isinstance(layer, Linear) else layer)
        counts[kind] += 1
    if fuse:
        counts["sibling groups"] = _group_siblings(model)
    linears = sum(n for k, n in counts.items() if k not in ("rms_norm", "sibling groups"))
    log.info("pylowbit.torch.quantize_: converted %d linear layers (%s), %d RMSNorms, "
             "%d sibling groups", linears,
             ", ".join(f"{n} {k}" for k, n in counts.items() if k not in ("rms_norm", "sibling groups"))
             or "none", counts["rms_norm"], counts["sibling groups"])
    model.pylowbit_converted = {k: n for k, n in counts.items() if n}
    kinds = {type(m) for m in model.modules()}  # converted now or before (load_gguf)
    all_lowbit = Linear in kinds and not any(issubclass(k, nn.Linear) for k in kinds)
    if threads == "hold" or (threads == "auto" and all_lowbit):
        hold_torch_threads(model)
        log.info("pylowbit.torch.quantize_: torch runs one intra-op thread while the model runs, "
                 "pylowbit's kernels the count torch had")
    return model


def _group_siblings(model: nn.Module) -> int:
    """Give each set of SIBLING_NAMES children (all Linears without their own norm, of one input
    width) one SharedInput; returns how many sets."""
    groups = 0
    for parent in model.modules():
        for names in SIBLING_NAMES:
            layers = [getattr(parent, n, None) for n in names]
            if all(isinstance(m, Linear) and m.norm is None and m.in_features == layers[0].in_features for m in layers):
                group = SharedInput(layers)
                for m in layers:
                    m.siblings = group
                groups += 1
    return groups
