"""The bench's results as a picture: tokens/s per format and thread count, beside llama.cpp's when
the run measured it, under the memory roofline the run measured.

    pylowbit bench --plot bench.png                    # measure, print the table, draw
    pylowbit bench --json > results.json               # or keep the numbers...
    python -m pylowbit.plot results.json bench.png     # ...and draw them later

One panel per test (generation, then prompt).  A bar is a row of the bench table: its mean
tokens/s, the stdev as an error bar; a generation bar carries its roofline share and a black mark
at the roofline itself (the read bandwidth measured in the run / the bytes a token moves), and a
pylowbit bar its ratio to llama.cpp.  matplotlib is an optional extra (pip install
"pylowbit[plot]"), imported only to draw: plot_data, the numbers drawn, needs nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

INSTALL_HINT = 'pip install "pylowbit[plot]"'
ENGINE_COLORS = {"pylowbit": "#2b6cb0", "llama.cpp": "#a0aec0"}
OTHER_ENGINE_COLOR = "#ed8936"
ROW_FIELDS = ("model", "engine", "threads", "test", "tokens_per_s")


class PlotError(RuntimeError):
    """A user-facing problem (matplotlib missing, results malformed, unwritable file): one line."""


@dataclass(frozen=True)
class Bar:
    """One bench row as drawn."""
    model: str
    engine: str
    threads: int
    tokens_per_s: float
    stdev: float = 0.0
    roofline_share: float | None = None
    vs_llama_cpp: float | None = None


@dataclass(frozen=True)
class Panel:
    """One test (tg16, pp64, ...): its bars in the rows' order, and for a generation test the
    roofline of each (model, threads) in tokens/s."""
    test: str
    bars: tuple[Bar, ...]
    rooflines: dict

    @property
    def generation(self) -> bool:
        return self.test.startswith("tg")


def _number(row: dict, i: int, key: str, optional: bool = False) -> float | None:
    v = row.get(key)
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:  # NaN fails too
        raise PlotError(f"bench results: row {i}: {key} must be a number >= 0, got {v!r}")
    return float(v)


def _by_int_key(info: dict, key: str) -> dict:
    """A dict of the info keyed by thread count (JSON turned the int keys into strings)."""
    d = info.get(key) or {}
    if not isinstance(d, dict):
        raise PlotError(f"bench results: info.{key} must be a mapping, got {type(d).__name__}")
    try:
        return {int(k): v for k, v in d.items()}
    except ValueError:
        raise PlotError(f"bench results: info.{key} is not keyed by thread count: {list(d)}") from None


def _rows_and_info(results) -> tuple[list[dict], dict]:
    if isinstance(results, tuple) and len(results) == 2:  # benchmark.run's (rows, info)
        rows, info = results
    elif isinstance(results, dict):  # `pylowbit bench --json`
        if "rows" not in results or "info" not in results:
            raise PlotError("bench results: expected the keys 'rows' and 'info' of `pylowbit bench "
                            f"--json`, got {sorted(results)}")
        rows, info = results["rows"], results["info"]
    else:
        raise PlotError("bench results: expected the dict of `pylowbit bench --json` or "
                        f"benchmark.run's (rows, info), got {type(results).__name__}")
    if not isinstance(rows, list) or not rows:
        raise PlotError("bench results: no rows to draw")
    if not isinstance(info, dict):
        raise PlotError(f"bench results: info must be a mapping, got {type(info).__name__}")
    rows = [asdict(r) if is_dataclass(r) else r for r in rows]
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise PlotError(f"bench results: row {i} is a {type(r).__name__}, not a mapping")
        missing = [k for k in ROW_FIELDS if k not in r]
        if missing:
            raise PlotError(f"bench results: row {i} lacks {', '.join(missing)}")
    return rows, info


def plot_data(results) -> list[Panel]:
    """The numbers the picture shows, from a bench run: the dict of `pylowbit bench --json` (or
    json.load of it) or benchmark.run's (rows, info).  One Panel per test, generation tests
    first; a generation panel's roofline for (model, threads) is info's read bandwidth on that
    many threads over info's bytes per token of that model.  PlotError names what is malformed."""
    rows, info = _rows_and_info(results)
    bandwidth = _by_int_key(info, "bandwidth_bytes_per_s")
    per_token = info.get("bytes_per_token") or {}
    panels: dict[str, list[Bar]] = {}
    rooflines: dict[str, dict] = {}
    for i, r in enumerate(rows):
        test, model, engine = r["test"], r["model"], r["engine"]
        for key, v in (("test", test), ("model", model), ("engine", engine)):
            if not isinstance(v, str) or not v:
                raise PlotError(f"bench results: row {i}: {key} must be a non-empty string, got {v!r}")
        t = r["threads"]
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise PlotError(f"bench results: row {i}: threads must be an integer >= 1, got {t!r}")
        bar = Bar(model, engine, t, _number(r, i, "tokens_per_s"), _number(r, i, "stdev", True) or 0.0,
                  _number(r, i, "roofline_share", True), _number(r, i, "vs_llama_cpp", True))
        panels.setdefault(test, []).append(bar)
        if test.startswith("tg"):
            if t not in bandwidth:
                raise PlotError(f"bench results: row {i} is a generation test on {t} threads, but "
                                f"info.bandwidth_bytes_per_s has no entry for {t} threads")
            if model not in per_token:
                raise PlotError(f"bench results: row {i}: info.bytes_per_token has no entry for {model!r}")
            bw, moved = bandwidth[t], per_token[model]
            if not (isinstance(bw, (int, float)) and isinstance(moved, (int, float)) and bw > 0 and moved > 0):
                raise PlotError(f"bench results: the roofline of {model!r} on {t} threads needs a "
                                f"bandwidth and bytes per token > 0, got {bw!r} and {moved!r}")
            rooflines.setdefault(test, {})[model, t] = bw / moved
    order = sorted(panels, key=lambda test: not test.startswith("tg"))  # stable: row order within
    return [Panel(test, tuple(panels[test]), rooflines.get(test, {})) for test in order]


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise PlotError(f"drawing needs matplotlib: {INSTALL_HINT} ({e})") from None
    return Figure


def check_target(path) -> Path:
    """Before a run that takes minutes: matplotlib importable, the file's directory there and its
    suffix a format matplotlib writes (.png, .svg, .pdf...).  Returns the path."""
    path = Path(path)
    figure = _figure_class()
    if not path.parent.is_dir():
        raise PlotError(f"cannot write {path}: no directory {path.parent}")
    formats = figure().canvas.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in formats:
        raise PlotError(f"cannot write {path}: give a file name ending in one of "
                        f"{', '.join('.' + f for f in sorted(formats))}")
    return path


def _panel_title(panel: Panel) -> str:
    n = panel.test[2:]
    if panel.generation:
        return f"generation, {panel.test}: {n} tokens one by one"
    if panel.test.startswith("pp"):
        return f"prompt, {panel.test}: {n} tokens in one batch"
    return panel.test


def _draw_panel(ax, panel: Panel, one_model: bool) -> None:
    groups: dict[tuple, list[Bar]] = {}  # (model, threads) in the rows' order
    for b in panel.bars:
        groups.setdefault((b.model, b.threads), []).append(b)
    engines = list(dict.fromkeys(b.engine for b in panel.bars))
    width = 0.8 / len(engines)
    drawn = set()
    for g, ((model, threads), bars) in enumerate(groups.items()):
        for b in bars:
            k = engines.index(b.engine)
            x = g - 0.4 + width * (k + 0.5)
            color = ENGINE_COLORS.get(b.engine, OTHER_ENGINE_COLOR)
            ax.bar(x, b.tokens_per_s, width * 0.92, yerr=b.stdev or None, color=color, capsize=3,
                   label=None if b.engine in drawn else b.engine)
            drawn.add(b.engine)
            notes = []
            if b.roofline_share is not None:
                notes.append(f"{100 * b.roofline_share:.0f}%")
            if b.vs_llama_cpp is not None:
                notes.append(f"{b.vs_llama_cpp:.2f}x")
            if notes:
                ax.annotate("\n".join(notes), (x, b.tokens_per_s + b.stdev), xytext=(0, 3),
                            textcoords="offset points", ha="center", va="bottom", fontsize=8)
        roof = panel.rooflines.get((model, threads))
        if roof is not None:
            ax.hlines(roof, g - 0.45, g + 0.45, colors="black", linewidth=2,
                      label=None if "roof" in drawn else "memory roofline")
            drawn.add("roof")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([(f"{t} thread{'s' if t > 1 else ''}" if one_model else
                         f"{m}\n{t} thread{'s' if t > 1 else ''}") for m, t in groups])
    ax.set_ylabel("tokens/s")
    top = max([b.tokens_per_s + b.stdev for b in panel.bars] + list(panel.rooflines.values()))
    ax.set_ylim(0, 1.2 * top or 1.0)  # room for the notes above the bars
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def machine_description() -> str:
    """This machine, for the title of a run drawn where it ran: the CPU's name (with its family
    and model where Linux reports them: VMs often name only the vendor's line), the ISA variant
    liblowbit runs and the logical CPUs."""
    import os
    import platform

    import pylowbit as lb

    facts = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                facts.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = facts.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    if "cpu family" in facts and "model" in facts:
        name += f" (family {facts['cpu family']} model {facts['model']})"
    return f"{name}, {lb.isa_active()}, {os.cpu_count()} logical CPUs"


def plot(results, path, title: str | None = None, machine: str | None = None) -> Path:
    """Draw a bench run (the dict of `pylowbit bench --json`, or benchmark.run's (rows, info))
    into path; the format follows the suffix (.png, .svg, .pdf).  machine: a line naming where
    it ran (machine_description() for a run of this machine).  Returns the path."""
    panels = plot_data(results)  # bad results fail before matplotlib is looked for
    path = check_target(path)
    _, info = _rows_and_info(results)
    figure = _figure_class()
    fig = figure(figsize=(5.2 * len(panels) + 0.6, 5.0), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    models = list(dict.fromkeys(b.model for p in panels for b in p.bars))
    one_model = len(models) == 1
    legend = {}
    for ax, panel in zip(axes, panels):
        _draw_panel(ax, panel, one_model)
        ax.set_title(_panel_title(panel), fontsize=10)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncols=len(legend), fontsize=9)
    notes = []
    if any(p.rooflines for p in panels):
        notes.append("generation: % of the roofline (the read bandwidth measured in the run / bytes per token)")
    if any(b.vs_llama_cpp is not None for p in panels for b in p.bars):
        notes.append("pylowbit bars: ratio to llama.cpp on the same file, same run")
    reps = info.get("reps")
    head = title or "pylowbit bench" + (f": {models[0]}" if one_model else "")
    if machine:
        head += f"\n{machine}"
    if reps:
        notes.insert(0, f"mean ± stdev of {reps} repetitions")
    fig.suptitle("\n".join([head] + notes), fontsize=10)
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise PlotError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pylowbit.plot",
                                 description="Draw a saved `pylowbit bench --json` output.")
    ap.add_argument("results", help="JSON file written by `pylowbit bench --json > FILE`")
    ap.add_argument("out", help="picture to write (.png, .svg, .pdf)")
    ap.add_argument("--title", help="the picture's title (default: pylowbit bench and the model)")
    ap.add_argument("--machine", help="a line naming the machine the run was made on")
    args = ap.parse_args(argv)
    try:
        try:
            results = json.loads(Path(args.results).read_text())
        except OSError as e:
            raise PlotError(f"cannot read {args.results}: {e.strerror or e}") from None
        except ValueError as e:
            raise PlotError(f"{args.results} is not JSON (the output of `pylowbit bench --json`): {e}") from None
        plot(results, args.out, args.title, args.machine)
    except PlotError as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
