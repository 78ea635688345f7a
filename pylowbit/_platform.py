"""What differs on Windows, in one place: the CPUs a process may use, an exclusive file lock, the
peak memory of the process.

`WINDOWS` is read at each call (never copied at import), so that a test on Linux sets it to take
the Windows paths: here, and in gguf.atomic_file (no O_TMPFILE, a mapped file cannot be replaced)
and the tokenizer's heap release.  The Windows facts the code relies on:
  - a file open in another handle, or mapped, cannot be renamed over or deleted (Python opens
    files without FILE_SHARE_DELETE), so a lock file is never unlinked and a temporary file is
    closed before os.replace;
  - there is no fcntl: msvcrt.locking locks a byte range, retrying for ~10 s before OSError.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

WINDOWS = os.name == "nt"


def cache_dir() -> Path:
    """pylowbit's cache directory: $PYLOWBIT_CACHE, else pylowbit under $XDG_CACHE_HOME or ~/.cache
    (the synthetic models, the tokenizer's derived tables)."""
    base = os.environ.get("PYLOWBIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pylowbit")
    return Path(base)


def usable_cpus() -> int:
    """The logical CPUs this process may run on: its affinity mask where Python can read it
    (os.process_cpu_count, Python 3.13+ everywhere; sched_getaffinity on Linux), else all."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        return count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


@contextmanager
def exclusive_lock(path: Path):
    """An exclusive lock named after `path`, for one process at a time (others wait), released
    when the block ends or the process dies."""
    name = path.parent / f".{path.name}.lock"
    if WINDOWS:
        with _windows_lock(name):
            yield
    else:
        with _posix_lock(name):
            yield


@contextmanager
def _posix_lock(name: Path):
    """flock on the lock file, which is removed when released.  A waiter that wakes on a lock file
    already unlinked by its holder opens the new one: the inode check makes sure the lock held is
    the one at the name."""
    import fcntl

    while True:
        fh = open(name, "a")
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if os.fstat(fh.fileno()).st_ino == os.stat(name).st_ino:
                break
        except FileNotFoundError:
            pass
        fh.close()
    try:
        yield
    finally:
        try:
            os.unlink(name)
        finally:
            fh.close()


@contextmanager
def _windows_lock(name: Path):
    """msvcrt.locking of the lock file's first byte (a range past the end may be locked).  The
    file stays: deleting it under a waiter that has it open would fail, and a kept file is harmless."""
    import msvcrt

    fh = open(name, "a+b")
    try:
        while True:
            fh.seek(0)
            try:
                msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                break
            except OSError:  # LK_LOCK gave up after its retries: the holder is still at work
                continue
        try:
            yield
        finally:
            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
    finally:
        fh.close()


def windows_peak_working_set() -> int:
    """The process's peak working set in bytes (psapi's GetProcessMemoryInfo), Windows' peak RSS;
    0 if Windows does not say."""
    import ctypes
    from ctypes import wintypes

    class Counters(ctypes.Structure):  # PROCESS_MEMORY_COUNTERS
        _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD)] + [
            (name, ctypes.c_size_t) for name in (
                "PeakWorkingSetSize", "WorkingSetSize", "QuotaPeakPagedPoolUsage", "QuotaPagedPoolUsage",
                "QuotaPeakNonPagedPoolUsage", "QuotaNonPagedPoolUsage", "PagefileUsage", "PeakPagefileUsage")]

    c = Counters()
    c.cb = ctypes.sizeof(c)
    try:
        kernel32 = ctypes.WinDLL("kernel32")
        kernel32.GetCurrentProcess.restype = wintypes.HANDLE
        psapi = ctypes.WinDLL("psapi")
        ok = psapi.GetProcessMemoryInfo(wintypes.HANDLE(kernel32.GetCurrentProcess()), ctypes.byref(c), c.cb)
    except (OSError, AttributeError):
        return 0
    return int(c.PeakWorkingSetSize) if ok else 0
