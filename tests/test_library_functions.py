"""The work of each command as one library function, called from Python without the CLI:
pylowbit.benchmark.run, pylowbit.eval.perplexity / kl_divergence, pylowbit.convert.convert.
Small synthetic models from pylowbit's own generator."""
import json

import numpy as np
import pytest

from pylowbit import benchmark, eval
from pylowbit.bench_models import BenchError
from pylowbit.model import Model
from pylowbit.model.synthetic import write_synthetic_model


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return write_synthetic_model(tmp_path_factory.mktemp("lib") / "m.gguf", arch="llama", fmt="tq2_0", seed=3)


@pytest.fixture(scope="module")
def tokens():
    return np.random.default_rng(5).integers(10, 500, 200).astype(np.int32)


# ---- benchmark.run ---------------------------------------------------------------------------

def test_bench_run_on_a_preset_returns_rows_and_its_json(tmp_path, monkeypatch):
    monkeypatch.setenv("PYLOWBIT_CACHE", str(tmp_path))
    result = benchmark.run(preset="tiny", types=["tq2_0", "i2_s"], threads=[1], n_prompt=4, n_gen=2, reps=2)
    rows, info = result  # unpacks as the (rows, info) it is
    assert [(r.model, r.format, r.test) for r in rows] == [
        ("tiny tq2_0", "tq2_0", "pp4"), ("tiny tq2_0", "tq2_0", "tg2"),
        ("tiny i2_s", "i2_s", "pp4"), ("tiny i2_s", "i2_s", "tg2")]
    assert all(r.tokens_per_s > 0 and len(r.samples) == 2 and r.engine == "pylowbit" for r in rows)
    assert all((r.roofline_share is not None) == (r.test == "tg2") for r in rows)
    assert info["n_prompt"] == 4 and info["reps"] == 2 and set(info["bytes_per_token"]) == {"tiny tq2_0", "tiny i2_s"}
    out = json.loads(result.to_json())  # what `pylowbit bench --json` prints
    assert out["rows"][0]["tokens_per_s"] == rows[0].tokens_per_s
    assert set(out["rows"][0]) == {"model", "format", "size_bytes", "engine", "threads", "test", "tokens_per_s",
                                   "stdev", "samples", "roofline_share", "vs_llama_cpp", "vs_torch", "peak_rss_bytes",
                                   "load_s"}
    assert result.to_csv().splitlines()[0].startswith("model,format,size_bytes,engine,threads,test")
    v = benchmark.GENERATOR_VERSION
    assert sorted(p.name for p in tmp_path.glob("*.gguf")) == [f"synthetic-tiny-i2_s-v{v}.gguf",
                                                               f"synthetic-tiny-tq2_0-v{v}.gguf"]


def test_bench_run_on_a_file(model_path):
    rows, _ = benchmark.run(model_path, threads=[1], n_prompt=0, n_gen=1, reps=1)
    (row,) = rows
    assert (row.model, row.test, row.size_bytes) == ("m.gguf", "tg1", model_path.stat().st_size)


def test_bench_run_refuses_bad_input_before_writing(tmp_path, monkeypatch):
    monkeypatch.setenv("PYLOWBIT_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="-r"):
        benchmark.run(preset="tiny", reps=0)
    with pytest.raises(ValueError, match="thread"):
        benchmark.run(preset="tiny", threads=[0])
    with pytest.raises(BenchError, match="unknown type 'q9_9'"):
        benchmark.run(preset="tiny", types="tq2_0,q9_9")
    with pytest.raises(BenchError, match="no such file"):
        benchmark.run(tmp_path / "nope.gguf")
    with pytest.raises(ValueError, match="llama.cpp"):
        benchmark.run(preset="tiny", vs="ollama")
    assert not list(tmp_path.iterdir())


# ---- eval.perplexity -------------------------------------------------------------------------

def test_perplexity_of_token_ids_is_the_mean_nll_of_the_scored_halves(model_path, tokens):
    r = eval.perplexity(model_path, tokens=tokens, bos_id=None, ctx=32, chunks=3)
    assert (r.n_chunks, r.ctx, r.n_scored, r.n_text_tokens) == (3, 32, 3 * 15, 200)
    m = Model(model_path, ctx=32, notice=None)
    nll = []
    for c in range(3):
        chunk = tokens[c * 32:(c + 1) * 32]
        m.reset()
        lg = m.forward(chunk, logits="all").astype(np.float64)
        lse = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
        nll += [lse[j] - lg[j, chunk[j + 1]] for j in range(16, 31)]
    assert r.ppl == pytest.approx(np.exp(np.mean(nll)), rel=1e-5)
    assert 0 < r.ppl_err < r.ppl and r.seconds > 0 and r.tokens_per_s > 0
    # a loaded Model is used as it is, and gives the same number
    assert eval.perplexity(m, tokens=tokens, bos_id=None, ctx=32, chunks=3).ppl == r.ppl


def test_perplexity_of_a_text_file_tokenizes_it(model_path, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the capital of France is Paris. " * 40)
    seen, notes = [], []
    r = eval.perplexity(model_path, text, ctx=64, chunks=2, progress=lambda i, n, p: seen.append((i, n)),
                        notice=notes.append)
    assert r.n_chunks == 2 and r.n_scored == 2 * 31 and r.n_text_tokens >= 128 and np.isfinite(r.ppl)
    assert seen == [(1, 2), (2, 2)]
    assert any(n.startswith("tokenized ") for n in notes)
    with pytest.raises(FileNotFoundError, match="text file not found"):
        eval.perplexity(model_path, tmp_path / "none.txt", ctx=64)
    with pytest.raises(ValueError, match="at least 64 tokens"):
        eval.perplexity(model_path, tokens=[1, 2, 3], ctx=64)
    with pytest.raises(ValueError, match="text"):
        eval.perplexity(model_path, ctx=64)


# ---- eval.kl_divergence ----------------------------------------------------------------------

def test_kl_divergence_against_a_base_file_and_a_base_model(model_path, tokens, tmp_path):
    base = tmp_path / "base.kld"
    p = eval.perplexity(model_path, tokens=tokens, bos_id=None, ctx=32, chunks=4, kl_divergence_base=base)
    assert p.base_file == str(base) and p.base_file_bytes == base.stat().st_size > 0
    other = write_synthetic_model(tmp_path / "other.gguf", arch="llama", fmt="q2_0", seed=3)

    k = eval.kl_divergence(model_path, base_file=base, bos_id=None)
    assert (k.n_chunks, k.ctx, k.stats.n, k.floor) == (4, 32, 4 * 15, None)
    assert k.stats.ppl == pytest.approx(p.ppl, rel=1e-5)  # the same model on the base's own ids
    assert abs(k.stats.kld) < 1e-4 and k.stats.same_top == 1.0  # only the base file's 16-bit rounding

    same = eval.kl_divergence(model_path, base_model=model_path, tokens=tokens, bos_id=None, ctx=32, chunks=4)
    assert same.stats.kld == 0.0 and same.stats.same_top == 1.0  # uncompressed base: exactly 0
    diff = eval.kl_divergence(other, base_model=model_path, tokens=tokens, bos_id=None, ctx=32, chunks=4)
    assert diff.stats.kld > 1e-3 and diff.stats.ppl_base == pytest.approx(p.ppl, rel=1e-5)
    assert "Mean    KLD" in diff.stats.format()

    with pytest.raises(ValueError, match="exactly one base"):
        eval.kl_divergence(model_path, base_file=base, base_model=model_path)
    with pytest.raises(ValueError, match="exactly one base"):
        eval.kl_divergence(model_path, tokens=tokens)


# ---- convert.convert -------------------------------------------------------------------------

def test_convert_repacks_exactly_and_says_how_each_tensor_went(model_path, tmp_path):
    from pylowbit import core
    from pylowbit.convert import ConversionError, convert
    from pylowbit.gguf import GGUFFile

    dst = tmp_path / "q2.gguf"
    r = convert(model_path, dst, "q2_0")
    assert r["bytes"] == dst.stat().st_size and r["rotated"] == [] and r["block"] is None
    with GGUFFile(model_path) as a, GGUFFile(dst) as b:
        assert set(r["tensors"]) == set(a.tensors)
        for name, (src, out, how) in r["tensors"].items():
            assert (src, b.tensors[name].fmt) == (a.tensors[name].fmt, out)
            if src == "tq2_0":
                assert (out, how) == ("q2_0", "repacked (exact)")
                x = core.dequantize(a.tensors[name].data, "tq2_0", a.tensors[name].shape)
                assert np.array_equal(core.dequantize(b.tensors[name].data, "q2_0", b.tensors[name].shape), x)
            else:
                assert how == "copied"
    # to a format that cannot hold the codes: refused before anything is written, unless allowed
    with pytest.raises(ConversionError, match="lossy"):
        convert(dst, tmp_path / "q1.gguf", "q1_0")
    assert not (tmp_path / "q1.gguf").exists()


def test_convert_quantizes_floats_and_folds_a_rotation(tmp_path):
    from pylowbit.convert import convert

    src = write_synthetic_model(tmp_path / "f32.gguf", arch="llama", fmt="f32", seed=4)
    r = convert(src, tmp_path / "pq2.gguf", "pq2_0", rotate=64, seed=7, keep="q8_0")
    assert r["block"] == 64 and r["seed"] == 7 and "token_embd.weight" in r["rotated"]
    hows = {name: how for name, (_, _, how) in r["tensors"].items()}
    assert hows["blk.0.ffn_down.weight"] == "rotated+quantized"
    assert all(hows[n].startswith("rotated+") for n in r["rotated"])
    m = Model(tmp_path / "pq2.gguf", ctx=16, notice=None)  # the folded file runs
    assert np.isfinite(m.forward(np.arange(10, 18), logits="all")).all()
