"""The decoder ops of liblowbit (pylowbit._ops) against plain numpy float64, and their input checks."""

import math

import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _ops as ops

RTOL = 1e-5  # float32 results vs float64 numpy: observed <= 1e-6; sums are taken in another order
SIZES = [1, 7, 8, 9, 31, 64, 127, 2560]  # around the 8 partial sums of the C loops


def rng(seed=0):
    return np.random.default_rng(seed)


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def close(got, want, rtol=RTOL):
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
    assert err <= rtol, f"max relative error {err:.2e}"


# ---- numpy float64 references ----------------------------------------------------------------

def ref_rms_norm(x, w, eps):
    x = x.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def ref_rope(x, cos, sin, neox):
    x = x.astype(np.float64).copy()
    half = cos.shape[1]
    c, s = cos[:, None, :].astype(np.float64), sin[:, None, :].astype(np.float64)
    ia, ib = (np.arange(half), np.arange(half) + half) if neox else (np.arange(half) * 2, np.arange(half) * 2 + 1)
    a, b = x[..., ia].copy(), x[..., ib].copy()
    x[..., ia], x[..., ib] = a * c - b * s, a * s + b * c
    return x


def ref_attention(q, kc, vc, S, window, scale):
    T, H, hd = q.shape
    Hkv = kc.shape[0]
    pos = S - T
    out = np.zeros((T, H, vc.shape[2]))
    for t in range(T):
        i = pos + t
        for h in range(H):
            kh = h // (H // Hkv)
            sc = kc[kh, :S].astype(np.float64) @ q[t, h].astype(np.float64) * scale
            j = np.arange(S)
            sc[(j > i) | ((window > 0) & (i - j >= window))] = -np.inf
            p = np.exp(sc - sc.max())
            out[t, h] = (p / p.sum()) @ vc[kh, :S].astype(np.float64)
    return out


ACTS = {
    "silu": lambda g: g / (1 + np.exp(-g)),
    "relu2": lambda g: np.maximum(g, 0) ** 2,
    "gelu": lambda g: 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3))),
}


@pytest.fixture(params=lb.isa_supported())
def variant(request):
    """Each ISA variant this CPU runs (the attention loop has an AVX2 build), default restored."""
    before = lb.isa_active()
    lb.set_isa(request.param)
    yield request.param
    lb.set_isa(before)


# ---- results ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("weighted", [True, False])
def test_rms_norm(n, weighted):
    x = f32(rng(n).normal(size=(3, n)) * 5)
    w = f32(rng(1).normal(size=n)) if weighted else None
    close(ops.rms_norm(x, w, 1e-6), ref_rms_norm(x, w, 1e-6))
    y = x.copy()
    assert ops.rms_norm(y, w, 1e-6, y) is y  # in place
    close(y, ref_rms_norm(x, w, 1e-6))


def test_rms_norm_nd_and_eps():
    x = f32(rng().normal(size=(2, 4, 16)) * 1e-3)  # eps dominates: the result depends on it
    w = f32(np.ones(16))
    close(ops.rms_norm(x, w, 1e-2), ref_rms_norm(x, w, 1e-2))
    assert not np.allclose(ops.rms_norm(x, w, 1e-2), ops.rms_norm(x, w, 0.0))


@pytest.mark.parametrize("neox", [False, True])
@pytest.mark.parametrize("hd,half", [(8, 4), (64, 32), (128, 64), (80, 16), (6, 3)])
def test_rope(neox, hd, half):
    T, heads = 5, 3
    x = f32(rng(hd).normal(size=(T, heads, hd)))
    ang = rng(1).uniform(-10, 10, size=(T, half))
    cos, sin = f32(np.cos(ang)), f32(np.sin(ang))
    want = ref_rope(x, cos, sin, neox)
    got = x.copy()
    assert ops.rope(got, cos, sin, neox) is got
    close(got, want)
    if half * 2 < hd:  # the unrotated tail is untouched
        assert np.array_equal(got[..., 2 * half:], x[..., 2 * half:])
    other = ops.rope(x.copy(), cos, sin, not neox)
    assert not np.allclose(other, want)  # the two pairings really differ


@pytest.mark.parametrize("n", SIZES)
def test_softmax(n):
    x = f32(rng(n).normal(size=(4, n)) * 10)
    want = np.exp(x - x.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    got = x.copy()
    assert ops.softmax(got) is got
    close(got, want)
    x[:, 0] = -np.inf  # masked entries get exactly 0
    if n > 1:
        assert np.all(ops.softmax(x.copy())[:, 0] == 0)


@pytest.mark.parametrize("H,Hkv", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("hd,vd", [(16, 16), (9, 7), (128, 128)])
@pytest.mark.parametrize("pos,T,window", [(0, 1, 0), (0, 6, 0), (5, 1, 0), (9, 4, 0), (9, 4, 3), (12, 1, 5),
                                          (2, 3, 8)])
def test_attention(variant, H, Hkv, hd, vd, pos, T, window):
    ctx = 16
    r = rng(pos * 100 + T)
    kc, vc = f32(r.normal(size=(Hkv, ctx, hd))), f32(r.normal(size=(Hkv, ctx, vd)))
    kc[:, pos:] = np.nan  # positions not yet written must never be read
    vc[:, pos:] = np.nan
    q, k, v = f32(r.normal(size=(T, H, hd)) * 2), f32(r.normal(size=(T, Hkv, hd))), f32(r.normal(size=(T, Hkv, vd)))
    before = kc.copy()
    scale = 1 / math.sqrt(hd)
    out = ops.attention(q, k, v, kc, vc, pos, window, scale)
    assert out.shape == (T, H, vd)
    assert np.array_equal(kc[:, pos:pos + T], k.transpose(1, 0, 2))  # new keys / values stored
    assert np.array_equal(vc[:, pos:pos + T], v.transpose(1, 0, 2))
    assert np.array_equal(kc[:, :pos], before[:, :pos])
    assert np.all(np.isnan(kc[:, pos + T:]))  # nothing written past them
    close(out, ref_attention(q, kc, vc, pos + T, window, scale))


def test_attention_variants_agree(variant):
    """The same inputs through each variant and through scalar: equal to float32 rounding."""
    r = rng(9)
    kc, vc = f32(r.normal(size=(2, 300, 64))), f32(r.normal(size=(2, 300, 64)))
    q, k, v = f32(r.normal(size=(7, 8, 64))), f32(r.normal(size=(7, 2, 64))), f32(r.normal(size=(7, 2, 64)))
    got = ops.attention(q, k, v, kc.copy(), vc.copy(), 250, 0, 0.125)
    lb.set_isa("scalar")
    want = ops.attention(q, k, v, kc.copy(), vc.copy(), 250, 0, 0.125)
    close(got, want, 1e-6)


@pytest.mark.parametrize("T,H,Hkv,pos,window", [(7, 8, 2, 250, 0), (1, 20, 5, 1500, 0), (5, 6, 3, 900, 300),
                                                 (64, 4, 1, 0, 0)])
def test_attention_threads_give_the_same_bits(variant, T, H, Hkv, pos, window):
    """Large problems are split over the pool by query rows; every row is computed as on one thread."""
    r = rng(T + H + pos)
    ctx = pos + T + 3
    kc, vc = f32(r.normal(size=(Hkv, ctx, 64))), f32(r.normal(size=(Hkv, ctx, 48)))
    q, k, v = f32(r.normal(size=(T, H, 64))), f32(r.normal(size=(T, Hkv, 64))), f32(r.normal(size=(T, Hkv, 48)))
    one = ops.attention(q, k, v, kc.copy(), vc.copy(), pos, window, 0.125, threads=1)
    for threads in (2, 3, 0):
        kc2, vc2 = kc.copy(), vc.copy()
        got = ops.attention(q, k, v, kc2, vc2, pos, window, 0.125, threads=threads)
        assert np.array_equal(got, one), threads
        assert np.array_equal(kc2[:, pos:pos + T], k.transpose(1, 0, 2))
    close(one, ref_attention(q, kc2, vc2, pos + T, window, 0.125))


@pytest.mark.parametrize("hd, keys", [(8, 4), (16, 4), (48, 37)])  # 16 and 48: the grouped loops
def test_attention_exp_range_and_non_finite_inputs(variant, hd, keys):
    """Score gaps past the fast exp's -87 clamp weigh ~0; NaN or inf in q gives NaN for that head
    only (numpy's result), never a crash; the rows beside it in its key head's group are exact."""
    kc, vc = f32(np.zeros((1, keys, hd))), f32(np.zeros((1, keys, hd)))
    kc[0, 1:, 0] = -1e6  # the other positions score a million below position 0
    vc[0, :2, 0] = [1.0, 5.0]
    q, k, v = f32(np.ones((1, 4, hd))), f32(np.zeros((1, 1, hd))), f32(np.zeros((1, 1, hd)))
    k[0, 0, 0] = -2e6  # the new last position scores even lower
    q[0, 1, 3] = np.nan
    q[0, 2, 0] = np.inf
    out = ops.attention(q, k, v, kc, vc, keys - 2, 0, 1.0)
    one_hot = np.eye(1, hd)[0]
    assert np.allclose(out[0, 0], one_hot) and np.allclose(out[0, 3], one_hot)  # all on position 0
    assert np.all(np.isnan(out[0, 1])) and np.all(np.isnan(out[0, 2]))


def test_attention_window_matters():
    r = rng(3)
    kc, vc = f32(r.normal(size=(2, 32, 16))), f32(r.normal(size=(2, 32, 16)))
    q, k, v = f32(r.normal(size=(1, 4, 16))), f32(r.normal(size=(1, 2, 16))), f32(r.normal(size=(1, 2, 16)))
    full = ops.attention(q, k, v, kc.copy(), vc.copy(), 20, 0, 0.25)
    win = ops.attention(q, k, v, kc.copy(), vc.copy(), 20, 4, 0.25)
    assert not np.allclose(full, win)
    assert np.allclose(ops.attention(q, k, v, kc.copy(), vc.copy(), 20, 100, 0.25), full)  # window > S: none
    one = ops.attention(q, k, v, kc.copy(), vc.copy(), 20, 1, 0.25)  # only itself: out = its own v
    assert np.allclose(one, np.repeat(v, 2, axis=1), rtol=1e-6)


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("n", SIZES)
def test_act_mul(act, n):
    g = f32(rng(n).normal(size=n) * 4)
    g[0] = -200.0  # e^200 overflows float32: silu must still give -0, not NaN
    u = f32(rng(1).normal(size=n))
    want = ACTS[act](g.astype(np.float64)) * u
    close(ops.act_mul(act, g, u), want)
    o = g.copy()
    ops.act_mul(act, o, u, o)
    close(o, want)


def test_silu_elementwise():
    """SiLU value by value (not relative to the largest): both signs, the e^-87 floor of its exp,
    zeros, huge and non-finite gates."""
    g = np.concatenate([np.linspace(-120, 120, 24001), [0.0, -0.0, 1e-30, -1e-30, 87.0, -87.0, -87.5,
                                                        1e30, -1e30, np.inf, np.nan, -np.nan]])
    g = f32(g)
    got = ops.act_mul("silu", g, f32(np.ones_like(g)))
    g64 = g.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = g64 / (1 + np.exp(-g64))
    fin = np.isfinite(want)
    assert np.all(np.abs(got[fin] - want[fin]) <= 1e-6 * np.abs(want[fin]) + 1e-35)
    assert np.all(np.signbit(got[g < -87]))  # -0 or a tiny negative, never positive
    assert got[g == 1e30][0] == np.float32(1e30) and got[g == -1e30][0] == 0
    assert np.isposinf(got[np.isposinf(g)]).all() and np.isnan(got[np.isnan(g)]).all()


@pytest.mark.parametrize("act", ["silu", "gelu"])
def test_sigmoid_acts_equal_across_variants_and_float64(act):
    """SiLU and GELU (x sigmoid(2u)) value by value against float64, and every variant's bits equal
    the scalar build's, the 8-wide loop and its tail alike (n not a multiple of 8)."""
    g = f32(np.concatenate([np.linspace(-60, 60, 12001), [0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30]]))
    u = f32(rng(3).normal(size=g.size))
    before = lb.isa_active()
    try:
        outs = {}
        for v in lb.isa_supported():
            lb.set_isa(v)
            outs[v] = ops.act_mul(act, g, u)
    finally:
        lb.set_isa(before)
    for v, got in outs.items():
        np.testing.assert_array_equal(got, outs["scalar"], err_msg=v)
    g64 = g.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # GELU as x / (1 + e^-2u): no cancellation
        z = 2 * math.sqrt(2 / math.pi) * (g64 + 0.044715 * g64 ** 3) if act == "gelu" else g64
        want = g64 / (1 + np.exp(-z)) * u
    got = outs["scalar"]
    # relative 1e-6 where the exp is accurate; absolute below (values under 1e-20)
    tol = np.where(np.abs(g64) < 4, 1e-6, 1e-5) * np.abs(want) + 1e-24 * np.abs(u)
    assert np.all(np.abs(got - want) <= tol)


def test_add():
    a, b = f32(rng(1).normal(size=(3, 37))), f32(rng(2).normal(size=(3, 37)))
    assert np.array_equal(ops.add(a, b), a + b)
    a0 = a.copy()
    assert ops.add(a, b, a) is a  # in place
    assert np.array_equal(a, a0 + b)
    c = np.zeros(5, np.float32)
    assert np.array_equal(ops.add(c + 1, c + 2), np.full(5, 3, np.float32))


# ---- bad input: a clear exception, never a crash ---------------------------------------------

def test_bad_inputs():
    x = f32(np.ones((2, 8)))
    with pytest.raises(TypeError, match="float32"):
        ops.rms_norm(x.astype(np.float64), None, 1e-6)
    with pytest.raises(TypeError, match="numpy"):
        ops.rms_norm([[1.0, 2.0]], None, 1e-6)
    with pytest.raises(ValueError, match="C-contiguous"):
        ops.rms_norm(f32(np.ones((8, 2))).T, None, 1e-6)
    with pytest.raises(ValueError, match="aligned"):
        ops.rms_norm(np.frombuffer(bytearray(33), np.float32, 8, offset=1), None, 1e-6)
    with pytest.raises(ValueError, match=r"w must have shape \(8,\)"):
        ops.rms_norm(x, f32(np.ones(7)), 1e-6)
    with pytest.raises(ValueError, match="eps"):
        ops.rms_norm(x, None, -1.0)
    with pytest.raises(ValueError, match="non-empty"):
        ops.rms_norm(f32(np.ones((2, 0))), None, 1e-6)
    with pytest.raises(ValueError, match="out must have shape"):
        ops.rms_norm(x, None, 1e-6, f32(np.ones(16)))
    ro = x.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        ops.rms_norm(x, None, 1e-6, ro)
    with pytest.raises(ValueError, match="writable"):
        ops.rope(ro.reshape(1, 2, 8), f32(np.ones((1, 2))), f32(np.ones((1, 2))), True)
    with pytest.raises(ValueError, match="more than the head dim"):
        ops.rope(f32(np.ones((1, 2, 4))), f32(np.ones((1, 3))), f32(np.ones((1, 3))), True)
    with pytest.raises(ValueError, match="cos and sin"):
        ops.rope(f32(np.ones((2, 2, 4))), f32(np.ones((1, 2))), f32(np.ones((1, 2))), True)
    with pytest.raises(ValueError, match="3 dimensions"):
        ops.rope(f32(np.ones((2, 8))), f32(np.ones((2, 2))), f32(np.ones((2, 2))), True)
    with pytest.raises(ValueError, match="only -inf"):
        ops.softmax(f32(np.full((1, 3), -np.inf)))
    with pytest.raises(ValueError, match="unknown activation"):
        ops.act_mul("tanh", x, x)
    with pytest.raises(ValueError, match="differ in shape"):
        ops.act_mul("silu", x, f32(np.ones(16)))
    with pytest.raises(ValueError, match="differ in shape"):
        ops.add(x, f32(np.ones((8, 2))))


def test_attention_bad_inputs():
    q, k, v = f32(np.ones((2, 4, 8))), f32(np.ones((2, 2, 8))), f32(np.ones((2, 2, 8)))
    kc, vc = f32(np.zeros((2, 10, 8))), f32(np.zeros((2, 10, 8)))
    ok = ops.attention(q, k, v, kc, vc, 8, 0, 1.0)  # the last two positions: fits
    assert ok.shape == (2, 4, 8)
    with pytest.raises(ValueError, match="do not fit the cache"):
        ops.attention(q, k, v, kc, vc, 9, 0, 1.0)
    with pytest.raises(ValueError, match="do not fit the cache"):
        ops.attention(q, k, v, kc, vc, -1, 0, 1.0)
    with pytest.raises(ValueError, match="multiple of 3 KV heads"):
        ops.attention(q, f32(np.ones((2, 3, 8))), f32(np.ones((2, 3, 8))), f32(np.zeros((3, 10, 8))),
                      f32(np.zeros((3, 10, 8))), 0, 0, 1.0)
    with pytest.raises(ValueError, match="k must have shape"):
        ops.attention(q, f32(np.ones((2, 2, 4))), v, kc, vc, 0, 0, 1.0)
    with pytest.raises(ValueError, match="v must have shape"):
        ops.attention(q, k, f32(np.ones((1, 2, 8))), kc, vc, 0, 0, 1.0)
    with pytest.raises(ValueError, match="k_cache must have shape"):
        ops.attention(q, k, v, f32(np.zeros((2, 10, 4))), vc, 0, 0, 1.0)
    with pytest.raises(ValueError, match="v_cache must have shape"):
        ops.attention(q, k, v, kc, f32(np.zeros((2, 9, 8))), 0, 0, 1.0)
    with pytest.raises(ValueError, match="window"):
        ops.attention(q, k, v, kc, vc, 0, -1, 1.0)
    with pytest.raises(ValueError, match="at least one query"):
        ops.attention(q[:0], k[:0], v[:0], kc, vc, 0, 0, 1.0)
    with pytest.raises(ValueError, match="out must have shape"):
        ops.attention(q, k, v, kc, vc, 0, 0, 1.0, out=f32(np.ones((2, 4, 7))))
    with pytest.raises(TypeError, match="float32"):
        ops.attention(q, k, v, kc.astype(np.float64), vc, 0, 0, 1.0)


def test_silu_same_bits_in_every_variant(variant):
    """The AVX2 SiLU (8 lanes, tail in the baseline loop) gives the baseline build's bits."""
    g = f32(np.concatenate([rng(3).normal(size=1000) * 30, [-87.0, -87.5, 87.5, -1e30, np.inf, -0.0]]))
    u = f32(rng(4).normal(size=g.size))
    got = ops.act_mul("silu", g, u)
    lb.set_isa("scalar")
    want = ops.act_mul("silu", g, u)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# ---- the decoder's matrix groups writing into its workspace (pylowbit.model.weights) ------------

@pytest.mark.parametrize("packed", [True, False])
def test_groups_write_into_given_outputs(packed):
    """Linear / LinearGroup / GatedFFN with out=: the caller's arrays are filled, and equal the
    results of calls without out (packed: one C call for the group; not packed: one call each)."""
    from pylowbit.model.weights import GatedFFN, Linear, LinearGroup

    r = rng(7)

    def lin(rows):
        w = lb.quantize(f32(r.normal(size=(rows, 256))), "tq2_0")
        return Linear("w", w.pack() if packed else w)

    x = f32(r.normal(size=(5, 256)))
    q, k = lin(96), lin(32)
    group, glu = LinearGroup(q, k), GatedFFN(lin(64), lin(64), "silu")
    outs = (np.full((5, 96), np.nan, np.float32), np.full((5, 32), np.nan, np.float32))
    got = group(x, 1, outs)
    assert all(g is o for g, o in zip(got, outs))
    for g, want in zip(got, group(x, 1)):
        np.testing.assert_array_equal(g, want)
    gu = (np.full((5, 64), np.nan, np.float32), np.full((5, 64), np.nan, np.float32))
    m = glu(x, 1, gu)
    assert m is gu[0]
    np.testing.assert_array_equal(m, glu(x, 1))
    o = np.full((5, 96), np.nan, np.float32)
    assert q(x, 1, o) is o
    np.testing.assert_array_equal(o, q(x, 1))
