"""Wall time to the first token, warm (the file in the page cache): `pylowbit run -m FILE -p hi -n 1`
against llama-cpp-python loading the same file and generating one token, each a fresh process,
alternated round by round so that drift on a shared machine hits both alike.  `pylowbit (no
cache)` runs with its cache directory unwritable: the tokenizer is derived from scratch each start.

    python bench/startup.py FILE [FILE ...] [-r 5] [-t 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

LLAMA_CPP = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=int(sys.argv[2]), verbose=False)
llm("hi", max_tokens=1, temperature=0.0)
"""


def timed(cmd: list[str], env=None) -> float | None:
    """Wall seconds of cmd, None if it failed (llama.cpp does not read every file pylowbit does)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    return dt if r.returncode == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--no-llama", action="store_true", help="pylowbit only")
    args = ap.parse_args()
    cli = "import sys; from pylowbit.cli import main; sys.exit(main())"  # what the pylowbit script runs
    run = lambda f: [sys.executable, "-c", cli, "run", "-m", f, "-p", "hi", "-n", "1",  # noqa: E731
                     "-t", str(args.threads)]
    no_cache = dict(os.environ, PYLOWBIT_CACHE=os.devnull + "/none")  # under a file: unwritable
    engines = {"pylowbit": (run, None), "pylowbit (no cache)": (run, no_cache)}
    if not args.no_llama:
        engines["llama-cpp-python"] = (lambda f: [sys.executable, "-c", LLAMA_CPP, f, str(args.threads)],
                                       None)
    for f in args.files:
        for cmd, env in engines.values():  # warm: the file, the modules, pylowbit's cache
            timed(cmd(f), env)
        times = {e: [] for e in engines}
        for _ in range(args.rounds):
            for e, (cmd, env) in engines.items():
                times[e].append(timed(cmd(f), env))
        print(f)
        medians = {}
        for e, ts in times.items():
            ok = [t for t in ts if t is not None]
            if not ok:
                print(f"  {e:20s} cannot run this file")
                continue
            medians[e] = statistics.median(ok)
            print(f"  {e:20s} median {medians[e]:.2f} s  (min {min(ok):.2f}, max {max(ok):.2f}, "
                  f"{len(ok)} runs)")
        for e in ("pylowbit", "pylowbit (no cache)"):
            if e in medians and "llama-cpp-python" in medians:
                print(f"  {e} / llama-cpp-python: {medians[e] / medians['llama-cpp-python']:.2f}x the time")


if __name__ == "__main__":
    main()
