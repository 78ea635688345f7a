"""pytest-benchmark suites of pylowbit's kernels: `pytest bench/ --benchmark-only`.

The repository's pytest configuration collects tests/ only (testpaths), so a plain `pytest` never
runs these.  Files here are named bench_*.py; this conftest makes pytest collect them when bench/
is named on the command line.  Every benchmark also records its numbers (weights/s, % of the
bandwidth roofline, ratio to numpy) in RESULTS, printed as one table at the end of the run.
"""
import pytest

RESULTS: list[dict] = []


def pytest_collect_file(file_path, parent):
    # (a file named on the command line is collected by pytest itself)
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def _cell(r: dict, key: str, width: int, digits: int) -> str:
    """r[key] in a column of `width` with `digits` decimals, or "-" when it was not measured."""
    v = r.get(key)
    return "-".rjust(width) if v is None else f"{v:{width}.{digits}f}"


def _table(tr, kind: str, header: str, line) -> None:
    """The RESULTS of one kind, after a blank line and a header (nothing if there are none)."""
    rows = [r for r in RESULTS if r.get("kind") == kind]
    if rows:
        tr.write_line("")
        tr.write_line(header)
        for r in rows:
            tr.write_line(line(r))


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("pylowbit kernel summary (G weights/s; roofline = read bandwidth / bytes per weight;"
               " DRAM rows: bandwidth re-measured next to each, same clock)")
    for r in RESULTS:
        if r.get("kind") == "bandwidth":
            tr.write_line(f"read bandwidth, {r['threads']} thread(s): {r['gbps']:.1f} GB/s")
    tr.write_line("")
    tr.write_line(f"{'format':8} {'variant':7} {'layout':6} {'thr':>3} {'regime':6} "
                  f"{'Gw/s':>7} {'bits/w':>6} {'GB/s':>5} {'%roof':>6} {'x numpy':>7}")
    for r in RESULTS:
        if r.get("kind") != "gemv":
            continue
        tr.write_line(f"{r['fmt']:8} {r['variant']:7} {r['layout']:6} {r['threads']:>3} "
                      f"{r['regime']:6} {r['gws']:7.2f} {r['bpw']:6.3f} {_cell(r, 'bw_gbps', 5, 1)} "
                      f"{_cell(r, 'roofline_pct', 6, 1)} {_cell(r, 'vs_numpy', 7, 2)}")
    _table(tr, "gemm", f"{'format':8} {'variant':7} {'layout':6} {'thr':>3} GEMM batch   GMAC/s",
           lambda r: f"{r['fmt']:8} {r['variant']:7} {r['layout']:6} {r['threads']:>3} "
                     f"{r['batch']:>10} {r['gmacs']:8.2f}")
    _table(tr, "pack", f"{'format':8} repack of 6912x2560: ms   MB/s of file   file MB   packed MB",
           lambda r: f"{r['fmt']:8} {r['ms']:26.1f} {r['mbps']:14.0f} {r['file_mb']:9.2f} {r['packed_mb']:11.2f}")


@pytest.fixture(scope="session")
def results():
    return RESULTS
