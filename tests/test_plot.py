"""pylowbit.plot without matplotlib: the numbers a picture shows come from the bench results, bad
results and a missing matplotlib are one clear error, and `import pylowbit` never loads matplotlib.
The drawing itself is tested with matplotlib installed: tests/integrations/test_plot_drawing.py."""
import json
import math
import subprocess
import sys
import tempfile

import pytest

from pylowbit.benchmark import Row
import pylowbit as lb
from pylowbit.plot import INSTALL_HINT, PlotError, check_target, machine_description, main, plot_data

from test_bench_cli import assert_one_line_error, bench


def results(vs_llama=False):
    """A `pylowbit bench --json` dict of two files on 1 and 2 threads, made up."""
    rows = []
    for model, scale in (("m tq2_0", 1.0), ("m tq1_0", 0.5)):
        for t in (1, 2):
            for test, tps in (("pp8", 40.0), ("tg4", 10.0)):
                ours = dict(model=model, format=model[2:], size_bytes=1000, engine="pylowbit", threads=t,
                            test=test, tokens_per_s=tps * scale * t, stdev=0.5 * t, samples=[1.0],
                            roofline_share=0.25 * t * scale if test == "tg4" else None,
                            vs_llama_cpp=1.25 if vs_llama else None, peak_rss_bytes=1, load_s=0.1)
                rows.append(ours)
                if vs_llama:
                    rows.append(dict(ours, engine="llama.cpp", tokens_per_s=tps * scale * t / 1.25,
                                     vs_llama_cpp=None))
    info = {"bandwidth_bytes_per_s": {1: 8e9, 2: 12e9}, "bandwidth_range_bytes_per_s": {1: [7e9, 9e9], 2: [11e9, 13e9]},
            "n_prompt": 8, "n_gen": 4, "reps": 3, "bytes_per_token": {"m tq2_0": 4e8, "m tq1_0": 2e8},
            "weight_bytes_per_token": {"m tq2_0": 4e8, "m tq1_0": 2e8}}
    return {"info": info, "rows": rows}


def test_panels_hold_the_rows_and_the_measured_roofline():
    panels = plot_data(results(vs_llama=True))
    assert [p.test for p in panels] == ["tg4", "pp8"]  # generation first
    tg, pp = panels
    assert tg.generation and not pp.generation
    assert [(b.model, b.threads, b.engine) for b in tg.bars] == [
        (m, t, e) for m in ("m tq2_0", "m tq1_0") for t in (1, 2) for e in ("pylowbit", "llama.cpp")]
    ours = [b for b in tg.bars if b.engine == "pylowbit"]
    assert [b.tokens_per_s for b in ours] == [10.0, 20.0, 5.0, 10.0]
    assert [b.stdev for b in ours] == [0.5, 1.0, 0.5, 1.0]
    assert [b.roofline_share for b in ours] == [0.25, 0.5, 0.125, 0.25]
    assert all(b.vs_llama_cpp == 1.25 for b in ours)
    assert all(b.vs_llama_cpp is None for b in tg.bars if b.engine == "llama.cpp")
    # tokens/s the read bandwidth allows: bandwidth on t threads / bytes a token of that file moves
    assert tg.rooflines == {("m tq2_0", 1): 20.0, ("m tq2_0", 2): 30.0, ("m tq1_0", 1): 40.0, ("m tq1_0", 2): 60.0}
    assert pp.rooflines == {}
    assert [b.tokens_per_s for b in pp.bars if b.engine == "pylowbit"] == [40.0, 80.0, 20.0, 40.0]


def test_saved_json_and_the_run_itself_give_the_same_panels():
    """--json turns the thread-count keys into strings; benchmark.run returns Row objects."""
    d = results()
    rows = [Row(**{k: v for k, v in r.items()}) for r in d["rows"]]
    assert plot_data(json.loads(json.dumps(d))) == plot_data((rows, d["info"]))


def test_a_run_without_generation_has_no_roofline():
    d = results()
    d["rows"] = [r for r in d["rows"] if r["test"] == "pp8"]
    d["info"]["bandwidth_bytes_per_s"] = {}
    (pp,) = plot_data(d)
    assert pp.test == "pp8" and pp.rooflines == {}


def broken(change):
    d = results()
    change(d)
    return d


@pytest.mark.parametrize("bad, needle", [
    ([1, 2], "expected the dict of `pylowbit bench --json`"),
    ({"rows": []}, "expected the keys 'rows' and 'info'"),
    ({"rows": [], "info": {}}, "no rows to draw"),
    (broken(lambda d: d["rows"].__setitem__(0, "row")), "row 0 is a str"),
    (broken(lambda d: d["rows"][1].pop("tokens_per_s")), "row 1 lacks tokens_per_s"),
    (broken(lambda d: d["rows"][2].update(tokens_per_s=-1.0)), "row 2: tokens_per_s must be a number >= 0"),
    (broken(lambda d: d["rows"][2].update(tokens_per_s=math.nan)), "tokens_per_s must be a number >= 0"),
    (broken(lambda d: d["rows"][0].update(stdev="x")), "row 0: stdev must be a number"),
    (broken(lambda d: d["rows"][0].update(threads="2")), "threads must be an integer >= 1"),
    (broken(lambda d: d["rows"][0].update(model="")), "model must be a non-empty string"),
    (broken(lambda d: d["info"]["bandwidth_bytes_per_s"].pop(2)), "no entry for 2 threads"),
    (broken(lambda d: d["info"]["bytes_per_token"].pop("m tq1_0")), "bytes_per_token has no entry for 'm tq1_0'"),
    (broken(lambda d: d["info"]["bandwidth_bytes_per_s"].update({1: 0})), "bandwidth and bytes per token > 0"),
    (broken(lambda d: d["info"].update(bandwidth_bytes_per_s={"one": 1e9})), "not keyed by thread count"),
    (broken(lambda d: d.update(info=[])), "info must be a mapping"),
])
def test_malformed_results_are_one_clear_error(bad, needle):
    with pytest.raises(PlotError, match="^bench results: ") as e:
        plot_data(bad)
    assert needle in str(e.value)


BLOCK_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = sys.modules['matplotlib.figure'] = None"


def test_missing_matplotlib_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(PlotError, match="drawing needs matplotlib") as e:
        check_target(tmp_path / "x.png")
    assert INSTALL_HINT in str(e.value) and "\n" not in str(e.value)


def test_bench_plot_without_matplotlib_fails_before_measuring(tmp_path):
    """The check comes before any model file is written or measured: a one-line error."""
    r = bench("--preset", "tiny", "--plot", str(tmp_path / "b.png"), pre=BLOCK_MATPLOTLIB,
              env={"PYLOWBIT_CACHE": str(tmp_path / "cache")})
    assert_one_line_error(r, "drawing needs matplotlib", INSTALL_HINT)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "b.png").exists()


def test_plot_module_reports_unreadable_and_non_json_input(tmp_path, capsys):
    assert main([str(tmp_path / "none.json"), str(tmp_path / "o.png")]) == 1
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "t.json").write_text("pylowbit bench table, not JSON")
    assert main([str(tmp_path / "t.json"), str(tmp_path / "o.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m pylowbit.plot: error: ") and "is not JSON" in err
    (tmp_path / "e.json").write_text(json.dumps({"info": {}, "rows": []}))
    assert main([str(tmp_path / "e.json"), str(tmp_path / "o.png")]) == 1
    assert "no rows to draw" in capsys.readouterr().err
    assert not (tmp_path / "o.png").exists()


def test_import_pylowbit_never_loads_matplotlib():
    code = ("import sys, pylowbit, pylowbit.plot, pylowbit.benchmark, pylowbit.commands.bench; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_machine_description_names_the_isa_variant_running():
    m = machine_description()
    assert m.split(", ")[-2] == lb.isa_active() and m.endswith("logical CPUs")
