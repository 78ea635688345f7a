"""Decode speed of two liblowbit builds side by side on one model file, as roofline shares.

    python bench/ab_decode.py NEW.so BASE.so [-m FILE | --preset P --type T] [-t 2] [-n 8] [-r 12]
                              [--isa NEW_ISA,BASE_ISA] [-p 64]

Each build runs in a process of its own: a copy of the installed pylowbit package with its
liblowbit.so replaced (the Python side and the extension modules are the installed ones, so only
C library changes are compared), the model loaded once.  The processes then take turns, in
alternating order, generating n tokens each; the read bandwidth is probed right before and after
every run (in the first process, which idles while the second runs), and a run's share is the
bytes a token moves (pylowbit.benchmark.bytes_per_token) per second over the better of its two
probes, as `pylowbit bench` reports it.  On a machine whose bandwidth moves from minute to minute
only shares taken round by round compare: the medians, and how many rounds each build won, are
the result, with the median per round of new's tokens/s over base's.  --isa forces a variant in
each process (PYLOWBIT_ISA): one build twice gives two of its variants side by side.  -p N times
a prompt of N tokens in one batch instead (pp N, as `pylowbit bench`; no shares, tokens/s only).
--cpu-time times each run in its process's CPU time instead of wall time, without probes (tokens
per CPU second): on a machine whose cores other jobs take, steadier than wall time at one thread.  Both models are resident at once: two 27B files need about 2 x 6 GB.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SERVE = r"""
import sys, time
from pathlib import Path
from pylowbit.model import load_model
from pylowbit.benchmark import read_bandwidth, probe_buffer, bytes_per_token
import pylowbit._lowbit as ext
path, threads, copy, ctx = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]).resolve(), int(sys.argv[4])
clock = time.process_time if sys.argv[5] == "cpu" else time.perf_counter
if Path(ext.__file__).resolve().parent != copy:  # else both processes would run one build
    sys.exit(f"ab_decode: pylowbit._lowbit loaded from {ext.__file__}, not from the copy in {copy} "
             "(an editable install's import hook wins over PYTHONPATH: `pip install .` instead)")
buf = probe_buffer(512 << 20)
m = load_model(path, ctx=ctx, threads=threads)
m.forward([5])
print("ready", bytes_per_token(path), flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "gen":  # from an empty cache, as pylowbit bench's tg (the reset untimed)
        m.reset()
        t0 = clock()
        for i in range(int(cmd[1])):
            m.forward([100 + i])
        print(clock() - t0, flush=True)
    elif cmd[0] == "pp":
        m.reset()
        t0 = clock()
        m.forward(list(range(100, 100 + int(cmd[1]))))
        print(clock() - t0, flush=True)
    elif cmd[0] == "probe":
        print(read_bandwidth(threads, reps=2, buf=buf), flush=True)
    else:
        break
"""


def package_with(lib: Path, into: Path) -> Path:
    """A copy of the installed pylowbit package under `into`, its liblowbit.so replaced by lib.
    The extension modules are copied from wherever they load (an editable install keeps them
    apart from the sources); they find liblowbit.so beside them."""
    import importlib

    import pylowbit

    dst = into / "pylowbit"
    shutil.copytree(Path(pylowbit.__file__).parent, dst,
                    ignore=shutil.ignore_patterns("__pycache__", "include", "pkgconfig", "*.so"))
    for mod in ("_lowbit", "_ops", "_fwht", "_capi"):
        shutil.copy(importlib.import_module(f"pylowbit.{mod}").__file__, dst)
    shutil.copyfile(lib, dst / "liblowbit.so")
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("libs", nargs=2, type=Path, metavar="LIB", help="liblowbit.so of each build")
    ap.add_argument("-m", "--model", type=Path, help="GGUF file (default: the synthetic --preset)")
    ap.add_argument("--preset", default="bitnet-2b")
    ap.add_argument("--type", default="tq1_0")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--n-gen", type=int, default=8)
    ap.add_argument("-r", "--rounds", type=int, default=12)
    ap.add_argument("-p", "--n-prompt", type=int, default=0, help="time pp N instead of tg")
    ap.add_argument("--isa", default="", help="NEW,BASE: the variant each process runs")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time runs in process CPU time, no probes: tokens per CPU second (steadier "
                         "than wall time where other jobs take the cores; one thread)")
    args = ap.parse_args()
    isas = args.isa.split(",") if args.isa else []
    if isas and len(isas) != 2:
        ap.error("--isa takes two variants, NEW,BASE")
    for lib in args.libs:
        if not lib.is_file():
            ap.error(f"{lib}: no such file")
    if args.model is None:
        from pylowbit.benchmark import synthetic_model

        args.model = synthetic_model(args.preset, args.type)
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for k, lib in enumerate(args.libs):
            root = package_with(lib, Path(tmp) / str(k))
            procs.append(subprocess.Popen(
                [sys.executable, "-c", SERVE, str(args.model), str(args.threads), str(root / "pylowbit"),
                 str(max(128, args.n_gen, args.n_prompt) + 1), "cpu" if args.cpu_time else "wall"],
                cwd=tmp, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=dict(os.environ, PYTHONPATH=str(root), **({"PYLOWBIT_ISA": isas[k]} if isas else {}))))
        per_token = 0
        for p in procs:
            line = p.stdout.readline().split()
            if not line or line[0] != "ready":
                print("a build failed to load the model", file=sys.stderr)
                return 1
            per_token = int(line[1])

        def ask(p, cmd):
            p.stdin.write(cmd + "\n")
            p.stdin.flush()
            return float(p.stdout.readline())

        shares, secs_of = [[], []], [[], []]
        run = f"pp {args.n_prompt}" if args.n_prompt else f"gen {args.n_gen}"
        ntok = args.n_prompt or args.n_gen
        rates = args.n_prompt or args.cpu_time  # tokens/s, not shares
        print(f"{args.model.name}, {args.threads} thread(s), {run} a run; "
              f"{'tokens/s' if rates else 'share'} per round:")
        for r in range(args.rounds):
            for k in (0, 1) if r % 2 == 0 else (1, 0):
                before = 0 if rates else ask(procs[0], "probe")
                secs = ask(procs[k], run)
                after = 0 if rates else ask(procs[0], "probe")
                shares[k].append(ntok / secs if rates
                                 else per_token * ntok / secs / max(before, after))
                secs_of[k].append(secs)
            print(f"  {r:3d}  new {shares[0][-1]:.3f}  base {shares[1][-1]:.3f}", flush=True)
        for p in procs:
            p.stdin.write("quit\n")
            p.stdin.flush()
            p.wait()
    wins = sum(a > b for a, b in zip(*shares))
    rates = args.n_prompt or args.cpu_time
    print(f"median {'tokens/s' if rates else 'share'}: new {statistics.median(shares[0]):.3f}, base {statistics.median(shares[1]):.3f}; "
          f"new ahead in {wins} of {args.rounds} rounds; tokens/s new / base, median of the rounds "
          f"{statistics.median(b / a for a, b in zip(*secs_of)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
