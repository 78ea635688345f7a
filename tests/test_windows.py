"""The Python side's Windows paths, forced on the machine the tests run on (_platform.WINDOWS): the
atomic writer without O_TMPFILE, linkat or file modes, closing its temporary file before the
rename; a mapped file never replaced and a closed GGUFFile releasing its mapping; the lock file
taken with msvcrt.locking (a stand-in built on flock, with the retries of LK_LOCK); the CPUs a
process may use; the tokenizer's heap release, which names no C library there.  The C library's
Windows build is tested by .ci/windows.sh (mingw-w64, under wine64)."""
import ctypes
import gc
import os
import sys
import threading
import time
import types

import numpy as np
import pytest

from pylowbit import _platform, bench_machine, bench_models, gguf
from pylowbit.gguf import GGUFError, TensorSpec, type_id, write_gguf

LINUX_PROC = os.path.isdir("/proc/self/fd")


@pytest.fixture
def windows(monkeypatch):
    monkeypatch.setattr(_platform, "WINDOWS", True)


def open_fds_of(path) -> list[str]:
    """This process's file descriptors open on `path` (Linux /proc)."""
    target, found = os.path.realpath(path), []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                found.append(fd)
        except OSError:
            pass
    return found


def mapped_in_process(path) -> bool:
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(os.path.realpath(path)) for line in f)


def small_gguf(path, value=1.0):
    data = np.full(8, value, np.float32)
    return write_gguf(path, {"general.architecture": "test"}, [TensorSpec("t", type_id("f32"), (8,), data)])


# ---- the atomic writer ------------------------------------------------------------------------

def test_atomic_file_takes_a_named_temp_and_closes_it_before_the_rename(tmp_path, windows, monkeypatch):
    flags_seen, replaced = [], []
    real_open, real_replace = os.open, os.replace

    def spy_open(path, flags, *a, **k):
        flags_seen.append(flags)
        return real_open(path, flags, *a, **k)

    def checked_replace(src, dst):
        if LINUX_PROC:
            assert open_fds_of(src) == [], "the temporary file is still open at the rename"
        replaced.append((os.path.basename(src), os.path.basename(dst)))
        return real_replace(src, dst)

    def no_fchmod(*a):
        raise AssertionError("os.fchmod called (Windows before Python 3.13 has none)")

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "replace", checked_replace)
    monkeypatch.setattr(os, "fchmod", no_fchmod)
    p = tmp_path / "out.bin"
    for body in (b"first", b"second, over the first"):
        with gguf.atomic_file(p) as f:
            f.write(body)
        assert p.read_bytes() == body
        assert sorted(x.name for x in tmp_path.iterdir()) == ["out.bin"]
    o_tmpfile = getattr(os, "O_TMPFILE", 0)
    assert o_tmpfile == 0 or not any(fl & o_tmpfile == o_tmpfile for fl in flags_seen)
    assert [dst for _, dst in replaced] == ["out.bin", "out.bin"]
    assert all(src.startswith(".pylowbit-") and src.endswith(".tmp") for src, _ in replaced)


def test_atomic_file_failure_leaves_nothing(tmp_path, windows):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="body failed"):
        with gguf.atomic_file(p) as f:
            f.write(b"partial")
            raise RuntimeError("body failed")
    assert p.read_bytes() == b"old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.bin"]


def test_a_file_in_use_elsewhere_is_a_clear_error(tmp_path, windows, monkeypatch):
    """Windows refuses to rename over a file another program has open (PermissionError): said as
    such, the old file kept, the temporary file removed."""
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")

    def in_use(src, dst):
        raise PermissionError(13, "The process cannot access the file because it is being used "
                                  "by another process", str(dst))

    monkeypatch.setattr(os, "replace", in_use)
    with pytest.raises(GGUFError, match=r"cannot replace .*out\.bin.*close it and retry"):
        with gguf.atomic_file(p) as f:
            f.write(b"new")
    assert p.read_bytes() == b"old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.bin"]


def test_off_windows_a_permission_error_stays_one(tmp_path, monkeypatch):
    monkeypatch.setattr(_platform, "WINDOWS", False)
    monkeypatch.setattr(gguf.files, "_open_anonymous", lambda d: __import__("tempfile").mkstemp(dir=d))

    def denied(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError):
        with gguf.atomic_file(tmp_path / "out.bin") as f:
            f.write(b"x")
    assert list(tmp_path.iterdir()) == []


# ---- mapped files ------------------------------------------------------------------------------

def test_a_mapped_file_is_not_replaced(tmp_path, windows):
    p = small_gguf(tmp_path / "m.gguf", 1.0)
    before = p.read_bytes()
    f = gguf.GGUFFile(p)
    assert gguf.is_mapped(p) and gguf.is_mapped(tmp_path / "." / "m.gguf")
    with pytest.raises(GGUFError, match="mapped"):
        small_gguf(p, 2.0)
    assert p.read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.gguf"]
    f.close()
    assert not gguf.is_mapped(p)
    small_gguf(p, 2.0)  # closed: replaced
    with gguf.GGUFFile(p) as g:
        assert np.frombuffer(g.tensors["t"].data, np.float32)[0] == 2.0


def test_views_keep_the_mapping_and_so_the_refusal(tmp_path, windows):
    """close() with a tensor's array still alive cannot unmap (the array reads the mapping): the
    file stays mapped, and unreplaceable, until the array goes."""
    p = small_gguf(tmp_path / "m.gguf", 1.0)
    f = gguf.GGUFFile(p)
    view = f.tensors["t"].data
    f.close()
    assert gguf.is_mapped(p)
    with pytest.raises(GGUFError, match="mapped"):
        small_gguf(p, 2.0)
    assert np.frombuffer(view, np.float32)[0] == 1.0  # still readable
    del view
    gc.collect()
    assert not gguf.is_mapped(p)
    small_gguf(p, 2.0)


def test_a_link_to_a_mapped_file_is_the_same_file(tmp_path, windows):
    p = small_gguf(tmp_path / "m.gguf")
    link = tmp_path / "link.gguf"
    try:
        link.symlink_to(p)
    except OSError:
        pytest.skip("no symbolic links here")
    with gguf.GGUFFile(link):
        assert gguf.is_mapped(p)
        with pytest.raises(GGUFError, match="mapped"):
            small_gguf(p, 3.0)


@pytest.mark.skipif(not LINUX_PROC, reason="reads /proc/self/fd and /proc/self/maps")
def test_close_releases_the_mapping_and_every_handle(tmp_path):
    """close() without live views leaves neither the mapping nor a descriptor of the file in the
    process (either would block a replace on Windows)."""
    p = small_gguf(tmp_path / "m.gguf")
    f = gguf.GGUFFile(p)
    assert mapped_in_process(p)
    assert len(open_fds_of(p)) <= 1  # at most the mapping's own (CPython's mmap keeps one)
    f.close()
    f.close()  # twice is fine
    assert not mapped_in_process(p) and open_fds_of(p) == []


# ---- the lock file -----------------------------------------------------------------------------

@pytest.fixture
def fake_msvcrt(monkeypatch):
    """msvcrt.locking on flock: LK_LOCK tries for a while and raises OSError (as Windows' gives up
    after 10 tries a second apart), LK_UNLCK releases."""
    import fcntl

    calls = []

    def locking(fd, mode, nbytes):
        assert nbytes == 1 and os.lseek(fd, 0, os.SEEK_CUR) == 0, "locks byte 0"
        calls.append(mode)
        if mode == m.LK_UNLCK:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
        for _ in range(5):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.02)
        raise OSError(36, "Resource deadlock avoided")

    m = types.SimpleNamespace(LK_LOCK=1, LK_UNLCK=0, locking=locking, calls=calls)
    monkeypatch.setitem(sys.modules, "msvcrt", m)
    return m


def test_windows_lock_excludes_waits_through_retries_and_keeps_its_file(tmp_path, windows, fake_msvcrt):
    target = tmp_path / "model.gguf"
    order = []

    def second():
        with _platform.exclusive_lock(target):
            order.append("second")

    with _platform.exclusive_lock(target):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.4)  # several LK_LOCK give-ups
        order.append("first done")
    t.join(timeout=30)
    assert order == ["first done", "second"]
    assert fake_msvcrt.calls.count(0) == 2  # each holder unlocked
    assert fake_msvcrt.calls.count(1) > 2  # the waiter retried after OSError
    assert [p.name for p in tmp_path.iterdir()] == [".model.gguf.lock"]  # never unlinked


def test_synthetic_model_writes_once_under_the_windows_lock(tmp_path, windows, fake_msvcrt, monkeypatch):
    from pylowbit.model import synthetic as S

    monkeypatch.setenv("PYLOWBIT_CACHE", str(tmp_path))
    written = []

    def fake_write(path, **kw):
        written.append(path)
        with gguf.atomic_file(path) as f:
            f.write(b"synthetic")

    monkeypatch.setattr(S, "write_synthetic_model", fake_write)
    monkeypatch.setattr(bench_models, "ensure_disk_space", lambda files: None)
    paths = [bench_models.synthetic_model("qwen35-tiny", "q2_0") for _ in range(2)]
    assert paths[0] == paths[1] and paths[0].read_bytes() == b"synthetic"
    assert len(written) == 1


# ---- CPUs, heap, peak memory ------------------------------------------------------------------

def test_usable_cpus_prefers_the_affinity_mask(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert _platform.usable_cpus() == 2
    monkeypatch.setattr(os, "process_cpu_count", lambda: 5, raising=False)
    assert _platform.usable_cpus() == 5


def test_usable_cpus_without_an_affinity_call(monkeypatch):
    """Windows before Python 3.13: neither process_cpu_count nor sched_getaffinity."""
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert _platform.usable_cpus() == 12
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert _platform.usable_cpus() == 1


def test_heap_release_names_no_c_library_on_windows(windows, monkeypatch):
    from pylowbit.model import tokenizer

    def windows_cdll(name, *a, **k):
        if name is None:
            raise TypeError("LoadLibrary() argument 1 must be str, not None")
        return real(name, *a, **k)

    real = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", windows_cdll)
    tokenizer._release_heap()  # no error


def test_peak_rss_on_windows_asks_windows(windows, monkeypatch):
    real_open = open

    def no_proc(path, *a, **k):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_proc)
    monkeypatch.setitem(sys.modules, "resource", None)  # Windows has no resource module
    monkeypatch.setattr(_platform, "windows_peak_working_set", lambda: 123 << 20)
    assert bench_machine.peak_rss() == 123 << 20
