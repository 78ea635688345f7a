"""One TQ2_0 GEMV (2560 x 6912, batch 1) through each runtime, side by side in one run, as a
ratio to the numpy API's speed:

    python bench/bench_runtimes.py [--shape 2560x6912] [--rounds 15] [--calls 30] [--threads 1]

  numpy API      QTensor.gemv(x, out=y) on numpy arrays (the reference)
  jax (jit)      a jax.jit function calling pylowbit.jax.gemv (the XLA FFI custom call), on
                 device arrays, block_until_ready after each call
  numba (njit)   an @njit function calling pylowbit.numba.gemv
  torch          QTensor.gemv(x, out=y) with torch tensors x and y (read and written in place)
  torch Linear   a pylowbit.torch.Linear over those bytes called on a torch tensor (torch's
                 thread count set to the kernel's, which the layer follows)

Each path computes the same product on the same file-layout bytes, at one address (the outputs are
checked equal bit for bit first).  Rounds are interleaved (numpy, jax, numba, torch, numpy, ...); a round times
`calls` calls, both in wall time and in the process's CPU time (all its threads, XLA's included:
robust to other processes on a shared machine), and the best round per path and clock is kept.
One kernel thread by default, so that the CPU time is the work of one call.  Not collected by
pytest.
"""
import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numba
import numpy as np
import torch

import pylowbit as lb
import pylowbit.jax as lbj
import pylowbit.torch as pt
import pylowbit.numba as lbn


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="2560x6912", help="rows x cols of the weight matrix")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1, help="kernel threads; 0: the library default")
    a = ap.parse_args()
    rows, cols = (int(v) for v in a.shape.split("x"))
    rng = np.random.default_rng(0)
    w = lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), "tq2_0")
    # Every path reads the same bytes: the JAX device buffer, which numpy views in place (a copy
    # per path would put them at different addresses, with different cache and page luck).
    wj = lbj.weights(w)
    w = lb.QTensor(np.asarray(wj.data), "tq2_0", (rows, cols))
    assert w.data.ctypes.data == wj.data.unsafe_buffer_pointer()
    x = rng.standard_normal(cols).astype(np.float32)
    y = np.empty(rows, np.float32)
    threads = a.threads or None

    def run_numpy():
        w.gemv(x, out=y, threads=threads)

    xj = jnp.asarray(x)
    f_jax = jax.jit(lambda w, x: lbj.gemv(w, x, threads=a.threads))

    def run_jax():
        f_jax(wj, xj).block_until_ready()

    data, t, r, c = lbn.weights(w)
    yn = np.empty(rows, np.float32)
    nt = a.threads

    @numba.njit
    def nb_gemv(data, x, y):
        lbn.gemv(data, t, r, c, x, y, nt)

    def run_numba():
        nb_gemv(data, x, yn)

    xt, yt = torch.from_numpy(x.copy()), torch.empty(rows)

    def run_torch():
        w.gemv(xt, out=yt, threads=threads)

    torch.set_num_threads(a.threads or lb.get_threads())
    layer = pt.Linear.from_gguf(w)
    layer.weight = torch.from_dlpack(wj.data)  # the same bytes as every other path, not a copy
    assert layer.weight.data_ptr() == w.data.ctypes.data
    out = {}

    def run_torch_linear():
        out["y"] = layer(xt)  # x needs no gradient: the layer's eager path, no dispatcher

    paths = {"numpy API": run_numpy, "jax (jit)": run_jax, "numba (njit)": run_numba,
             "torch": run_torch, "torch Linear": run_torch_linear}
    for run in paths.values():  # compile, warm up
        run()
    ref = y.copy()
    for name, got in (("jax", np.asarray(f_jax(wj, xj))), ("numba", yn), ("torch", yt.numpy()),
                      ("torch Linear", out["y"].numpy())):
        if not np.array_equal(got, ref):
            raise SystemExit(f"{name}'s result differs from the numpy API's")

    wall = {k: float("inf") for k in paths}
    cpu = dict(wall)
    for _ in range(a.rounds):
        for name, run in paths.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(a.calls):
                run()
            wall[name] = min(wall[name], (time.perf_counter() - t0) / a.calls)
            cpu[name] = min(cpu[name], (time.process_time() - c0) / a.calls)

    print(f"TQ2_0 GEMV {rows}x{cols}, batch 1; {cpu_name()}; ISA {lb.isa_active()}, "
          f"threads {a.threads or lb.get_threads()}; best of {a.rounds} rounds x {a.calls} calls")
    print(f"jax {jax.__version__}, numba {numba.__version__}, torch {torch.__version__}, "
          f"numpy {np.__version__}")
    print(f"{'path':14s} {'wall us':>9s} {'vs numpy':>9s} {'CPU us':>9s} {'vs numpy':>9s}")
    for name in paths:
        print(f"{name:14s} {wall[name] * 1e6:9.1f} {wall['numpy API'] / wall[name]:9.1%} "
              f"{cpu[name] * 1e6:9.1f} {cpu['numpy API'] / cpu[name]:9.1%}")


if __name__ == "__main__":
    main()
