"""What `pylowbit bench` measures of the machine beside the engines: the read bandwidth (the
roofline's denominator), the process's peak resident memory, and the memory available."""
from __future__ import annotations

import sys
import time

import numpy as np

from pylowbit import _platform


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


def reset_peak_rss() -> None:
    try:  # Linux: writing 5 to clear_refs resets VmHWM to the current RSS
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss() -> int:
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



def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None

