"""Weights per second of every format x variant x layout x threads in three memory regimes.

    pytest bench/ --benchmark-only            (about 5 minutes; add -k to narrow it)

Regimes: L2 (a matrix of ~384 KB), L3 (6912 x 2560, the BitNet-2B FFN shape), DRAM (copies of
the 6912 x 2560 matrix totalling >= 512 MB, cycled so that no weight is in cache when read).
The machine's streaming read bandwidth is measured in the same run (liblowbit's read loop over a
512 MB buffer on its thread pool, 1 and 2 threads, as `pylowbit bench` does) and each GEMV is
reported as a % of its roofline: bandwidth / bytes per weight of the layout it reads (the file
format, or the packed copy).  numpy float32 GEMV (OpenBLAS) on the same shape gives a familiar
yardstick.  One-thread rows are timed in thread CPU time (robust to other processes on a shared
machine), two-thread rows in wall time.  The scalar variant is run in L2 and L3 only (streaming
512 MB through it takes seconds per call).
"""
import time

import numpy as np
import pytest

import pylowbit as lb
from pylowbit.benchmark import probe_buffer, read_bandwidth

FORMATS = ["tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0", "q1_0", "q8_0", "f16"]
PACKED = {"tq1_0", "tq2_0", "i2_s", "q2_0", "pq2_0", "ptq1_0"}
VARIANTS = [v for v in ("scalar", "avx2", "avxvnni", "avx512vnni", "neon", "dotprod", "i8mm")
            if v in lb.isa_supported()]
THREADS = [1, 2]
ROWS, COLS = 6912, 2560
DRAM_BYTES = 512 << 20


def _time_min(fn, rounds, threads=2):
    """Best of `rounds`, on the clock of _clock(threads)."""
    clock = _clock(threads)
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def _clock(threads):
    """One thread: the thread's CPU time, which does not count the slices other processes steal
    on a shared machine; several threads: wall time."""
    return time.thread_time if threads == 1 else time.perf_counter


@pytest.fixture(scope="session")
def stream_buf():
    return probe_buffer(DRAM_BYTES)


def _bandwidth(threads, buf, reps=5):
    """Streaming read bandwidth (bytes/s) as `pylowbit bench` measures it (liblowbit's read loop
    on its thread pool), on the same clock as the kernel it is compared with."""
    return read_bandwidth(threads, reps=reps, clock=_clock(threads), buf=buf)


def _time_with_bandwidth(fn, rounds, threads, buf):
    """Best kernel time and best read bandwidth, measured in alternation (kernel, probe, kernel,
    ...): on a shared machine the bandwidth left to one thread drifts within seconds, and a
    probe taken before or after a whole series skewed the % roofline by +-15 points."""
    clock = _clock(threads)
    fn()
    best, bw = float("inf"), 0.0
    for _ in range(rounds + 1):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
        bw = max(bw, _bandwidth(threads, buf, 1))
    return best, bw


@pytest.fixture(scope="session")
def bandwidth(results, stream_buf):
    """Read bandwidth for 1 and 2 threads at the start of the run (for L2 / L3 rows and the
    summary); DRAM rows re-measure it right next to each kernel, as load on a shared machine
    drifts within minutes."""
    bw = {}
    for t in THREADS:
        bw[t] = _bandwidth(t, stream_buf)
        results.append({"kind": "bandwidth", "threads": t, "gbps": bw[t] / 1e9})
    return bw


@pytest.fixture(scope="session")
def numpy_gws():
    """numpy float32 GEMV (OpenBLAS, its own threads) on the L3 shape: weights/s (wall time)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    x = rng.standard_normal(COLS, dtype=np.float32)
    return ROWS * COLS / _time_min(lambda: w @ x, 20)


def _quantized(fmt, rows, cols, seed=0):
    rng = np.random.default_rng(seed)
    return lb.quantize(rng.standard_normal((rows, cols), dtype=np.float32), fmt)


def _l2_rows(fmt):
    """Rows of a COLS-wide matrix of about 384 KB (a multiple of 4)."""
    row_bytes = lb.tensor_nbytes(fmt, COLS * 4) / 4
    return max(4, int(384 * 1024 / row_bytes) // 4 * 4)


@pytest.fixture(scope="module", params=FORMATS)
def mats(request):
    """Per format: L2 and L3 matrices and the DRAM set (file layout and packed)."""
    fmt = request.param
    l3 = _quantized(fmt, ROWS, COLS)
    l2 = _quantized(fmt, _l2_rows(fmt), COLS)
    copies = -(-DRAM_BYTES // l3.nbytes)
    dram = [lb.QTensor(l3.data.copy(), fmt, l3.shape) for _ in range(copies)]
    m = {"fmt": fmt, "L2": {"file": [l2]}, "L3": {"file": [l3]}, "DRAM": {"file": dram}}
    if fmt in PACKED:
        m["L2"]["packed"] = [l2.pack()]
        m["L3"]["packed"] = [l3.pack()]
        m["DRAM"]["packed"] = [t.pack() for t in dram]
    yield m
    m.clear()


def _bytes_per_weight(w, layout):
    if layout == "packed":
        return w.packed_nbytes / (w.shape[0] * w.shape[1])
    return w.nbytes / (w.shape[0] * w.shape[1])


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("layout", ["file", "packed"])
@pytest.mark.parametrize("regime", ["L2", "L3", "DRAM"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_gemv(benchmark, mats, variant, regime, layout, threads, bandwidth, stream_buf, numpy_gws,
              results):
    fmt = mats["fmt"]
    if layout not in mats[regime]:
        pytest.skip(f"{fmt} is not repacked")
    if variant == "scalar" and regime == "DRAM":
        pytest.skip("scalar streaming 512 MB takes seconds per call")
    ws = mats[regime][layout]
    x = np.random.default_rng(1).standard_normal(COLS, dtype=np.float32)
    outs = [np.empty(w.shape[0], np.float32) for w in ws]
    before = lb.isa_active()
    lb.set_isa(variant)
    try:
        def run():
            for w, y in zip(ws, outs):
                w.gemv(x, out=y, threads=threads)

        rounds = 3 if regime == "DRAM" or variant == "scalar" else 30
        benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=1)
        if regime == "DRAM":
            sec, bw = _time_with_bandwidth(run, rounds, threads, stream_buf)
        else:
            sec = _time_min(run, rounds, threads)  # also works with --benchmark-disable
            bw = bandwidth[threads]
    finally:
        lb.set_isa(before)
    nw = sum(w.shape[0] * w.shape[1] for w in ws)
    gws = nw / sec / 1e9
    bpw = _bytes_per_weight(ws[0], layout)
    roof = bw / bpw / 1e9
    rec = {"kind": "gemv", "fmt": fmt, "variant": variant, "layout": layout, "threads": threads,
           "regime": regime, "gws": gws, "bpw": 8 * bpw, "bw_gbps": bw / 1e9, "roofline_pct": 100 * gws / roof,
           "vs_numpy": gws * 1e9 / numpy_gws}
    results.append(rec)
    benchmark.extra_info.update({k: v for k, v in rec.items() if k != "kind"})


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("layout", ["file", "packed"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_gemm_batch64(benchmark, mats, variant, layout, threads, results):
    fmt = mats["fmt"]
    if layout not in mats["L3"]:
        pytest.skip(f"{fmt} is not repacked")
    w = mats["L3"][layout][0]
    if variant == "scalar":
        w = mats["L2"][layout][0]  # the scalar loop would take seconds on the L3 shape
    x = np.random.default_rng(2).standard_normal((64, COLS), dtype=np.float32)
    y = np.empty((64, w.shape[0]), np.float32)
    before = lb.isa_active()
    lb.set_isa(variant)
    try:
        run = lambda: w.gemm(x, out=y, threads=threads)  # noqa: E731
        benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
        sec = _time_min(run, 3, threads)
    finally:
        lb.set_isa(before)
    gmacs = w.shape[0] * w.shape[1] * 64 / sec / 1e9
    rec = {"kind": "gemm", "fmt": fmt, "variant": variant, "layout": layout, "threads": threads,
           "batch": 64, "gmacs": gmacs}
    results.append(rec)
    benchmark.extra_info.update({k: v for k, v in rec.items() if k != "kind"})


@pytest.mark.parametrize("fmt", sorted(PACKED))
def test_repack(benchmark, fmt, results):
    w = _quantized(fmt, ROWS, COLS)
    benchmark.pedantic(lambda: w.pack(threads=1), rounds=3, iterations=1)
    sec = _time_min(lambda: w.pack(threads=1), 3, 1)
    p = w.pack()
    results.append({"kind": "pack", "fmt": fmt, "ms": sec * 1e3, "mbps": w.nbytes / sec / 1e6,
                    "file_mb": w.nbytes / 1e6, "packed_mb": p.packed_nbytes / 1e6})


def test_numpy_float32_gemv(benchmark, numpy_gws, bandwidth, results):
    """The yardstick itself, as a row of the table (float32: 4 bytes per weight)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    x = rng.standard_normal(COLS, dtype=np.float32)
    benchmark.pedantic(lambda: w @ x, rounds=20, iterations=1)
    gws = numpy_gws / 1e9
    results.append({"kind": "gemv", "fmt": "f32/np", "variant": "openblas", "layout": "file",
                    "threads": 0, "regime": "L3", "gws": gws, "bpw": 32.0,
                    "roofline_pct": 100 * gws / (bandwidth[max(THREADS)] / 4 / 1e9),
                    "vs_numpy": 1.0})
