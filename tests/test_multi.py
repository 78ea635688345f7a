"""Several matrices on one input in one call (lowbit_matrix_gemm_multi / _glu, the decoder's q/k/v
and gate/up): bit for bit the separate products, in every variant, split any way over the pool;
bad arguments raise."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit, _ops
from pylowbit.model import load_model
from pylowbit.model.forward import KVCache
from pylowbit.model.synthetic import write_synthetic_model
from pylowbit.model.weights import GatedFFN, LinearGroup

from model_reference import Ref
from test_model import MAX_REL_ERR, _Recorder, rel_err

FORMATS = ["tq1_0", "tq2_0", "i2_s", "q1_0", "q2_0", "pq2_0", "ptq1_0", "q8_0", "f16", "f32"]
VARIANTS = lb.isa_supported()



def packed(rng, rows, cols, fmt):
    return lb.quantize(rng.standard_normal((rows, cols)).astype(np.float32), fmt).pack()


def multi(ws, x, threads):
    outs = tuple(np.full((x.shape[0], w.shape[0]), np.nan, np.float32) for w in ws)
    _lowbit.gemm_multi(tuple(w._m for w in ws), x, outs, threads)
    return outs


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_multi_equals_separate_products(fmt, variant, isa):
    isa(variant)
    rng = np.random.default_rng(1)
    cols = 512
    # row counts that are not multiples of the 64-row task or the 4-row pack group
    ws = [packed(rng, r, cols, fmt) for r in (300, 64, 5)]
    for T in (1, 3, 37):
        x = rng.standard_normal((T, cols)).astype(np.float32)
        for threads in (1, 2, 3):
            for w, o in zip(ws, multi(ws, x, threads)):
                np.testing.assert_array_equal(o, w.gemm(x, threads=1))


def test_multi_mixes_formats_and_groups():
    """Q8_K (256), Q8_0 (32), P2 (128) and Q8_K-at-128 (PQ2_0, PTQ1_0) groups and float weights in
    one call: each (group, rule) quantized once, and I2_S and PQ2_0 -- the same group, not the same
    rule -- each get their own codes."""
    rng = np.random.default_rng(2)
    ws = [packed(rng, r, 256, f) for r, f in ((70, "tq2_0"), (33, "q2_0"), (128, "i2_s"), (9, "f16"),
                                               (200, "tq1_0"), (8, "q8_0"), (13, "pq2_0"),
                                               (6, "ptq1_0"))]
    x = rng.standard_normal((2, 256)).astype(np.float32)
    for w, o in zip(ws, multi(ws, x, 2)):
        np.testing.assert_array_equal(o, w.gemm(x))


@pytest.mark.parametrize("act", ["silu", "relu2", "gelu"])
@pytest.mark.parametrize("fmt", ["tq2_0", "i2_s", "q2_0", "q8_0", "f32"])
def test_glu_equals_gate_up_then_act_mul(fmt, act):
    rng = np.random.default_rng(3)
    g, u = packed(rng, 1000, 256, fmt), packed(rng, 1000, 256, fmt)
    for T in (1, 4, 20):
        x = rng.standard_normal((T, 256)).astype(np.float32)
        y, yu = np.full((T, 1000), np.nan, np.float32), np.full((T, 1000), np.nan, np.float32)
        _lowbit.gemm_glu(g._m, u._m, _ops.ACTIVATIONS[act], x, y, yu, 2)
        np.testing.assert_array_equal(yu, u.gemm(x))
        np.testing.assert_array_equal(y, _ops.act_mul(act, g.gemm(x), u.gemm(x)))


def test_bad_arguments_raise():
    rng = np.random.default_rng(4)
    a, b, c = packed(rng, 64, 256, "tq2_0"), packed(rng, 64, 512, "tq2_0"), packed(rng, 32, 256, "tq2_0")
    x = np.ones((1, 256), np.float32)
    out = np.empty((1, 64), np.float32)
    with pytest.raises(ValueError, match="columns"):
        _lowbit.gemm_multi((a._m, b._m), x, (out, np.empty((1, 64), np.float32)))
    with pytest.raises(ValueError, match="1 to 8"):
        _lowbit.gemm_multi((), x, ())
    with pytest.raises(ValueError, match="1 to 8"):
        _lowbit.gemm_multi((a._m,) * 9, x, (out,) * 9)
    with pytest.raises(ValueError, match="one output each"):
        _lowbit.gemm_multi((a._m, a._m), x, (out,))
    with pytest.raises(TypeError, match="not a PackedMatrix"):
        _lowbit.gemm_multi((None,), x, (out,))
    with pytest.raises(TypeError):
        _lowbit.gemm_multi([a._m], x, [out])  # tuples only
    with pytest.raises(ValueError, match="shape"):
        _lowbit.gemm_multi((a._m,), x, (np.empty((1, 63), np.float32),))
    with pytest.raises(ValueError, match="float32"):
        _lowbit.gemm_multi((a._m,), x, (np.empty((1, 64), np.float64),))
    with pytest.raises(ValueError, match="float32"):
        _lowbit.gemm_multi((a._m,), x, (np.empty((64, 2), np.float32).T,))
    ro = np.empty((1, 64), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _lowbit.gemm_multi((a._m,), x, (ro,))
    with pytest.raises(ValueError, match="2-D"):
        _lowbit.gemm_multi((a._m,), np.ones(256, np.float32), (out,))
    with pytest.raises(ValueError, match="shape"):
        _lowbit.gemm_multi((a._m,), np.ones((1, 255), np.float32), (out,))
    with pytest.raises(ValueError, match="gate is"):
        _lowbit.gemm_glu(a._m, c._m, 0, x, out, np.empty((1, 64), np.float32))
    with pytest.raises(ValueError, match="different arrays"):
        _lowbit.gemm_glu(a._m, a._m, 0, x, out, out)
    with pytest.raises(ValueError, match="invalid|argument"):
        _lowbit.gemm_glu(a._m, a._m, 7, x, out, np.empty((1, 64), np.float32))
    with pytest.raises(TypeError):
        _lowbit.gemm_glu(None, a._m, 0, x, out, np.empty((1, 64), np.float32))
    # zero activations: nothing to do, nothing written
    _lowbit.gemm_multi((a._m,), np.ones((0, 256), np.float32), (np.empty((0, 64), np.float32),))


def test_decoder_groups_equal_separate_linears(tmp_path):
    """The fused decode path (q/k/v and gate/up/act in one call each) gives the logits of the
    one-call-per-matrix path bit for bit, prompt and generation, with a Hadamard rotation too."""
    for kw in ({}, {"rotation_block": 64}):
        path = write_synthetic_model(tmp_path / f"m{len(kw)}.gguf", "llama", "tq2_0", **kw)
        fused, plain = load_model(path, ctx=32, threads=2), load_model(path, ctx=32, threads=2)
        groups = [g for L in fused.w.layers for g in L.values() if isinstance(g, LinearGroup)]
        assert any(isinstance(g, GatedFFN) for g in groups)
        if lb.isa_active() != "scalar":  # packed weights: the fused C calls are really taken
            assert all(g._prepare(np.ones((1, g.linears[0].cols), np.float32)) for g in groups)
        for L in plain.w.layers:  # force one call per matrix, through QTensor.gemm_into
            for lin in [L[k] for k in plain.w.MATRICES]:
                lin.m = None
        toks = [5, 9, 2, 7]
        np.testing.assert_array_equal(fused.forward(toks, logits="all"), plain.forward(toks, logits="all"))
        for t in (3, 11, 4):
            np.testing.assert_array_equal(fused.forward([t]), plain.forward([t]))


def _all_native(m):
    """Whether every matrix group of m runs as liblowbit calls inside the C loop (no host call)."""
    return all(m._layer_spec(il)[k][1] is not None for il in range(m.cfg.n_layer)
               for k in ("out", "ffn_glu", "ffn_down")) and all(
        all(g[1] is not None for g in spec["gdn_in"]) if spec["kind"] == "gdn" else spec["qkv"][1] is not None
        for spec in (m._layer_spec(il) for il in range(m.cfg.n_layer)))


def _recorded(path, toks, prompt, threads):
    """Logits of the C loop with every linear run by the host (recorders in place of the weights),
    and the inputs each linear was given: the float64 reference breaks its rounding ties by them."""
    m = load_model(path, ctx=32, threads=threads)
    sinks = {}
    for lin in m.w.all_linears():
        lin.w = _Recorder(lin.w, sinks.setdefault(lin.name, []))
    out = np.vstack([m.forward(toks[:prompt], logits="all")] + [m.forward([t])[None] for t in toks[prompt:]])
    inputs = {k: np.concatenate(v) for k, v in sinks.items()}
    if "output.weight" not in inputs and "token_embd.weight" in inputs:
        inputs["output.weight"] = inputs["token_embd.weight"]  # tied head
    return out, inputs


@pytest.mark.parametrize("arch, fmt, kw", [
    ("llama", "q2_0", {}), ("bitnet-b1.58", "i2_s", {}), ("gemma3", "tq2_0", {}), ("qwen3", "pq2_0", {}),
    ("llama", "q8_0", {}), ("llama", "tq2_0", {"rotation_block": 64}), ("qwen35", "pq2_0", {}),
    ("qwen35", "q8_0", {"rotation_block": 64}), ("qwen35", "tq2_0", {"rotation_block": 64, "gdn_v_grouped": False})])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_loop_in_one_call_matches_the_reference(tmp_path, monkeypatch, arch, fmt, kw, threads):
    """The C layer loop with every product a liblowbit call inside it: the logits of the same loop
    with every product run from Python (where the float64 reference gets the inputs it breaks ties
    by) bit for bit, and the reference's, for a prompt (GEMM) and then decode steps (GEMV), with
    every norm variant (bitnet's sub norms, gemma's post norms, q/k norms, sliding windows), folded
    rotations and qwen35's gated-attention and Gated-DeltaNet blocks.  Packed under every ISA
    variant (the scalar one would keep the file layout, which is not a liblowbit matrix)."""
    monkeypatch.setattr(lb, "packing_pays_off", lambda: True)
    path = write_synthetic_model(tmp_path / "m.gguf", arch, fmt, seed=1, **kw)
    one = load_model(path, ctx=32, threads=threads)
    assert _all_native(one)
    toks = np.random.default_rng(2).integers(0, 512, 9)
    ours = np.vstack([one.forward(toks[:6], logits="all")] + [one.forward([t])[None] for t in toks[6:]])
    hosted, inputs = _recorded(path, toks, 6, threads)
    np.testing.assert_array_equal(ours, hosted)
    ref = Ref(path, model_inputs=inputs)
    if arch == "qwen35":  # the reference's recurrent state carries over between calls
        expect = np.vstack([ref.forward(toks[:6])] + [ref.forward(toks[i:i + 1]) for i in range(6, len(toks))])
    else:
        expect = ref.logits(toks)
    err = rel_err(ours, expect)
    assert err <= MAX_REL_ERR, f"{arch}/{fmt}: max relative error {err:.2e} (rounding ties broken: {ref.stats})"


def test_layer_loop_follows_swapped_matrices_and_caches(tmp_path, monkeypatch):
    """A swapped matrix makes the layer loop again (tests swap weights for recorders), and no swap
    is missed; so does a new KV cache (the loop must not write into the old one)."""
    monkeypatch.setattr(lb, "packing_pays_off", lambda: True)
    m = load_model(write_synthetic_model(tmp_path / "m.gguf", "llama", "tq2_0"), ctx=16)
    first = m._decoder()
    assert m._decoder() is first  # made once
    lin = m.w.layers[1]["ffn_down"]
    keep, lin.m = lin.m, None
    hosted = m._decoder()
    assert hosted is not first and not _all_native(m)
    lin.m = keep
    second = m._decoder()
    assert second is not hosted and _all_native(m)
    m.cache = KVCache(m.cfg, 16)
    assert m._decoder() is not second
    m.forward([1, 2])
    assert m.cache.n == 2 and np.any(m.cache.k[0][:, :2])


def test_layer_loop_refuses_bad_arguments(tmp_path, monkeypatch):
    monkeypatch.setattr(lb, "packing_pays_off", lambda: True)
    m = load_model(write_synthetic_model(tmp_path / "m.gguf", "llama", "tq2_0"), ctx=16)
    dec = m._decoder()
    cfg = m.cfg
    x = np.zeros((1, cfg.d_model), np.float32)
    cos = [np.ones((1, cfg.rope_dim // 2), np.float32)] * len(m._distinct_ropes)
    with pytest.raises(ValueError, match="rope tables"):
        dec.run(x, 0, [np.ones((1, 3), np.float32)] * len(cos), cos)
    with pytest.raises(ValueError, match="do not fit the cache"):
        dec.run(x, 16, cos, cos)
    with pytest.raises(ValueError, match="sin tables"):
        dec.run(x, 0, cos, cos + cos)
    with pytest.raises(ValueError, match="needs cos / sin table"):
        dec.run(x, 0, [], [])
    with pytest.raises(TypeError, match="float32"):
        dec.run(x.astype(np.float64), 0, cos, cos)
    config = dict(d_model=cfg.d_model, n_ff=cfg.n_ff, n_head=cfg.n_head, n_head_kv=cfg.n_head_kv,
                  head_dim=cfg.head_dim, v_head_dim=cfg.v_head_dim, ctx=16, rope_half=cfg.rope_dim // 2,
                  rope_neox=0, eps=cfg.eps, attn_scale=1.0, ffn_act=0, ssm_k_heads=0, ssm_v_heads=0,
                  ssm_state=0, ssm_conv=0)
    good = m._layer_spec(0)
    down = good["ffn_down"]
    with pytest.raises(ValueError, match="ffn_down matrix 0 is not"):
        _ops.Decoder(config, [dict(good, ffn_down=(down[0], good["out"][1], *down[2:]))])
    with pytest.raises(TypeError, match="PackedMatrix"):
        _ops.Decoder(config, [dict(good, ffn_down=(down[0], (None,), *down[2:]))])
    with pytest.raises(ValueError, match="attn_norm has shape"):
        _ops.Decoder(config, [dict(good, attn_norm=np.ones(3, np.float32))])
    with pytest.raises(ValueError, match="k_cache has shape"):
        _ops.Decoder(config, [dict(good, k_cache=m.cache.k[0][:1])])
    with pytest.raises(ValueError, match="attn_q_norm and attn_k_norm go together"):
        _ops.Decoder(config, [dict(good, q_norm=np.ones(cfg.head_dim, np.float32))])
    with pytest.raises(ValueError, match="rotation block 48 does not divide"):
        _ops.Decoder(config, [dict(good, ffn_down=(*down[:6], 48, None))])
    with pytest.raises(ValueError, match="lacks 'eps'"):
        _ops.Decoder({k: v for k, v in config.items() if k != "eps"}, [good])
    with pytest.raises(ValueError, match="at least one layer"):
        _ops.Decoder(config, [])


def test_host_errors_surface_from_the_layer_loop(tmp_path, monkeypatch):
    """An exception in a product the C loop hands back to Python is raised by forward()."""
    m = load_model(write_synthetic_model(tmp_path / "m.gguf", "llama", "tq2_0"), ctx=16)

    class Broken:
        shape, fmt = m.w.layers[0]["ffn_down"].w.shape, "tq2_0"

        def gemm_into(self, x, out, threads=None):
            raise RuntimeError("broken product")

    m.w.layers[0]["ffn_down"].w = Broken()
    with pytest.raises(RuntimeError, match="broken product"):
        m.forward([1, 2])
