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


@pytest.mark.parametrize("arch, fmt", [("llama", "q2_0"), ("bitnet-b1.58", "i2_s"), ("gemma3", "tq2_0"),
                                       ("qwen3", "pq2_0"), ("llama", "q8_0")])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_loop_in_one_call_equals_python_loop(tmp_path, monkeypatch, arch, fmt, threads):
    """_ops.DecoderLayers runs every layer in one call: the logits of the op-by-op Python loop bit
    for bit, for a prompt (GEMM) and then decode steps (GEMV), with every norm variant (bitnet's sub
    norms, gemma's post norms, q/k norms, sliding windows).  Packed under every ISA variant (the
    scalar one would keep the file layout, which the one-call loop does not take)."""
    monkeypatch.setattr(lb, "packing_pays_off", lambda: True)
    path = write_synthetic_model(tmp_path / "m.gguf", arch, fmt)
    one, loop = load_model(path, ctx=32, threads=threads), load_model(path, ctx=32, threads=threads)
    assert one._layer_loop() is not None
    loop._layer_loop = lambda: None  # the Python loop, op by op
    toks = [5, 9, 2, 7, 3, 1]
    np.testing.assert_array_equal(one.forward(toks, logits="all"), loop.forward(toks, logits="all"))
    for t in (3, 11, 4):
        np.testing.assert_array_equal(one.forward([t]), loop.forward([t]))
    np.testing.assert_array_equal(one.cache.k[-1], loop.cache.k[-1])


def test_layer_loop_only_where_it_applies(tmp_path, monkeypatch):
    """A folded rotation keeps the Python loop; a swapped matrix makes the one-call loop again
    (tests swap weights for recorders), and no swap is missed."""
    monkeypatch.setattr(lb, "packing_pays_off", lambda: True)
    rotated = load_model(write_synthetic_model(tmp_path / "r.gguf", "llama", "tq2_0", rotation_block=64), ctx=16)
    assert rotated._layer_loop() is None
    m = load_model(write_synthetic_model(tmp_path / "m.gguf", "llama", "tq2_0"), ctx=16)
    first = m._layer_loop()
    assert first is not None and m._layer_loop() is first  # made once
    lin = m.w.layers[1]["ffn_down"]
    keep, lin.m = lin.m, None
    assert m._layer_loop() is None
    lin.m = keep
    second = m._layer_loop()
    assert second is not None and second is not first
    m.cache = KVCache(m.cfg, 16)  # a new cache: the loop must not write into the old one
    assert m._layer_loop() is not second
    m.forward([1, 2])
    assert m.cache.n == 2 and np.any(m.cache.k[0][:, :2])


def test_layer_loop_refuses_bad_arguments(tmp_path, monkeypatch):
    monkeypatch.setattr(lb, "packing_pays_off", lambda: True)
    m = load_model(write_synthetic_model(tmp_path / "m.gguf", "llama", "tq2_0"), ctx=16)
    layers = m._layer_loop()
    cfg = m.cfg
    T = 1
    bufs = (np.empty((T, cfg.d_model), np.float32), *m.w.workspace(T)["attn_in"],
            np.empty((T, cfg.n_head * cfg.v_head_dim), np.float32), *m.w.workspace(T)["ffn_glu"][:1],
            *m.w.workspace(T)["ffn_glu"])
    x = np.zeros((T, cfg.d_model), np.float32)
    cos = [np.ones((T, cfg.rope_dim // 2), np.float32)] * cfg.n_layer
    with pytest.raises(ValueError, match=r"bufs\[5\]"):
        layers.run(x, 0, cos, cos, bufs)
    with pytest.raises(ValueError, match="do not fit the cache"):
        layers.run(x, 16, cos, cos, bufs)
    with pytest.raises(ValueError, match="cos / sin"):
        layers.run(x, 0, cos[:1], cos, bufs)
    with pytest.raises(TypeError, match="float32"):
        layers.run(x.astype(np.float64), 0, cos, cos, bufs)
    L = m.w.layers[0]
    mats = tuple(L[k].m for k in _ops.MATRIX_NAMES)
    norms = tuple(L.get(k) for k in _ops.NORM_NAMES)
    good = (mats, norms, m.cache.k[0], m.cache.v[0], 0)
    args = (cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.v_head_dim, cfg.eps, 1.0, False, 0)
    with pytest.raises(ValueError, match="matrix shapes"):
        _ops.DecoderLayers([(mats[::-1], *good[1:])], *args)
    with pytest.raises(TypeError, match="PackedMatrix"):
        _ops.DecoderLayers([((None,) * 7, *good[1:])], *args)
    with pytest.raises(ValueError, match="attn_norm"):
        _ops.DecoderLayers([(mats, (np.ones(3, np.float32),) + norms[1:], *good[2:])], *args)
    with pytest.raises(ValueError, match="caches"):
        _ops.DecoderLayers([(mats, norms, m.cache.v[0][:1], m.cache.v[0], 0)], *args)
    with pytest.raises(ValueError, match="at least one layer"):
        _ops.DecoderLayers([], *args)
