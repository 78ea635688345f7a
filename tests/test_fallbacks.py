"""The Python side's Linux-only calls, each forced onto the fallback macOS and other systems take:
no /proc (the O_TMPFILE link and the peak-RSS reading), no transparent huge pages, no anonymous
mmap.  The O_TMPFILE-less writer is tested in test_gguf.py; the C library's fallbacks (sysfs,
sched_getaffinity, getauxval, madvise) by native/tests/test_threads.c in a LOWBIT_PORTABLE build."""
import builtins
import ctypes
import mmap
import os

import numpy as np
import pytest

from pylowbit import bench_machine, gguf


@pytest.fixture
def no_proc(monkeypatch):
    """/proc absent: opening or linking anything under it fails as it would on macOS."""
    real_open, real_link = builtins.open, os.link

    def is_proc(path):
        return os.fsdecode(path).startswith("/proc/")

    def fake_open(path, *a, **k):
        if isinstance(path, (str, bytes, os.PathLike)) and is_proc(path):
            raise FileNotFoundError(2, "No such file or directory", os.fsdecode(path))
        return real_open(path, *a, **k)

    def fake_link(src, dst, *a, **k):
        if is_proc(src):
            raise FileNotFoundError(2, "No such file or directory", os.fsdecode(src))
        return real_link(src, dst, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "link", fake_link)


def test_atomic_file_without_proc(tmp_path, no_proc, monkeypatch):
    """No /proc/self/fd link: linkat(AT_EMPTY_PATH) where allowed, else a named temporary file;
    either way the file appears whole and nothing else is left."""
    linkat_calls = []
    real_cdll = ctypes.CDLL

    class CountingLibc:
        def __init__(self, *a, **k):
            self._lib = real_cdll(*a, **k)

        def linkat(self, *args):
            linkat_calls.append(args)
            return self._lib.linkat(*args)

    monkeypatch.setattr(ctypes, "CDLL", CountingLibc)
    p = tmp_path / "out.bin"
    with gguf.atomic_file(p) as f:
        f.write(b"whole")
    assert p.read_bytes() == b"whole"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.bin"]
    if hasattr(os, "O_TMPFILE"):
        assert linkat_calls, "the /proc-less path (linkat) was not taken"
    with gguf.atomic_file(p) as f:  # replacing an existing file
        f.write(b"again")
    assert p.read_bytes() == b"again" and sorted(x.name for x in tmp_path.iterdir()) == ["out.bin"]


def test_atomic_file_without_proc_or_linkat(tmp_path, no_proc, monkeypatch):
    """Neither link works (an unprivileged user without /proc): a named temporary file, renamed."""

    class NoLinkat:
        def __init__(self, *a, **k):
            pass

        def linkat(self, *args):
            return -1

    monkeypatch.setattr(ctypes, "CDLL", NoLinkat)
    p = tmp_path / "out.bin"
    with gguf.atomic_file(p) as f:
        f.write(b"named")
    assert p.read_bytes() == b"named" and sorted(x.name for x in tmp_path.iterdir()) == ["out.bin"]


def test_peak_rss_without_proc(no_proc):
    bench_machine.reset_peak_rss()  # no clear_refs: a no-op, not an error
    block = np.ones(32 << 20, np.uint8)  # 32 MiB touched: the peak is at least that
    peak = bench_machine.peak_rss()
    assert peak >= block.nbytes


def test_probe_buffer_without_huge_pages(monkeypatch):
    monkeypatch.delattr(mmap, "MADV_HUGEPAGE", raising=False)
    buf = bench_machine.probe_buffer(1 << 20)
    assert buf.nbytes == 1 << 20 and int(buf.sum()) == 1 << 20


def test_probe_buffer_without_anonymous_mmap(monkeypatch):
    def refuse(*a, **k):
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    buf = bench_machine.probe_buffer(4096)
    assert buf.nbytes == 4096 and int(buf.sum()) == 4096
