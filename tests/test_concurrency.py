"""Many Python threads at once: kernels and separate models give the serial results bit for bit;
one model stepped from two threads fails clearly.  The thread pool itself: every split of rows and
column tiles, back-to-back jobs (a worker waking late must never run a task of the next job), and
both ways of waking workers (spinning, and sleeping when PYLOWBIT_SPIN_US=0)."""
import os
import subprocess
import tempfile
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pylowbit as lb
from pylowbit.model import load_model
from pylowbit.model.synthetic import write_synthetic_model


def test_kernels_from_many_threads_equal_serial():
    rng = np.random.default_rng(0)
    fmts = ["tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0", "q8_0", "f16"]
    # 1000 rows: big enough that threads=2 really splits every format over the pool
    mats = [lb.quantize(rng.standard_normal((1000, 512)).astype(np.float32), f) for f in fmts]
    mats += [m.pack() for m in mats]
    xs = [rng.standard_normal((5, 512)).astype(np.float32) for _ in mats]

    def work(i):
        m, x = mats[i % len(mats)], xs[i % len(mats)]
        return m.gemv(x[0], threads=2), m.gemm(x, threads=2), lb.fwht(x.copy(), block=128)

    serial = [work(i) for i in range(len(mats) * 3)]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(work, range(len(mats) * 3)))
    for a, b in zip(serial, parallel):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("rows", [4, 64, 68, 200, 1000, 1027])
@pytest.mark.parametrize("fmt", ["tq2_0", "tq1_0", "i2_s", "q8_0", "f16"])
def test_every_split_equals_one_thread(fmt, rows):
    """Rows not a multiple of the task size, fewer tasks than threads, 2..5 threads, GEMV and GEMM
    (row x column tiles), file layout and packed: all bit-identical to one thread."""
    rng = np.random.default_rng(rows)
    w = lb.quantize(rng.standard_normal((rows, 1024)).astype(np.float32), fmt)
    x = rng.standard_normal((13, 1024)).astype(np.float32)
    for m in ([w, w.pack()] if fmt not in ("q8_0", "f16") else [w]):
        one_v, one_m = m.gemv(x[0], threads=1), m.gemm(x, threads=1)
        for t in (2, 3, 5):
            np.testing.assert_array_equal(m.gemv(x[0], threads=t), one_v)
            np.testing.assert_array_equal(m.gemm(x, threads=t), one_m)


def _back_to_back():
    """Thousands of short jobs in a row, each into its own output, checked against one thread."""
    rng = np.random.default_rng(5)
    m = lb.quantize(rng.standard_normal((512, 1024)).astype(np.float32), "tq2_0").pack()
    xs = rng.standard_normal((64, 1024)).astype(np.float32)
    ref = np.stack([m.gemv(x, threads=1) for x in xs])
    outs = np.full((3000, 512), np.nan, np.float32)
    for i in range(len(outs)):
        m.gemv(xs[i % 64], out=outs[i], threads=2)
    for i in range(len(outs)):
        np.testing.assert_array_equal(outs[i], ref[i % 64])


def test_back_to_back_jobs():
    _back_to_back()


def test_back_to_back_jobs_with_sleeping_workers():
    """PYLOWBIT_SPIN_US=0: workers sleep as soon as they are idle, so every job wakes them."""
    code = "import test_concurrency as t; t._back_to_back(); print('ok')"
    path = [os.path.dirname(os.path.abspath(__file__)), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYLOWBIT_SPIN_US="0", PYTHONPATH=os.pathsep.join(p for p in path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir(), timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("conc")
    return [write_synthetic_model(d / f"m{i}.gguf", arch=a, fmt=f, seed=i)
            for i, (a, f) in enumerate([("llama", "tq2_0"), ("qwen3", "q2_0")])]


def run(path, tokens):
    m = load_model(path, ctx=64, threads=2, notice=None)
    out = [m.forward(tokens[:8], pos=0)]
    for t in tokens[8:]:
        out.append(m.forward([t]))
    return np.stack(out)


def test_separate_models_in_threads_equal_serial(two_models):
    tokens = [5, 17, 3, 99, 42, 7, 1, 250, 31, 64, 11, 2]
    serial = [run(p, tokens) for p in two_models]
    with ThreadPoolExecutor(2) as pool:
        parallel = list(pool.map(lambda p: run(p, tokens), two_models))
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


def test_one_model_from_two_threads_fails_clearly(two_models):
    m = load_model(two_models[0], ctx=256, threads=1, notice=None)
    inside, go_on = threading.Event(), threading.Event()
    lookup = m.w.token_embd

    def slow_lookup(tokens):  # holds thread A inside forward() until the main thread has tried
        inside.set()
        go_on.wait(10)
        return lookup(tokens)

    m.w.token_embd = slow_lookup
    a = threading.Thread(target=lambda: m.forward([1, 2, 3], pos=0))
    a.start()
    assert inside.wait(10)
    with pytest.raises(RuntimeError, match="already running forward\\(\\) in another thread"):
        m.forward([4], pos=0)
    go_on.set()
    a.join()
    m.w.token_embd = lookup
    assert m.cache.n == 3  # thread A's step went through untouched
    assert np.isfinite(m.forward([4])).all()


def _gemv_in_child(args):
    m, x = args
    return m.gemv(x, threads=2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_pool_works_in_a_forked_child():
    """After fork() the child has none of the parent's workers (nor the state of its locks)."""
    import multiprocessing

    rng = np.random.default_rng(6)
    m = lb.quantize(rng.standard_normal((1000, 1024)).astype(np.float32), "tq2_0")
    x = rng.standard_normal(1024).astype(np.float32)
    ref = m.gemv(x, threads=2)  # the parent's pool is up
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply(_gemv_in_child, ((m, x),))
    np.testing.assert_array_equal(got, ref)
