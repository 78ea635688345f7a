"""What `run` and `perplexity` keep resident (issue #5: peak RSS within the file size + KV cache
+ 15 %), guarded without timing or RSS thresholds: the modules a run imports, the Python objects a
tokenizer build leaves behind, and the type table that replaced the gguf package import."""
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from pylowbit.gguf import TYPES, GGUFFile, write_gguf
from pylowbit.model import Sampler, SamplerConfig, TextTokenizer
from pylowbit.model.synthetic import tokenizer_metadata, write_synthetic_model

# Resident for the whole run once imported, and not needed by a greedy `run` of a file whose tensor
# types all have kernels: the gguf package (with yaml: ~4 MB), numpy.random (hashlib/libcrypto:
# ~6 MB), the chat template engine, and the other commands' modules.
NOT_IMPORTED = ("gguf", "yaml", "jinja2", "numpy.random", "hashlib", "pylowbit.benchmark", "pylowbit.bench_models",
                "pylowbit.bench_machine", "pylowbit.convert", "pylowbit.encode", "pylowbit.commands.bench",
                "pylowbit.commands.quantize", "statistics", "decimal", "rich")

_CLI = ("import sys\nfrom pylowbit.cli import main\nrc = main(sys.argv[1:])\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\nsys.exit(rc)")


def _modules(*argv, tmp_path) -> set[str]:
    """sys.modules after `pylowbit ARGV` in a fresh interpreter, less those a bare start imports
    (site hooks of the environment may import e.g. hashlib before any pylowbit code runs)."""
    def run(code, *args):
        # in tmp_path: the working directory (a source checkout) is not on sys.path
        # and with a cache directory of its own (run writes its tokenizer tables there)
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                           cwd=tmp_path, timeout=300,
                           env=dict(os.environ, PYLOWBIT_CACHE=str(tmp_path / "cache")))
        assert r.returncode == 0, r.stderr
        return set(r.stdout.rsplit("MODULES ", 1)[1].split())

    return run(_CLI, *argv) - run("import sys\nprint('MODULES', ' '.join(sys.modules))")


def test_run_imports_only_what_it_needs(tmp_path):
    p = write_synthetic_model(tmp_path / "m.gguf", arch="gemma3", fmt="q8_0", seed=1)
    mods = _modules("run", "-m", str(p), "-p", "Hello there", "-n", "3", tmp_path=tmp_path)
    assert "pylowbit.commands.run" in mods and "tokenizers" in mods  # it did run
    assert not {m for m in mods if m in NOT_IMPORTED or m.split(".")[0] in NOT_IMPORTED}


def test_perplexity_imports_only_what_it_needs(tmp_path):
    p = write_synthetic_model(tmp_path / "m.gguf", arch="llama", fmt="tq2_0", seed=2)
    text = tmp_path / "t.txt"
    text.write_text("the capital of France is Paris. " * 40)
    mods = _modules("perplexity", "-m", str(p), "-f", str(text), "-c", "64", "--chunks", "1", tmp_path=tmp_path)
    assert "pylowbit.commands.perplexity" in mods
    assert not {m for m in mods if m in NOT_IMPORTED or m.split(".")[0] in NOT_IMPORTED}
    assert "tokenizers" not in mods  # the text is tokenized in a child process


@pytest.mark.parametrize("arch", ["gemma3", "llama"])
def test_perplexity_tokenizes_in_a_child_exactly(tmp_path, arch):
    """perplexity's child-process tokenization gives the ids (BOS included) of an in-process encode."""
    from pylowbit.eval.text import tokenize_in_child

    p = write_synthetic_model(tmp_path / "m.gguf", arch=arch, fmt="q8_0", seed=3)
    text = tmp_path / "t.txt"
    text.write_text("Héllo wörld,  the capital of France is Paris.\n\n  <b>x</b> 12345 " * 50, encoding="utf-8")
    with GGUFFile(p) as f:
        tok = TextTokenizer(f)
        want = tok.encode(text.read_text(encoding="utf-8"), add_special=True)
        want40 = tok.encode(text.read_text(encoding="utf-8")[:40], add_special=True)
        bos = tok.bos_id if tok.add_bos else None
    ids, got_bos = tokenize_in_child(p, text, None)
    assert ids.dtype == np.int32 and ids.tolist() == want and got_bos == bos
    ids, _ = tokenize_in_child(p, text, 40)  # max_chars: a prefix of the text
    assert ids.tolist() == want40 and len(want40) < len(want)


def test_perplexity_child_errors_are_one_clear_exception(tmp_path):
    from pylowbit.eval.text import tokenize_in_child

    p = write_gguf(tmp_path / "notok.gguf", {"general.architecture": "llama"}, [])
    text = tmp_path / "t.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="no tokenizer"):
        tokenize_in_child(p, text, None)
    m = write_synthetic_model(tmp_path / "m.gguf", arch="llama", fmt="q8_0", seed=3)
    with pytest.raises(OSError, match="missing.txt"):
        tokenize_in_child(m, tmp_path / "missing.txt", None)


def test_sampling_imports_numpy_random_only_to_draw():
    # (numpy.random may be loaded by the test session already: what is checked is that greedy
    # sampling never makes a generator, which is what imports it)
    s = Sampler()
    assert s(np.array([0.5, 2.0, 1.0], np.float32)) == 1 and s._rng is None
    s = Sampler(SamplerConfig(repeat_penalty=2.0))
    logits = np.array([0.5, 2.0, 1.5], np.float32)
    assert s(logits, [1]) == 2 and s._rng is None
    assert logits[1] == 2.0  # the caller's logits are not penalized in place
    assert Sampler(SamplerConfig(temperature=1.0, seed=0))(logits) in (0, 1, 2)


def test_type_table_matches_ggml():
    """pylowbit.gguf writes ggml's type sizes out instead of importing the gguf package: they must
    agree with it on every type it knows."""
    consts = pytest.importorskip("gguf.constants")
    for t, (block, size) in consts.GGML_QUANT_SIZES.items():
        assert int(t) in TYPES, t.name
        ti = TYPES[int(t)]
        assert (ti.name, ti.block_size, ti.type_size) == (t.name.lower(), block, size)


@pytest.mark.parametrize("arch", ["gemma3", "llama"])
def test_tokenizer_build_leaves_no_python_objects(tmp_path, arch):
    """The vocabulary's strings, dicts and merge pairs are garbage once the tokenizer is built, and
    release_encoder() drops the `tokenizers` object: Python allocations made by the build that are
    still alive stay a few kB (the vocab dict alone is ~1.5 MB here, ~35 MB for Gemma's 262k tokens)."""
    meta = tokenizer_metadata("gemma3" if arch == "gemma3" else "llama", 20000)
    p = write_gguf(tmp_path / "t.gguf", meta, [])
    import tokenizers  # noqa: F401  (its one-time import is not the build's)

    with GGUFFile(p) as f:
        TextTokenizer(f).release_encoder()  # one-time caches of the first build are not counted
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tok = TextTokenizer(f)
            built = tracemalloc.get_traced_memory()
            ids = tok.encode("Hello world, ünïcödé")
            tok.release_encoder()
            released = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert built[1] - base > 1 << 20  # the build did make its MBs of Python objects (the check can fail)
    assert built[0] - base < 64 << 10, built[0] - base
    assert released - base < 64 << 10, released - base
    assert tok.decode(ids).endswith("Hello world, ünïcödé")


_ARENAS = """
import gc, os, re, sys
from pylowbit.gguf import GGUFFile
from pylowbit.model import TextTokenizer

def arenas():  # pymalloc's arena count, from the stats it prints on the C stderr
    r, w = os.pipe(); saved = os.dup(2); os.dup2(w, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2); os.close(w)
    m = re.search(r"# arenas allocated current\\s+=\\s+(\\d+)", os.read(r, 1 << 20).decode())
    return int(m.group(1)) if m else -1

with GGUFFile(sys.argv[1]) as f:
    TextTokenizer(f).release_encoder()  # one-time imports and caches
    gc.collect()
    before = arenas()
    tok = TextTokenizer(f)
    tok.encode("Hello world")
    tok.release_encoder()
    gc.collect()
    print(before, arenas())
"""


@pytest.mark.parametrize("arch", ["gemma3", "llama"])
def test_tokenizer_build_pins_no_allocator_arenas(tmp_path, arch):
    """A few long-lived objects made amid the build's garbage keep its 1 MB pymalloc arenas (RSS)
    after everything else in them is freed: the build makes what outlives it first, so the arena
    count after building and releasing a tokenizer is back where it was (it was one more for the
    byte-level vocabulary here, and ~3 MB of arenas for Gemma's)."""
    p = write_gguf(tmp_path / "t.gguf", tokenizer_metadata(arch, 20000), [])
    r = subprocess.run([sys.executable, "-c", _ARENAS, str(p)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    before, after = map(int, r.stdout.split())
    if before < 0:
        pytest.skip("this Python does not report pymalloc arenas")
    assert after <= before
