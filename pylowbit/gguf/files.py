"""Files that appear only complete (`atomic_file`: an anonymous or temporary file put in place in one
step) and the free-space check made before writing one."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from pylowbit import _platform
from pylowbit.gguf.reader import is_mapped
from pylowbit.gguf.types import GGUFError

class DiskSpaceError(OSError):
    """Not enough free disk space for a file about to be written (nothing was written)."""



def _link_fd(fd: int, path: str) -> None:
    """Give an O_TMPFILE file a name (fails if `path` exists): linkat through /proc (ordinary users),
    or AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH; the only way on some sandboxed kernels)."""
    try:
        os.link(f"/proc/self/fd/{fd}", path, follow_symlinks=True)
        return
    except FileExistsError:
        raise
    except OSError as e:
        first = e
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, at_empty_path = -100, 0x1000
    if libc.linkat(fd, b"", at_fdcwd, os.fsencode(path), at_empty_path) != 0:
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(err, os.strerror(err), path)
        raise first


def _open_anonymous(directory: Path) -> tuple[int, str | None]:
    """(fd, None) for an unnamed file in `directory` (Linux O_TMPFILE: it vanishes with the process),
    after checking that such a file can be linked in there; else (fd, path) of a named temp file."""
    flag = 0 if _platform.WINDOWS else getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            probe = os.open(directory, flag | os.O_WRONLY, 0o600)
            try:
                name = tempfile.mktemp(prefix=".pylowbit-probe-", dir=directory)
                _link_fd(probe, name)
                os.unlink(name)
            finally:
                os.close(probe)
            return os.open(directory, flag | os.O_WRONLY, 0o666), None
        except (OSError, AttributeError):
            pass  # no O_TMPFILE here (or no way to link it): a named temporary file
    return tempfile.mkstemp(prefix=".pylowbit-", suffix=".tmp", dir=directory)


@contextmanager
def atomic_file(path: str | os.PathLike):
    """Open `path` for writing so that it appears only complete: the body writes to the yielded
    binary file; on success it is fsynced and put in place in one step, on any exception (or a
    SIGKILL) nothing is left - not the output, not a temporary file (O_TMPFILE + linkat where the
    kernel has it; elsewhere mkstemp + rename, which a SIGKILL can leave behind as .pylowbit-*.tmp).
    Windows cannot replace a file that is mapped or open: a file this process has mapped is refused
    before anything is written, one open elsewhere when the rename fails (GGUFError either way)."""
    path = Path(path)
    directory = path.parent
    if _platform.WINDOWS and path.exists() and is_mapped(path):
        raise GGUFError(f"cannot replace {path}: this process has it mapped (an open GGUFFile or a model "
                        "loaded from it, or arrays still viewing one closed); Windows does not replace a "
                        "mapped file: close it first")
    fd, tmp = _open_anonymous(directory)
    try:
        with os.fdopen(fd, "wb", closefd=False) as fh:
            yield fh
            fh.flush()
        if not _platform.WINDOWS:  # (Windows has no modes: mkstemp's file is an ordinary one)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # ordinary permissions (mkstemp makes 0600)
        os.fsync(fd)
        if tmp is None:
            try:
                _link_fd(fd, str(path))  # a new file: linked straight into place
            except FileExistsError:
                # linkat cannot replace: link under a temporary name, then rename over the old file
                tmp = tempfile.mktemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
                _link_fd(fd, tmp)
        if tmp is not None:
            os.close(fd)  # Windows renames no open file
            fd = -1
            _replace(tmp, path)
            tmp = None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _replace(tmp: str, path: Path) -> None:
    """os.replace, with Windows' refusal to replace a file in use said as such."""
    try:
        os.replace(tmp, path)
    except PermissionError as e:
        if not _platform.WINDOWS:
            raise
        raise GGUFError(f"cannot replace {path}: {e.strerror} (on Windows, a file open or mapped by "
                        "a program - this one or another - cannot be replaced: close it and retry)") from None


def check_disk_space(directory: str | os.PathLike, nbytes: int, what: str) -> None:
    """DiskSpaceError naming the need and what is free unless `directory`'s file system has nbytes
    free (a full disk found mid-write would cost the time of writing and leave the disk full)."""
    free = shutil.disk_usage(directory).free
    if free < nbytes:
        raise DiskSpaceError(f"not enough disk space for {what}: it needs {nbytes / 1e9:.2f} GB, "
                             f"{free / 1e9:.2f} GB are free in {directory}")
