"""Wall time to the first token, warm (the file in the page cache): `pylowbit run -m FILE -p hi -n 1`
against llama-cpp-python loading the same file and generating one token, each a fresh process,
alternated round by round so that drift on a shared machine hits both alike.

    python bench/startup.py FILE [FILE ...] [-r 5] [-t 1]
"""
from __future__ import annotations

import argparse
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


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{r.stderr[-2000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--no-llama", action="store_true", help="pylowbit only")
    args = ap.parse_args()
    cli = "import sys; from pylowbit.cli import main; sys.exit(main())"  # what the pylowbit script runs
    engines = {"pylowbit": lambda f: [sys.executable, "-c", cli, "run", "-m", f, "-p", "hi", "-n", "1",
                                      "-t", str(args.threads)]}
    if not args.no_llama:
        engines["llama-cpp-python"] = lambda f: [sys.executable, "-c", LLAMA_CPP, f, str(args.threads)]
    for f in args.files:
        for cmd in engines.values():  # warm: the file and the interpreters' modules in the page cache
            timed(cmd(f))
        times = {e: [] for e in engines}
        for _ in range(args.rounds):
            for e, cmd in engines.items():
                times[e].append(timed(cmd(f)))
        print(f)
        for e, ts in times.items():
            print(f"  {e:17s} median {statistics.median(ts):.2f} s  (min {min(ts):.2f}, "
                  f"max {max(ts):.2f}, {len(ts)} runs)")
        if len(times) == 2:
            a, b = (statistics.median(ts) for ts in times.values())
            print(f"  pylowbit / llama-cpp-python: {a / b:.2f}x the time")


if __name__ == "__main__":
    main()
