"""Tokens/s of the decoder, side by side with llama.cpp, against the machine's bandwidth roofline.

Everything is measured in one run: the read bandwidth (for the roofline), pylowbit, and - with
`--vs llama.cpp` - llama-cpp-python on the same GGUF file, interleaved repetition by repetition so
that drift on a shared machine hits both engines alike.
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pylowbit import _platform
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


def default_bench_type(preset: str) -> str:
    """The weight format `pylowbit bench --preset P` runs without --type."""
    return PRESET_DEFAULT_TYPES.get(preset, DEFAULT_BENCH_TYPE)
GENERATOR_VERSION = 1  # bump when the synthetic files change, so caches are rebuilt
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
        kwargs["embed_fmt"] = PRESET_EMBED_TYPES.get(preset, EMBED_TYPE)
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
    """Path of the cached synthetic GGUF for (preset, fmt), written once with a progress bar.  The
    write is atomic and holds a lock, so a second process asking for the same file (another bench
    on a shared machine) waits for it and reuses it instead of writing its own copy."""
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
                      console=console, transient=True) as bar:
            task = bar.add_task(path.name, total=None)

            def progress(done, total, name):
                bar.update(task, completed=done, total=total)

            write_synthetic_model(path, progress=progress, **spec.kwargs)
    return path


# ---- machine read bandwidth ------------------------------------------------------------------

def probe_buffer(nbytes: int) -> np.ndarray:
    """nbytes of ones (every page really mapped) in anonymous memory with transparent huge pages
    where Linux gives them, as liblowbit asks for its packed weights: the probe reads the way the
    weights are read (read_bandwidth's default buffer; bench/bench_kernels.py's too).  Freed with
    the array."""
    import mmap

    try:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (AttributeError, OSError, ValueError):  # no anonymous POSIX mapping here
        return np.ones(nbytes, dtype=np.uint8)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a hint: refused is fine
            pass
    buf = np.frombuffer(m, dtype=np.uint8)  # keeps the mapping alive
    buf[:] = 1
    return buf


def read_bandwidth(threads: int, nbytes: int = 512 << 20, reps: int = 5, clock=time.perf_counter,
                   buf: np.ndarray | None = None) -> float:
    """Best-of-reps bytes/s streaming a buffer much larger than the caches on `threads` threads.

    The read loop is liblowbit's, run on the same thread pool and split the same way as the GEMV
    kernels (one contiguous share per thread), so a roofline compares like with like.  Also used
    by bench/bench_kernels.py, which times one thread in thread CPU time (`clock`) and passes a
    buffer of its own to re-measure next to each DRAM case."""
    from pylowbit import _lowbit

    if buf is None:
        buf = probe_buffer(nbytes)
    _lowbit.stream_read(buf, threads)  # warm-up: starts the pool's workers
    best = 0.0
    for _ in range(reps):
        t0 = clock()
        _lowbit.stream_read(buf, threads)
        best = max(best, buf.nbytes / (clock() - t0))
    return best


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


# ---- engines ---------------------------------------------------------------------------------

class PylowbitEngine:
    name = "pylowbit"

    def __init__(self, path: Path, threads: int, ctx: int):
        from pylowbit.model import load_model

        t0 = time.perf_counter()
        self.model = load_model(path, ctx=ctx, threads=threads)
        self.load_s = time.perf_counter() - t0

    def set_threads(self, threads: int) -> None:
        """The same loaded model on another thread count (a 27B file takes minutes to load)."""
        self.model.threads = threads

    def prompt(self, tokens) -> None:
        self.model.reset()
        self.model.forward(tokens, pos=0)

    def generate(self, first: int, n: int) -> None:
        self.model.reset()  # n one-token steps from an empty cache, as llama-bench's tg n
        for i in range(n):
            self.model.forward([(first + i) % self.model.vocab_size])

    def close(self):
        self.model = None


class LlamaCppEngine:
    name = "llama.cpp"

    def __init__(self, path: Path, threads: int, ctx: int):
        try:
            from llama_cpp import Llama
        except ImportError:
            raise BenchError("--vs llama.cpp needs llama-cpp-python: pip install "
                             "llama-cpp-python==0.3.36") from None
        t0 = time.perf_counter()
        self.llm = Llama(model_path=str(path), n_ctx=ctx, n_batch=ctx, n_ubatch=ctx,
                         n_threads=threads, n_threads_batch=threads, verbose=False)
        self.load_s = time.perf_counter() - t0

    def prompt(self, tokens) -> None:
        self.llm.reset()
        self.llm.eval(list(tokens))

    def generate(self, first: int, n: int) -> None:
        self.llm.reset()
        for i in range(n):
            self.llm.eval([(first + i) % self.llm.n_vocab()])

    def close(self):
        self.llm.close()


# ---- measuring -------------------------------------------------------------------------------

def _reset_peak_rss() -> None:
    try:  # Linux: writing 5 to clear_refs resets VmHWM to the current RSS
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if _platform.WINDOWS:  # no resource module
        return _platform.windows_peak_working_set()
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


@dataclass
class Row:
    model: str
    format: str
    size_bytes: int
    engine: str
    threads: int
    test: str
    tokens_per_s: float
    stdev: float
    samples: list = field(default_factory=list)
    roofline_share: float | None = None  # generation only
    vs_llama_cpp: float | None = None  # pylowbit t/s / llama.cpp t/s, same file, same run
    peak_rss_bytes: int = 0
    load_s: float = 0.0  # the engine's load of the file (pylowbit: once, for every thread count)


def _timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def run(paths: list[tuple[str, Path]], threads: list[int], n_prompt: int, n_gen: int, reps: int,
        vs_llama: bool, console=None) -> tuple[list[Row], dict]:
    """Measure every (file, threads, test) for pylowbit (and llama.cpp), interleaved: for each
    thread count all files are loaded at once and each repetition runs every (file, engine) in
    turn, so that the ratios between formats, not only between engines, are side by side (a
    machine's drift between runs would otherwise move them).  pylowbit loads each
    file once for all thread counts.  Files whose models do not fit in memory together are
    measured one after the other instead (_memory_groups).  Peak RSS is the process's, with all
    models of the file's group loaded."""
    info = {"bandwidth_bytes_per_s": {}, "bandwidth_range_bytes_per_s": {}, "n_prompt": n_prompt,
            "n_gen": n_gen, "reps": reps}
    ctx = max(n_prompt, 1) + n_gen + 16
    # One probe buffer for the whole run, mapped before any model: its huge pages (if the OS gives
    # them) are the same for every probe, not found or not as memory fragments.  Peak RSS leaves it out.
    probe_buf = probe_buffer(512 << 20) if n_gen > 0 else None
    probe_rss = 0 if probe_buf is None else probe_buf.nbytes  # all touched, all resident
    files, llama_reads = [], set()  # llama_reads: indices of the files llama.cpp reads
    for label, path in paths:
        fmt, foreign = _file_format(path)
        if not foreign:
            llama_reads.add(len(files))
        files.append((label, path, path.stat().st_size, bytes_per_token(path), fmt))
        if vs_llama and foreign and console:
            console.print(f"[yellow]llama.cpp does not read {', '.join(foreign)}: no comparison for "
                          f"{label}[/yellow]")
    found: dict[tuple, Row] = {}
    probes_of: dict[int, list] = {t: [] for t in threads}
    groups = _memory_groups(files, llama_reads if vs_llama else set())
    if len(groups) > 1 and console:
        console.print("[yellow]the models do not fit in the available memory together: "
                      "each file is measured in turn[/yellow]")
    for group in groups:
        loaded: dict[int, PylowbitEngine] = {}  # once for every thread count: it is a setting
        for t in threads:
            runs = []  # (file index, engines, tests)
            for i, (label, path, size, per_token, fmt) in group:
                if i not in loaded:
                    loaded[i] = PylowbitEngine(path, t, ctx)
                loaded[i].set_threads(t)
                engines = [loaded[i]]
                vocab = engines[0].model.vocab_size  # token ids valid in any model, tiny included
                tokens = [(7 * j + 11) % (vocab - 10) + 10 for j in range(max(n_prompt, 1))]
                if vs_llama and i in llama_reads:
                    engines.append(LlamaCppEngine(path, t, ctx))
                tests = []
                if n_prompt > 0:
                    tests.append((f"pp{n_prompt}", n_prompt, lambda e, tk=tokens: e.prompt(tk[:n_prompt])))
                if n_gen > 0:
                    tests.append((f"tg{n_gen}", n_gen, lambda e, tk=tokens: e.generate(tk[0], n_gen)))
                runs.append((i, engines, tests))
            for k in range(len(runs[0][2]) if runs else 0):  # the same tests for every file
                test, n_tok = runs[0][2][k][:2]
                for i, engines, tests in runs:  # warm-up: first-touch page faults, packing, caches
                    for e in engines:
                        tests[k][2](e)
                samples = {(i, e.name): [] for i, engines, _ in runs for e in engines}
                peaks = dict.fromkeys(samples, 0)
                # Generation's roofline is paired run by run: the read bandwidth is probed right before
                # and after every timed run, and the run's share is its bytes/s over the better of those
                # two (a dip in one probe can't inflate it), so drift on a shared machine moves both
                # sides alike.
                probe = test.startswith("tg")
                probes = [read_bandwidth(t, reps=2, buf=probe_buf)] if probe else []
                shares = {key: [] for key in samples}
                for _ in range(reps):
                    for i, engines, tests in runs:  # one repetition of each (file, engine) in turn
                        for e in engines:
                            _reset_peak_rss()
                            samples[i, e.name].append(n_tok / _timed(tests[k][2], e))
                            peaks[i, e.name] = max(peaks[i, e.name], _peak_rss() - probe_rss)
                            if probe:
                                probes.append(read_bandwidth(t, reps=2, buf=probe_buf))
                                shares[i, e.name].append(samples[i, e.name][-1] * files[i][3]
                                                         / max(probes[-2:]))
                if probe:
                    allp = probes_of[t]
                    allp += probes
                    info["bandwidth_bytes_per_s"][t] = statistics.mean(allp)
                    # how far the machine's bandwidth moved during the runs: on a shared machine the
                    # better of two probes (each run's reference) sits above their mean by up to half this
                    info["bandwidth_range_bytes_per_s"][t] = [min(allp), max(allp)]
                for i, engines, _ in runs:
                    label, path, size, per_token, fmt = files[i]
                    ours = None
                    for e in engines:
                        sm = samples[i, e.name]
                        row = Row(label, fmt, size, e.name, t, test, statistics.mean(sm),
                                  statistics.stdev(sm) if len(sm) > 1 else 0.0, sm,
                                  peak_rss_bytes=peaks[i, e.name], load_s=e.load_s)
                        if probe:
                            row.roofline_share = statistics.mean(shares[i, e.name])
                        if e.name == "pylowbit":
                            ours = row
                        elif ours is not None:
                            ours.vs_llama_cpp = ours.tokens_per_s / row.tokens_per_s
                        found[i, t, k, e.name] = row
            for _, engines, _ in runs:
                for e in engines[1:]:  # llama.cpp's (its thread count is fixed at load)
                    e.close()
        for e in loaded.values():
            e.close()
        loaded.clear()
        gc.collect()  # the next group's models load into this one's memory
    rows = [found[key] for key in sorted(found, key=lambda key: (key[0], threads.index(key[1]), key[2]))]
    info["bytes_per_token"] = {f[0]: f[3] for f in files}
    info["weight_bytes_per_token"] = {f[0]: weight_bytes_per_token(f[1]) for f in files}
    return rows, info


def _available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _memory_groups(files: list, compared: set) -> list[list]:
    """The files as [(index, file)] groups loaded together: all of them in one group when their
    models fit in the available memory at once (a model takes about its file's size; llama.cpp's
    mapping of it as much again), else one file a group, measured in turn.  Two Bonsai 2 27B models
    (7.2 + 5.9 GB) do not fit a shared 24 GB machine.  The margin is wide: a repacked model can be
    larger than its file, and on a shared machine the others' memory grows while ours loads."""
    indexed = list(enumerate(files))
    need = sum(f[2] * (2 if i in compared else 1) for i, f in enumerate(files))
    avail = _available_memory()
    if avail is None or need <= 0.5 * avail or len(files) == 1:
        return [indexed]
    return [[x] for x in indexed]


def _file_format(path: Path) -> tuple[str, list[str]]:
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


def to_json(rows: list[Row], info: dict) -> str:
    return json.dumps({"info": info, "rows": [asdict(r) for r in rows]}, indent=2)


def to_csv(rows: list[Row]) -> str:
    import csv
    import io

    out = io.StringIO()
    fields = [f for f in asdict(rows[0]) if f != "samples"] if rows else []
    w = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(asdict(r))
    return out.getvalue()
