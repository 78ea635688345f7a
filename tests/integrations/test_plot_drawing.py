"""pylowbit.plot drawing with matplotlib: `pylowbit bench --plot` writes a real picture of its run,
`python -m pylowbit.plot` draws a saved --json, and the picture's notes are the results' numbers."""
import json
import struct

import matplotlib  # noqa: F401  (the extra under test: missing is a failure, not a skip)
import pytest

from pylowbit.plot import PlotError, main, plot, plot_data

from test_bench_cli import assert_one_line_error, bench
from test_plot import results


def png_size(path):
    """(width, height) from a PNG's header; fails unless the file is a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", head
    return struct.unpack(">II", head[16:24])


def test_bench_plot_draws_the_run_it_prints(tmp_path):
    out, cache = tmp_path / "bench.png", tmp_path / "cache"
    r = bench("--preset", "tiny", "--type", "tq2_0,i2_s", "-t", "1,2", "-p", "8", "-n", "2", "-r", "2",
              "--json", "--plot", str(out), env={"PYLOWBIT_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr
    w, h = png_size(out)
    assert w > 600 and h > 300 and out.stat().st_size > 20_000
    panels = plot_data(json.loads(r.stdout))  # what the picture drew: the printed rows
    assert [p.test for p in panels] == ["tg2", "pp8"] and len(panels[0].bars) == 4
    assert len(panels[0].rooflines) == 4


def test_saved_json_drawn_with_its_numbers(tmp_path):
    """An SVG keeps its text: the roofline shares and llama.cpp ratios written on the bars are
    the results'."""
    d = results(vs_llama=True)
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(d))
    assert main([str(saved), str(tmp_path / "r.png"), "--title", "made-up run"]) == 0
    png_size(tmp_path / "r.png")
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plot(d, tmp_path / "r.svg", machine="Made-up CPU, avx2")
    svg = (tmp_path / "r.svg").read_text()
    assert "Made-up CPU, avx2" in svg
    for share in ("25%", "50%", "12%"):  # tq2_0 / tq1_0 on 1 and 2 threads
        assert f">{share}" in svg or f"{share}<" in svg
    assert "1.25x" in svg and "m tq1_0" in svg and "2 threads" in svg


@pytest.mark.parametrize("name, needle", [("out.txt2", "give a file name ending in one of"),
                                          ("nodir/out.png", "no directory")])
def test_unwritable_targets_are_refused_before_drawing(tmp_path, name, needle):
    with pytest.raises(PlotError, match=needle):
        plot(results(), tmp_path / name)


def test_bench_refuses_a_bad_picture_name_before_measuring(tmp_path):
    r = bench("--preset", "tiny", "--plot", str(tmp_path / "b.bmpx"),
              env={"PYLOWBIT_CACHE": str(tmp_path / "cache")})
    assert_one_line_error(r, "give a file name ending in one of", ".png")
    assert not (tmp_path / "cache").exists()
