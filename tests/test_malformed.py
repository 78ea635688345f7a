"""The malformed-input table: each row is an input pylowbit must refuse, the exception it must raise
and a regular expression its message must match.  The parametrization below IS the table;
docs/MALFORMED.md is rendered from it (`python tests/test_malformed.py > docs/MALFORMED.md`) and
test_doc_is_in_sync keeps the two equal.

File rows are loaded the way `pylowbit run` loads a model: GGUFFile -> Config -> rotation ->
weights -> tokenizer (`load`).  Each must also allocate no more than the file size + SLACK
(tracemalloc, which sees Python and numpy allocations) and finish within TIMEOUT seconds
(faulthandler kills the run otherwise); test_file_rows_under_an_address_space_limit loads them all
again in one subprocess under RLIMIT_AS, which also sees allocations made in C.
"""
from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from malformed_call_rows import Ctx  # (importing the rows fills ROWS: the file rows, then the call rows)
from malformed_inputs import QWEN35_SHAPE, ROWS, SHAPE, SLACK, TIMEOUT, Base, Row, load

FILE_ROWS = [r for r in ROWS if r.kind == "file"]
CALL_ROWS = [r for r in ROWS if r.kind == "call"]


# ---- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    from pylowbit.convert import convert
    from pylowbit.model.synthetic import write_synthetic_model

    d = tmp_path_factory.mktemp("malformed")
    p = write_synthetic_model(d / "base.gguf", arch="llama", fmt="q8_0", embed_fmt="f16", **SHAPE)
    f32 = write_synthetic_model(d / "f32.gguf", arch="llama", fmt="f32", **SHAPE)
    convert(f32, d / "rotated.gguf", "q8_0", rotate=32)  # widths 64 and 128, signs for both
    q = write_synthetic_model(d / "qwen35.gguf", arch="qwen35", fmt="q8_0", embed_fmt="f16", **QWEN35_SHAPE)
    qr = write_synthetic_model(d / "qwen35-rotated.gguf", arch="qwen35", fmt="q8_0", embed_fmt="f16",
                               rotation_block=32, **QWEN35_SHAPE)
    paths = (p, d / "rotated.gguf", q, qr)
    for path in paths:
        load(path)  # all are valid (and every lazy import is done before anything is measured)
    return tuple(Base(path) for path in paths)


def base_pair(bases, row: Row):
    """(plain, rotated) valid models of the row's architecture."""
    return bases[2:] if row.base == "qwen35" else bases[:2]


@pytest.fixture(scope="module")
def built(bases, tmp_path_factory):
    """name -> path of every file row's input."""
    d = tmp_path_factory.mktemp("rows")
    out = {}
    for i, r in enumerate(FILE_ROWS):
        out[r.name] = d / f"row{i:03d}.gguf"
        out[r.name].write_bytes(r.make(*base_pair(bases, r)))
    return out


def _peak_bytes(fn) -> tuple[int, BaseException | None]:
    """Peak traced allocation while fn runs, and what it raised."""
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    err = None
    faulthandler.dump_traceback_later(TIMEOUT, exit=True)  # a hang ends the run with a traceback
    try:
        fn()
    except Exception as e:  # returned to the caller, which checks its class
        err = e
    finally:
        faulthandler.cancel_dump_traceback_later()
        peak = tracemalloc.get_traced_memory()[1] - base
        if not was_tracing:
            tracemalloc.stop()
    return peak, err


# ---- the tests ----------------------------------------------------------------------------------------

def test_table_has_unique_names_and_valid_patterns():
    import re

    names = [r.name for r in ROWS]
    assert len(set(names)) == len(names), [n for n in names if names.count(n) > 1]
    for r in ROWS:
        re.compile(r.match)
        assert issubclass(r.exc, Exception) and r.kind in ("file", "call")


@pytest.mark.parametrize("row", FILE_ROWS, ids=[r.name for r in FILE_ROWS])
def test_malformed_file(built, row):
    path = built[row.name]
    size = path.stat().st_size
    peak, err = _peak_bytes(lambda: load(path))
    assert err is not None, f"{row.name}: loaded without an error"
    assert type(err) is row.exc, f"{row.name}: {type(err).__name__}: {err}"
    with pytest.raises(row.exc, match=row.match):
        raise err
    assert peak <= size + SLACK, f"{row.name}: allocated {peak} bytes for a {size}-byte file"


@pytest.mark.parametrize("row", CALL_ROWS, ids=[r.name for r in CALL_ROWS])
def test_malformed_call(bases, tmp_path, row):
    fn = row.make(Ctx(bases[0], tmp_path))
    with pytest.raises(row.exc, match=row.match):
        fn()


def test_the_measurements_can_fail(bases, tmp_path):
    """The allocation check sees numpy allocations, and the valid models load within the bound."""
    peak, _ = _peak_bytes(lambda: np.ones(SLACK * 4, np.uint8))
    assert peak >= SLACK * 4
    for b in bases:
        peak, err = _peak_bytes(lambda: load(b.path))
        assert err is None and peak <= len(b.bytes) + SLACK, (peak, len(b.bytes))


_WORKER = textwrap.dedent("""
    import gc, json, resource, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_malformed import load
    rows, base, limit = json.loads(sys.stdin.read())
    load(base)  # warm: imports, thread pool, allocator arenas
    np.ones(1 << 20).sum()
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + limit, vm + limit))
    try:  # the limit really binds (or this test could not fail)
        np.ones(limit // 8 + (1 << 20))
        out = {"__control__": ["allocated"]}
    except MemoryError:
        out = {"__control__": ["MemoryError"]}
    for name, path in rows:
        try:
            load(path)
            out[name] = ["loaded"]
        except BaseException as e:
            out[name] = [c.__name__ for c in type(e).__mro__] + [str(e)[:200]]
        gc.collect()  # a failed load's mappings sit in reference cycles (traceback -> frames) until collected
    print(json.dumps(out))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux")
@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""), reason="ASan reserves terabytes of address space")
def test_file_rows_under_an_address_space_limit(bases, built):
    """Every file row again, in one subprocess whose address space may grow only by the largest
    file + 256 MiB past a warmed-up load: an allocation in C sized from a corrupt field fails there
    (MemoryError, or a crash) instead of passing unseen; a hang hits the timeout."""
    limit = max(p.stat().st_size for p in built.values()) + (256 << 20)  # (64 MiB flaked once in ~10 runs)
    job = json.dumps([[[n, str(p)] for n, p in built.items()], str(bases[0].path), limit])
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
    r = subprocess.run([sys.executable, "-c", _WORKER, str(Path(__file__).parent)], input=job,
                       capture_output=True, text=True, timeout=TIMEOUT * 2, env=env, cwd=bases[0].path.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got.pop("__control__") == ["MemoryError"]
    wrong = {row.name: got.get(row.name) for row in FILE_ROWS
             if row.exc.__name__ not in (got.get(row.name) or [])}
    assert not wrong, wrong


# ---- the document -----------------------------------------------------------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "MALFORMED.md"


def render() -> str:
    out = ["# Malformed inputs and the exceptions they raise", "",
           "Generated from `tests/test_malformed.py` (the table is that test's parametrization; regenerate",
           "with `python tests/test_malformed.py > docs/MALFORMED.md`).  File rows are loaded as `pylowbit run`",
           "loads a model and must also allocate at most the file size + 1 MiB and finish in time.",
           "`GGUFError`, `ModelError` and `HadamardError` are `ValueError`s; messages are matched as",
           "regular expressions."]
    group = None
    for r in ROWS:
        if r.group != group:
            group = r.group
            out += ["", f"## {group}", "", "| Input | Built as | Raises | Message matches |", "|---|---|---|---|"]
        match = r.match.replace("|", "\\|")
        out.append(f"| {r.name} | {r.how} | `{r.exc.__name__}` | `{match}` |")
    return "\n".join(out) + "\n"


def test_doc_is_in_sync():
    if not (DOC.parent.parent / "pyproject.toml").exists():
        pytest.skip("tests/ copied out of the source tree (the installed-package run): no docs/ here")
    assert DOC.read_text() == render(), "docs/MALFORMED.md is stale: python tests/test_malformed.py > docs/MALFORMED.md"


if __name__ == "__main__":
    sys.stdout.write(render())
