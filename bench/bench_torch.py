"""pylowbit inside PyTorch, measured side by side in one run (report ratios; name the CPU).

  python bench/bench_torch.py layer            # one 2560 -> 6912 layer at batch 1
  python bench/bench_torch.py model [--head q8_0] [--rounds 2]   # a 2B4T-shaped model's generate()
  python bench/bench_torch.py all

layer: transformers' BitLinear (bf16, its own torch.compile'd helpers), a dense bf16 nn.Linear,
pylowbit.torch.Linear (I2_S, converted from that BitLinear; bf16 and float32 input), and pylowbit's
numpy API on the same bytes (lb.gemv on the file layout, and the repacked PackedTensor).
model: random weights built offline in transformers' packed BitNet layout; decode tokens/s of
generate() at batch 1 after quantize_ (head through Q8_0 / F16, or kept bf16; its default threads
rule): as converted, repacked (also unfused, and with float32 activations), against the same model dense in bf16 and `pylowbit bench` tg16 on the same
shape, at a 1- and a 64-token prompt; the configurations in turn, round after round.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

import pylowbit as lb
import pylowbit.torch as pt

IN, OUT = 2560, 6912


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def time_interleaved(fns: dict, reps: int, warmup: int = 2) -> dict:
    """Median seconds per call of each fn, the fns called in turn (a shared machine's drift hits
    them all alike), in reverse order every other round (A B C, C B A: what a call leaves in the
    caches and the pool for the next one favours no fn)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {k: [] for k in fns}
    order = list(fns.items())
    for r in range(reps):
        for k, fn in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def random_bitlinear(in_f, out_f, dtype=torch.bfloat16, seed=0):
    from transformers.integrations.bitnet import BitLinear
    g = torch.Generator().manual_seed(seed)
    m = BitLinear(in_f, out_f, bias=False, dtype=dtype)
    fill_bitlinear(m, g)
    return m


def fill_bitlinear(m, g):
    """Random ternary codes in transformers' packing (codes 0-2 in each 2-bit field), scale ~ BitNet's."""
    shape = (m.out_features // 4, m.in_features)
    byte = torch.zeros(shape, dtype=torch.uint8)
    for k in range(4):
        byte |= (torch.randint(0, 3, shape, generator=g, dtype=torch.uint8) << (2 * k))
    m.weight = torch.nn.Buffer(byte)
    m.weight_scale = torch.nn.Buffer(torch.full((1,), 30.0, dtype=m.weight_scale.dtype))


def bench_layer(threads: int, reps: int) -> dict:
    torch.set_num_threads(threads)
    bl = random_bitlinear(IN, OUT)
    layer = pt.Linear.from_bitlinear(bl)
    dense = torch.nn.Linear(IN, OUT, bias=False, dtype=torch.bfloat16)
    x16 = torch.randn(1, IN, dtype=torch.bfloat16)
    x32 = x16.float()
    xn = x32.numpy()[0]
    q = lb.QTensor(layer.weight.numpy(), "i2_s", (OUT, IN))
    packed = q.pack(keep_source=True)
    out = np.empty(OUT, dtype=np.float32)
    repacked = pt.Linear.from_bitlinear(bl).repack()
    tiny = pt.Linear(128, 4, "i2_s")  # the call's overhead: kernel time ~ nothing
    xt = torch.randn(1, 128)
    op = torch.ops.pylowbit.gemm
    with torch.no_grad():
        # torch's own ops apart: their OpenMP workers busy-wait after each op and would slow
        # whatever runs next
        res = time_interleaved({"transformers BitLinear bf16": lambda: bl(x16)}, max(3, reps // 25))
        res.update(time_interleaved({"dense bf16 nn.Linear": lambda: dense(x16)}, reps))
        time.sleep(0.1)
        res.update(time_interleaved({
            "pylowbit.torch.Linear bf16 in": lambda: layer(x16),
            "pylowbit.torch.Linear f32 in": lambda: layer(x32),
            "pylowbit.torch.Linear.repack() f32 in": lambda: repacked(x32),
            "torch.ops.pylowbit.gemm f32 in": lambda: op(x32, layer.weight, layer.type_id, OUT, IN),
            "numpy API lb.gemv (same bytes)": lambda: lb.gemv(q, xn, out=out, threads=threads),
            "numpy API PackedTensor.gemv (repacked)": lambda: packed.gemv(xn, out=out, threads=threads),
            "Linear on a 4x128 matrix (glue)": lambda: tiny(xt),
            "op on a 4x128 matrix (glue)": lambda: op(xt, tiny.weight, tiny.type_id, 4, 128),
        }, reps))
    base = res["pylowbit.torch.Linear f32 in"]
    print(f"\n## one {IN} -> {OUT} layer, batch 1, {threads} threads, {cpu_name()}")
    print(f"{'path':40s} {'us':>10s} {'pylowbit.torch f32 is x faster':>32s}")
    for k, v in res.items():
        print(f"{k:40s} {v * 1e6:10.1f} {v / base:32.2f}")
    return {k: v * 1e6 for k, v in res.items()}


def build_model(kind: str, layers: int, vocab: int):
    """BitNet b1.58 2B4T's shape (transformers' BitNetConfig defaults; tied embedding), random weights,
    built on the meta device and materialized with cheap random fills."""
    from transformers import BitNetConfig, BitNetForCausalLM
    from transformers.integrations.bitnet import BitLinear, replace_with_bitnet_linear
    from transformers.utils.quantization_config import BitNetQuantConfig
    cfg = BitNetConfig(num_hidden_layers=layers, vocab_size=vocab, tie_word_embeddings=True)
    with torch.device("meta"):
        model = BitNetForCausalLM(cfg).to(torch.bfloat16)
    if kind == "bitnet":
        replace_with_bitnet_linear(model, modules_to_not_convert=["lm_head"],
                                   quantization_config=BitNetQuantConfig())
    model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, BitLinear):
                fill_bitlinear(m, g)
            elif isinstance(m, torch.nn.Linear) and m is not model.lm_head:
                m.weight.normal_(0, 0.02, generator=g)
            elif isinstance(m, torch.nn.Embedding):
                m.weight.normal_(0, 0.02, generator=g)
            elif hasattr(m, "weight") and isinstance(getattr(m, "weight"), torch.nn.Parameter) \
                    and m.weight.dim() == 1:
                m.weight.fill_(1.0)
    model.tie_weights()
    model.model.rotary_emb.__init__(cfg)  # meta-initialized buffers: recompute
    return model.eval()


class _StepClock:
    """A logits processor that only notes the time: generate() calls it once per new token, right
    after that token's forward, so the gaps between calls are the decode steps (prefill excluded)."""

    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def decode_tps(model, prompt: int, n: int, vocab: int) -> float:
    from transformers import LogitsProcessorList
    ids = torch.randint(0, vocab, (1, prompt), generator=torch.Generator().manual_seed(1))
    kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.inference_mode():
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, **kw)  # warm up
        clock = _StepClock()
        model.generate(ids, max_new_tokens=n + 1, min_new_tokens=n + 1,
                       logits_processor=LogitsProcessorList([clock]), **kw)
    return n / (clock.times[-1] - clock.times[0])


def pylowbit_bench_tg(threads: int, prompt: int) -> float | None:
    cmd = [sys.executable, "-m", "pylowbit.cli", "bench", "--type", "i2_s", "-t", str(threads), "-r", "1",
           "-p", str(prompt), "-n", "16", "--json"]
    try:
        # (from this folder: in the repository root `-m pylowbit` would import the source tree)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True,
                             cwd=os.path.dirname(os.path.abspath(__file__))).stdout
        rows = json.loads(out)
    except (subprocess.SubprocessError, ValueError) as e:
        print(f"pylowbit bench failed: {e}", file=sys.stderr)
        return None
    for r in rows["rows"]:
        if str(r["test"]).startswith("tg"):
            return float(r["tokens_per_s"])
    print(f"pylowbit bench: no tg row in {rows}", file=sys.stderr)
    return None


def _set_repack(model, on: bool) -> None:
    for m in model.modules():
        if isinstance(m, pt.Linear):
            m.repack(on)


def bench_model(threads: int, n: int, layers: int, vocab: int, head: str = "q8_0", rounds: int = 2,
                pylowbit_too: bool = True) -> dict:
    """Every configuration measured once a round, rounds in turn (a shared machine's load drifts
    over minutes: each ratio should be taken within a round); `pylowbit bench` in each round too."""
    print(f"\n## BitNet b1.58 2B4T shape ({layers} layers, vocab {vocab}), generate() batch 1, "
          f"{n} tokens, {threads} threads, {cpu_name()}", flush=True)
    dense = build_model("dense", layers, vocab)
    model = build_model("bitnet", layers, vocab)
    t0 = time.perf_counter()
    pt.quantize_(model, head=None if head == "bf16" else head)
    conv = time.perf_counter() - t0
    ternary = [m for m in model.modules() if isinstance(m, pt.Linear) and m.format == "i2_s"]
    held = sum(b.numel() * b.element_size() for m in ternary for b in m.buffers(recurse=False))
    packed = sum(m.in_features * m.out_features // 4 for m in ternary)
    res = {"converted layers bytes / packed bytes": held / packed, "quantize_ s": conv}
    print(f"converted BitLinear layers: {held / 1e6:.1f} MB held, {packed / 1e6:.1f} MB of 2-bit codes "
          f"({held / packed:.4f}x); quantize_ took {conv:.1f} s", flush=True)

    def run(key, fn):
        v = fn()
        res.setdefault(key, []).append(v)
        print(f"  {key}: {v:.2f} t/s", flush=True)

    # transformers' own unfused twin of the recommended setup, to show what the fusions give
    unfused = pt.quantize_(build_model("bitnet", layers, vocab), head=None if head == "bf16" else head,
                           repack=True, fuse=False)
    for r in range(rounds):
        print(f"round {r + 1}", flush=True)
        for p in (1, 64):
            torch.set_num_threads(threads)
            pt.set_threads(None)
            run(f"dense bf16, prompt {p}", lambda: decode_tps(dense, p, n, vocab))
            # quantize_'s default threads rule: with every linear converted, torch runs one intra-op
            # thread inside the model's forward and pylowbit's kernels the count torch had
            _set_repack(model, False)
            run(f"quantize_ head {head}, prompt {p}", lambda: decode_tps(model, p, n, vocab))
            run(f"quantize_ head {head}, repack, unfused, prompt {p}",
                lambda: decode_tps(unfused, p, n, vocab))
            _set_repack(model, True)
            run(f"quantize_ head {head}, repack, prompt {p}", lambda: decode_tps(model, p, n, vocab))
            model.to(torch.float32)  # the same, activations in float32 (from_pretrained(dtype=...))
            run(f"quantize_ head {head}, repack, float32, prompt {p}",
                lambda: decode_tps(model, p, n, vocab))
            model.to(torch.bfloat16)
            if pylowbit_too and layers == 30 and vocab == 128256:
                tg = pylowbit_bench_tg(threads, p)
                if tg:
                    res.setdefault(f"pylowbit bench i2_s tg{n}, prompt {p}", []).append(tg)
                    print(f"  pylowbit bench i2_s tg{n} prompt {p}: {tg:.2f} t/s", flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["layer", "model", "all"])
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--n", type=int, default=16, help="decode tokens")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--head", default="q8_0", help="quantize_(head=...): q8_0, f16, or bf16 (kept)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-pylowbit-bench", action="store_true")
    a = ap.parse_args(argv)
    out = {"cpu": cpu_name(), "isa": lb.isa_active(), "torch": torch.__version__, "threads": a.threads}
    if a.what in ("layer", "all"):
        out["layer_us"] = bench_layer(a.threads, a.reps)
    if a.what in ("model", "all"):
        out["model"] = bench_model(a.threads, a.n, a.layers, a.vocab, a.head, a.rounds,
                                   not a.no_pylowbit_bench)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
