"""Tokens/s of the decoder, side by side with llama.cpp, against the machine's bandwidth roofline.

    from pylowbit import benchmark
    result = benchmark.run(preset="tiny", types=["tq2_0", "i2_s"], threads=[1, 2])
    for row in result.rows:
        print(row.format, row.threads, row.test, row.tokens_per_s, row.roofline_share)

Everything is measured in one run: the read bandwidth (for the roofline), pylowbit, and - with
`vs="llama.cpp"` - llama-cpp-python on the same GGUF file, interleaved repetition by repetition so
that drift on a shared machine hits both engines alike.  `pylowbit bench` is this function's
command line.
"""
from __future__ import annotations

import gc
import json
import statistics
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple, Sequence

# Re-exported: the bench's models and machine probes were part of this module.
from pylowbit.bench_engines import LlamaCppEngine, PylowbitEngine, TorchEngine, _peer_reads  # noqa: F401
from pylowbit.bench_machine import (available_memory, peak_rss, probe_buffer, read_bandwidth,  # noqa: F401
                                    reset_peak_rss)
from pylowbit.bench_models import (BENCH_TYPES, BITNET_CPP_I2_S_FILE_TYPE, DEFAULT_BENCH_TYPE,  # noqa: F401
                                   EMBED_TYPE, FILE_TYPE_NAMES, GENERATOR_VERSION, HEADER_ALLOWANCE,
                                   LLAMA_FTYPE_GUESSED, NOT_LLAMA_CPP_TYPES, PRESET_DEFAULT_TYPES,
                                   PRESET_EMBED_TYPES, PRESETS, RELEASE_RECIPES, BenchError, SyntheticFile,
                                   bytes_per_token, default_bench_type, ensure_disk_space, file_format,
                                   synthetic_file, synthetic_model, weight_bytes_per_token)


# ---- measuring -------------------------------------------------------------------------------

@dataclass
class Row:
    """One measured (file, engine, thread count, test): `model` the file's label, `format` its type
    as llama-bench names it, `size_bytes` the file's size, `test` "ppN" or "tgN", `tokens_per_s`
    and `stdev` over the repetitions' `samples`, `roofline_share` (generation) the tokens/s times
    the bytes a token moves over the read bandwidth probed around the run, `vs_llama_cpp` pylowbit's
    tokens/s over llama.cpp's, `peak_rss_bytes` the process's peak resident memory while the row ran,
    `load_s` the engine's load time."""
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
    vs_torch: float | None = None  # pylowbit t/s / pylowbit.torch's t/s (vs="torch")
    peak_rss_bytes: int = 0
    load_s: float = 0.0  # the engine's load of the file (pylowbit: once, for every thread count)


class BenchResult(NamedTuple):
    """What run() measured: `rows` (one Row per file, engine, thread count and test, file by file)
    and `info` (the run's settings and machine facts: "bandwidth_bytes_per_s" and
    "bandwidth_range_bytes_per_s" per thread count, "n_prompt", "n_gen", "reps", and per file label
    "bytes_per_token" and "weight_bytes_per_token").  It unpacks as `rows, info = run(...)`."""
    rows: list
    info: dict

    def to_json(self) -> str:
        """The JSON `pylowbit bench --json` prints."""
        return to_json(self.rows, self.info)

    def to_csv(self) -> str:
        """The CSV `pylowbit bench --csv` prints (the rows without their samples)."""
        return to_csv(self.rows)


# Generation's warm-up: a few steps read every weight once, as the whole test would (page faults,
# caches, the threads' wake-up); more only repeat the timed runs' work.
WARMUP_GEN = 4


def _timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def measure(paths: list[tuple[str, Path]], threads: list[int], n_prompt: int, n_gen: int, reps: int,
            vs: str | None, console=None) -> tuple[list[Row], dict]:
    """Measure every (file, threads, test) for pylowbit (and the peer `vs`), interleaved: for each
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
    files, llama_reads = [], set()  # llama_reads: indices of the files the peer reads
    for label, path in paths:
        fmt, foreign = file_format(path)
        if vs and _peer_reads(path, vs):
            llama_reads.add(len(files))
        elif vs and console:
            why = f"does not read {', '.join(foreign)}" if vs == "llama.cpp" else "reads llama files only"
            console.print(f"[yellow]{vs} {why}: no comparison for {label}[/yellow]")
        files.append((label, path, path.stat().st_size, bytes_per_token(path), fmt))
    found: dict[tuple, Row] = {}
    probes_of: dict[int, list] = {t: [] for t in threads}
    groups = _memory_groups(files, llama_reads)
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
                if i in llama_reads:
                    engines.append({"llama.cpp": LlamaCppEngine, "torch": TorchEngine}[vs](path, t, ctx))
                tests = []
                if n_prompt > 0:  # (name, tokens, the timed run, its warm-up)
                    pp = lambda e, tk=tokens: e.prompt(tk[:n_prompt])  # noqa: E731
                    tests.append((f"pp{n_prompt}", n_prompt, pp, pp))
                if n_gen > 0:
                    tests.append((f"tg{n_gen}", n_gen, lambda e, tk=tokens: e.generate(tk[0], n_gen),
                                  lambda e, tk=tokens: e.generate(tk[0], min(n_gen, WARMUP_GEN))))
                runs.append((i, engines, tests))
            for k in range(len(runs[0][2]) if runs else 0):  # the same tests for every file
                test, n_tok = runs[0][2][k][:2]
                for i, engines, tests in runs:  # warm-up: first-touch page faults, packing, caches
                    for e in engines:
                        tests[k][3](e)
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
                            reset_peak_rss()
                            samples[i, e.name].append(n_tok / _timed(tests[k][2], e))
                            peaks[i, e.name] = max(peaks[i, e.name], peak_rss() - probe_rss)
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
                        elif ours is not None and e.name == "torch":
                            ours.vs_torch = ours.tokens_per_s / row.tokens_per_s
                        elif ours is not None:
                            ours.vs_llama_cpp = ours.tokens_per_s / row.tokens_per_s
                        found[i, t, k, e.name] = row
            for _, engines, _ in runs:
                for e in engines[1:]:  # the peer's (its thread count is fixed at load)
                    e.close()
        for e in loaded.values():
            e.close()
        loaded.clear()
        gc.collect()  # the next group's models load into this one's memory
    rows = [found[key] for key in sorted(found, key=lambda key: (key[0], threads.index(key[1]), key[2]))]
    info["bytes_per_token"] = {f[0]: f[3] for f in files}
    info["weight_bytes_per_token"] = {f[0]: weight_bytes_per_token(f[1]) for f in files}
    return rows, info



def _memory_groups(files: list, compared: set) -> list[list]:
    """The files as [(index, file)] groups loaded together: all of them in one group when their
    models fit in the available memory at once (a model takes about its file's size; llama.cpp's
    mapping of it as much again), else one file a group, measured in turn.  Two Bonsai 2 27B models
    (7.2 + 5.9 GB) do not fit a shared 24 GB machine.  The margin is wide: a repacked model can be
    larger than its file, and on a shared machine the others' memory grows while ours loads."""
    indexed = list(enumerate(files))
    need = sum(f[2] * (2 if i in compared else 1) for i, f in enumerate(files))
    avail = available_memory()
    if avail is None or need <= 0.5 * avail or len(files) == 1:
        return [indexed]
    return [[x] for x in indexed]


def run(model: str | Path | None = None, *, preset: str = "bitnet-2b", types: str | Sequence[str] | None = None,
        threads: Sequence[int] | None = None, n_prompt: int = 64, n_gen: int = 16, reps: int = 3,
        vs: str | None = None, console=None) -> BenchResult:
    """Tokens/s of prompt processing and generation, with the roofline share (and the ratio to
    llama.cpp), measured in one run.

    model: a GGUF file to measure; None (the default) measures the synthetic model of `preset`
        in each of `types`, written once into the cache directory (PYLOWBIT_CACHE).
    preset: the synthetic model's shape, one of PRESETS ("bitnet-2b", "tiny", "bonsai2-27b", ...).
    types: weight formats of the synthetic models (a list, or a comma-separated string) out of
        BENCH_TYPES; default the preset's own (tq2_0; i2_s for bitnet-2b-f16).
    threads: thread counts to measure (default: 1 and pylowbit.get_threads()).
    n_prompt: the prompt test's batch of tokens (0 skips it); n_gen: the generation test's tokens,
        one at a time (0 skips it); reps: repetitions of each test (mean and stdev over them).
    vs: "llama.cpp" also runs llama-cpp-python on every file it reads, interleaved; "torch" the same
        llama files as transformers models holding pylowbit.torch layers (pylowbit.torch.load_gguf),
        generating through transformers' generate().
    console: a rich Console for progress and notices (None: silent).

    Returns a BenchResult (rows, info); see Row for the fields of a row.  Raises BenchError (a
    RuntimeError) or ValueError with one clear line on bad input, before writing any file.

        >>> rows, info = run(preset="tiny", types="tq2_0", threads=[1], n_prompt=8, n_gen=2, reps=1)
        >>> [(r.format, r.test) for r in rows]
        [('tq2_0', 'pp8'), ('tq2_0', 'tg2')]
    """
    if threads is None:
        from pylowbit import get_threads

        threads = sorted({1, get_threads()})
    threads = [int(t) for t in threads]
    if not threads or any(t < 1 for t in threads):
        raise ValueError(f"expected positive thread counts, got {threads}")
    if n_prompt < 0 or n_gen < 0 or reps < 1:
        raise ValueError("-p (n_prompt) and -n (n_gen) must be >= 0 and -r (reps) >= 1")
    if vs not in (None, "llama.cpp", "torch"):
        raise ValueError(f"vs: 'llama.cpp' or 'torch', got {vs!r}")
    if vs == "torch":  # fail before spending minutes on model files
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            raise BenchError('--vs torch needs torch and transformers (pip install "torch==2.13.0+cpu" '
                             'transformers)') from None
    elif vs:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise BenchError("--vs llama.cpp needs llama-cpp-python "
                             "(pip install llama-cpp-python==0.3.36)") from None
    if model is not None:
        paths = [(Path(model).name, _readable_file(model))]
    else:
        if types is None:
            types = default_bench_type(preset)
        if isinstance(types, str):
            types = types.split(",")
        types = [t.strip().lower() for t in types if t.strip()]
        # llama.cpp has no prism.hadamard: the files it runs too are written without rotation
        plain = {t: vs == "llama.cpp" and t not in NOT_LLAMA_CPP_TYPES for t in types}
        specs = [synthetic_file(preset, t, plain[t]) for t in types]
        ensure_disk_space(specs)  # all of them, before the first is written
        paths = []
        for t, spec in zip(types, specs):
            path = synthetic_model(preset, t, console=console, plain=plain[t])
            label = f"{preset} {t}" + (f" hadamard{spec.rotation_block}" if spec.rotation_block else "")
            paths.append((label, path))
    with console.status("measuring (memory bandwidth, then each test)...") if console else nullcontext():
        rows, info = measure(paths, threads, n_prompt, n_gen, reps, vs, console=console)
    info["vs"] = vs
    return BenchResult(rows, info)


def _readable_file(model) -> Path:
    path = Path(model)
    if not path.exists():
        raise BenchError(f"no such file: {model}")
    if not path.is_file():
        raise BenchError(f"not a file: {model}")
    try:  # the open itself tells (permissions, ACLs, root, network file systems)
        path.open("rb").close()
    except OSError as e:
        raise BenchError(f"cannot read {model}: {e.strerror or e}") from None
    return path


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
