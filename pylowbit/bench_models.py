"""The models `pylowbit bench` runs: the synthetic presets (written once into the cache directory)
and the facts of a GGUF file the bench reports (its format's name, the bytes a token moves)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pylowbit._platform import cache_dir, exclusive_lock


# Synthetic model shapes: (architecture, synthetic base preset, overrides).  The 2B shape is BitNet
# b1.58 2B4T's; it is written as a `llama` file (same matrices and bytes per token; llama.cpp reads
# that architecture, so `--vs llama.cpp` runs the very same file).
PRESETS = {
    "bitnet-2b": ("llama", "bitnet-2b", {}),
    # the published 2B4T file's own layout: bitnet-b1.58, sub-norms, the F16 embedding tied as the
    # head (656 MB of the ~1.2 GB read per token), so the F16 GEMV is in every run
    "bitnet-2b-f16": ("bitnet-b1.58", "bitnet-2b", {}),
    "bonsai-1.7b": ("qwen3", "bitnet-2b", dict(n_layer=28, d_model=2048, n_ff=6144, n_head=16,
                                               n_head_kv=8, head_dim=128, vocab_size=151936,
                                               rope_base=1e6, eps=1e-6)),
    "bonsai-8b": ("qwen3", "bitnet-2b", dict(n_layer=36, d_model=4096, n_ff=12288, n_head=32,
                                             n_head_kv=8, head_dim=128, vocab_size=151936,
                                             rope_base=1e6, eps=1e-6)),
    "tiny": ("llama", "tiny", {}),
    # qwen35: Gated-DeltaNet + gated attention (QWEN35.md); bonsai2-27b is PrismML Bonsai 2 27B's shape
    "qwen35-tiny": ("qwen35", "qwen35-tiny", {}),
    "bonsai2-27b": ("qwen35", "bonsai2-27b", {}),
}
BENCH_TYPES = ("tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0", "q1_0")
NOT_LLAMA_CPP_TYPES = ("i2_s", "pq2_0", "ptq1_0")  # tensor types upstream llama.cpp does not read
# general.file_type (llama_ftype) -> llama.cpp's name for the file's type mix (llama_model_ftype_name,
# what llama-bench prints); 40 is Q1_0 upstream but bitnet.cpp's I2_S in its files (I2_S matrices)
FILE_TYPE_NAMES = {
    0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K - Medium",
    11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small", 15: "Q4_K - Medium",
    16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K", 19: "IQ2_XXS - 2.0625 bpw", 20: "IQ2_XS - 2.3125 bpw",
    21: "Q2_K - Small", 22: "IQ3_XS - 3.3 bpw", 23: "IQ3_XXS - 3.0625 bpw", 24: "IQ1_S - 1.5625 bpw",
    25: "IQ4_NL - 4.5 bpw", 26: "IQ3_S - 3.4375 bpw", 27: "IQ3_S mix - 3.66 bpw", 28: "IQ2_S - 2.5 bpw",
    29: "IQ2_M - 2.7 bpw", 30: "IQ4_XS - 4.25 bpw", 31: "IQ1_M - 1.75 bpw", 32: "BF16",
    36: "TQ1_0 - 1.69 bpw ternary", 37: "TQ2_0 - 2.06 bpw ternary", 38: "MXFP4 MoE", 39: "NVFP4",
    40: "Q1_0", 41: "Q2_0",
}
BITNET_CPP_I2_S_FILE_TYPE = "I2_S - 2 bpw ternary"
LLAMA_FTYPE_GUESSED = 1024  # llama.cpp's flag on a file type it guessed
EMBED_TYPE = "q8_0"  # token embedding: a type both engines read
PRESET_EMBED_TYPES = {"bitnet-2b-f16": "f16"}  # presets whose embedding is not EMBED_TYPE
DEFAULT_BENCH_TYPE = "tq2_0"
PRESET_DEFAULT_TYPES = {"bitnet-2b-f16": "i2_s"}  # the published file's matrices


GENERATOR_VERSION = 2  # bump when the synthetic files change, so caches are rebuilt
# Presets written the way the released model is (Bonsai 2 27B, QWEN35.md section 6): token_embd and
# output in the weight type (ternary), ternary codes straight to packed bytes (a 27B file in minutes,
# not hours of float32 passes), and the prism.hadamard metadata (explicit signs) on the types the
# release is rotated in.  Without --vs the PQ2_0 / PTQ1_0 files hold the release's exact tensor
# bytes.  qwen35-tiny takes the same path, so CI tests it without writing gigabytes.
RELEASE_RECIPES = {
    "qwen35-tiny": dict(rotation_block=256, rotated=("q2_0", "pq2_0", "ptq1_0")),
    "bonsai2-27b": dict(rotation_block=1024, rotated=("q2_0", "pq2_0", "ptq1_0")),
}
HEADER_ALLOWANCE = 64 << 20  # bytes beyond the tensors a synthetic file may need (tokenizer, signs)


def default_bench_type(preset: str) -> str:
    """The weight format `pylowbit bench --preset P` runs without --type."""
    return PRESET_DEFAULT_TYPES.get(preset, DEFAULT_BENCH_TYPE)


class BenchError(RuntimeError):
    """A user-facing problem (bad path, missing peer): reported as one line."""


@dataclass(frozen=True)
class SyntheticFile:
    """One cached synthetic model: what write_synthetic_model is given, and where it goes."""
    preset: str
    fmt: str
    rotation_block: int | None
    path: Path
    kwargs: dict

    def tensor_bytes(self) -> int:
        """The tensors' bytes (the file less its header), from the layout: nothing is written."""
        from pylowbit.gguf import tensor_nbytes, type_id
        from pylowbit.model.synthetic import synthetic_layout

        lay = synthetic_layout(**{k: v for k, v in self.kwargs.items()
                                  if k not in ("random_codes", "rotation_block")})
        return sum(tensor_nbytes(type_id(t), shape) for t, shape in lay.values())


def synthetic_file(preset: str, fmt: str, plain: bool = False) -> SyntheticFile:
    """The cached synthetic GGUF of (preset, fmt).  plain: no rotation even on a type the preset's
    release rotates (llama.cpp has no prism.hadamard: a rotated file would run there as noise)."""
    if preset not in PRESETS:
        raise BenchError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    if fmt not in BENCH_TYPES:
        raise BenchError(f"unknown type {fmt!r} (known: {', '.join(BENCH_TYPES)})")
    arch, base, overrides = PRESETS[preset]
    kwargs = dict(arch=arch, fmt=fmt, preset=base, **overrides)
    recipe = RELEASE_RECIPES.get(preset)
    if recipe is None:
        # random codes straight to bytes: the same bytes per token as quantized floats, written
        # in seconds rather than in minutes of float32 passes (Q1_0, no ternary format: from floats)
        kwargs.update(embed_fmt=PRESET_EMBED_TYPES.get(preset, EMBED_TYPE), random_codes=fmt != "q1_0")
        rot, name = None, f"synthetic-{preset}-{fmt}"
    else:
        rot = recipe["rotation_block"] if fmt in recipe["rotated"] and not plain else None
        # Q1_0 is no ternary format: quantized from floats (slow at 27B, but the same file shape)
        kwargs.update(embed_fmt=fmt, random_codes=fmt != "q1_0", rotation_block=rot)
        name = f"synthetic-{preset}-{fmt}-codes" + (f"-hadamard{rot}" if rot else "")
    return SyntheticFile(preset, fmt, rot, cache_dir() / f"{name}-v{GENERATOR_VERSION}.gguf", kwargs)


def ensure_disk_space(files: list[SyntheticFile]) -> None:
    """Before writing anything: the files not yet cached must fit the cache's file system together
    (one clear error naming the need and what is free, rather than a full disk half way)."""
    from pylowbit.gguf import check_disk_space

    missing = [f for f in files if not f.path.exists()]
    if missing:
        need = sum(f.tensor_bytes() + HEADER_ALLOWANCE for f in missing)
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        check_disk_space(directory, need, ", ".join(f.path.name for f in missing))


def synthetic_model(preset: str, fmt: str, console=None, plain: bool = False) -> Path:
    """Path of the cached synthetic GGUF for (preset, fmt), written once (with a progress bar on a
    rich `console`).  The write is atomic and holds a lock, so a second process asking for the same
    file (another bench on a shared machine) waits for it and reuses it instead of writing its own
    copy."""
    from pylowbit.model.synthetic import write_synthetic_model

    spec = synthetic_file(preset, fmt, plain)
    path = spec.path
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path):
        if path.exists():  # written by whoever held the lock before us
            return path
        ensure_disk_space([spec])
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("writing {task.description}"), BarColumn(), DownloadColumn(),
                      TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn(),
                      console=console, transient=True, disable=console is None) as bar:
            task = bar.add_task(path.name, total=None)

            def progress(done, total, name):
                bar.update(task, completed=done, total=total)

            write_synthetic_model(path, progress=progress, **spec.kwargs)
    return path


# ---- facts of a file ------------------------------------------------------------------------

def weight_bytes_per_token(path: Path) -> int:
    """Bytes of weights a generated token reads: every matrix except the embedding table (one row),
    which is read whole when it doubles as the LM head."""
    from pylowbit.gguf import GGUFFile

    with GGUFFile(path) as f:
        tensors = f.tensors
        total = sum(t.nbytes for t in tensors.values() if len(t.shape) == 2)
        if "output.weight" in tensors and "token_embd.weight" in tensors:
            total -= tensors["token_embd.weight"].nbytes
    return total


def bytes_per_token(path: Path) -> int:
    """Bytes a generated token must move, the roofline's numerator: its weight bytes, plus, in a
    model with recurrent layers, their state read and written back whole (Bonsai 2 27B: 2 x 144
    MiB, beside 5.5-6.7 GB of weights).  The KV cache read, under a megabyte at the bench's
    positions, is left out."""
    from pylowbit.gguf import GGUFFile
    from pylowbit.model.config import Config
    from pylowbit.model.forward import RecurrentState

    with GGUFFile(path) as f:
        state = RecurrentState.nbytes_for(Config.from_gguf(f))
    return weight_bytes_per_token(path) + 2 * state


def file_format(path: Path) -> tuple[str, list[str]]:
    """(the table's format: llama.cpp's name of the file's general.file_type, as llama-bench
    prints it, else the dominant matrix type by bytes; the file's tensor types upstream llama.cpp
    does not read)."""
    from pylowbit.gguf import TYPES, GGUFFile

    by_type: dict[int, int] = {}
    with GGUFFile(path) as f:
        for t in f.tensors.values():
            if len(t.shape) == 2 and t.name != "token_embd.weight":
                by_type[t.type_id] = by_type.get(t.type_id, 0) + t.nbytes
        names = {TYPES[t.type_id].name if t.type_id in TYPES else f"type{t.type_id}" for t in f.tensors.values()}
        ftype = f.metadata.get("general.file_type")
    foreign = sorted(n for n in names if n in NOT_LLAMA_CPP_TYPES)
    top = max(by_type, key=by_type.get) if by_type else None
    top_name = TYPES[top].name if top in TYPES else ("other" if top is None else f"type{top}")
    if isinstance(ftype, int) and not isinstance(ftype, bool):
        guessed = " (guessed)" if ftype & LLAMA_FTYPE_GUESSED else ""
        ftype &= ~LLAMA_FTYPE_GUESSED
        if ftype == 40 and top_name == "i2_s":
            return BITNET_CPP_I2_S_FILE_TYPE + guessed, foreign
        if ftype in FILE_TYPE_NAMES:
            return FILE_TYPE_NAMES[ftype] + guessed, foreign
    return top_name, foreign

