"""The Gated-DeltaNet ops of liblowbit (pylowbit._ops: ssm_conv, l2_norm, gdn_gates,
gated_delta_rule, gated_rms_norm_silu, sigmoid_mul) against numpy float64 written from the equations
of QWEN35.md section 3.4, every ISA variant bit-identical to scalar, and their input checks."""

import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _ops as ops

RTOL = 1e-5
D_SIZES = [1, 7, 15, 16, 17, 33, 128]  # around the 16 partial sums and the vector tails
SIMD = [isa for isa in lb.isa_supported() if isa != "scalar"]


def rng(seed=0):
    return np.random.default_rng(seed)


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def rel_err(got, want):
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)


def close(got, want, rtol=RTOL):
    err = rel_err(got, want)
    assert err <= rtol, f"max relative error {err:.2e}"


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def each_isa(isa, fn):
    """fn() under scalar and under every SIMD variant; asserts identical bits, returns scalar's."""
    isa("scalar")
    want = fn()
    for name in SIMD:
        isa(name)
        got = fn()
        for w, g in zip(want, got):
            assert np.array_equal(w.view(np.uint32), g.view(np.uint32)), f"{name} differs from scalar"
    return want


# ---- numpy float64 references, from the equations ------------------------------------------

def ref_ssm_conv(x, w, state):
    T, C = x.shape
    K = w.shape[1]
    win = np.concatenate([state.T.astype(np.float64), x.astype(np.float64)], axis=0)  # (K-1+T, C)
    u = np.zeros((T, C))
    for t in range(T):
        for i in range(K):
            u[t] += w[:, i].astype(np.float64) * win[t + i]
    return silu(u), win[T:].T.copy()


def ref_l2_norm(x, eps):
    x = x.astype(np.float64)
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def ref_gates(b, a, ssm_a, dt_bias):
    x = a.astype(np.float64) + dt_bias
    sp = np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))
    return sigmoid(b.astype(np.float64)), ssm_a * sp


def ref_delta_rule(q, k, v, g, beta, state):
    """Token by token in float64; state[h, j, i] = S_h[i][j]."""
    q, k, v, g, beta = (a.astype(np.float64) for a in (q, k, v, g, beta))
    S = state.astype(np.float64).transpose(0, 2, 1).copy()  # S[h, i, j]
    T, Hk, d = q.shape
    Hv = v.shape[1]
    out = np.zeros((T, Hv, d))
    for t in range(T):
        for h in range(Hv):
            kk, qq = k[t, h % Hk], q[t, h % Hk]
            S[h] *= np.exp(g[t, h])
            e = S[h].T @ kk
            delta = beta[t, h] * (v[t, h] - e)
            S[h] += np.outer(kk, delta)
            out[t, h] = (S[h].T @ qq) / np.sqrt(d)
    return out, S.transpose(0, 2, 1).copy()


def gdn_inputs(T, Hk, Hv, d, seed=0, state_scale=0.1):
    r = rng(seed)
    q = ref_l2_norm(r.standard_normal((T, Hk, d)), 1e-6)
    k = ref_l2_norm(r.standard_normal((T, Hk, d)), 1e-6)
    v = r.standard_normal((T, Hv, d))
    g = -np.abs(r.standard_normal((T, Hv))) * 0.5  # log-decays <= 0
    beta = sigmoid(r.standard_normal((T, Hv)))
    state = r.standard_normal((Hv, d, d)) * state_scale
    return [f32(a) for a in (q, k, v, g, beta, state)]


# ---- results -----------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 2, 3, 5, 17])
@pytest.mark.parametrize("C", [1, 15, 64, 65, 200])
def test_ssm_conv_matches_the_window_equation_and_keeps_the_last_inputs(isa, T, C):
    K = 4
    r = rng(T * 1000 + C)
    x, w, state = f32(r.standard_normal((T, C))), f32(r.standard_normal((C, K))), f32(r.standard_normal((C, K - 1)))
    want_out, want_state = ref_ssm_conv(x, w, state)

    def run():
        s = state.copy()
        return ops.ssm_conv(x, w, s), s

    out, new_state = each_isa(isa, run)
    close(out, want_out)
    np.testing.assert_array_equal(new_state, f32(want_state))  # copies of inputs: exact


@pytest.mark.parametrize("K", [1, 2, 5])
def test_ssm_conv_other_widths_and_a_split_prompt_equal_one_call(K):
    r = rng(K)
    T, C = 9, 37
    x, w, state = f32(r.standard_normal((T, C))), f32(r.standard_normal((C, K))), f32(r.standard_normal((C, K - 1)))
    want_out, want_state = ref_ssm_conv(x, w, state)
    s_one = state.copy()
    close(ops.ssm_conv(x, w, s_one), want_out)
    s_split = state.copy()
    parts = [ops.ssm_conv(f32(x[a:b]), w, s_split) for a, b in ((0, 1), (1, 3), (3, 9))]
    np.testing.assert_array_equal(np.concatenate(parts), ops.ssm_conv(x, w, state.copy()))
    np.testing.assert_array_equal(s_split, s_one)
    np.testing.assert_array_equal(s_one, f32(want_state))


@pytest.mark.parametrize("d", D_SIZES)
def test_l2_norm_2d_and_3d_rows(isa, d):
    r = rng(d)
    x3 = f32(r.standard_normal((3, 5, d)) * 3)
    eps = 1e-6
    out3, out2 = each_isa(isa, lambda: (ops.l2_norm(x3, eps), ops.l2_norm(f32(x3.reshape(15, d)), eps)))
    close(out3, ref_l2_norm(x3, eps))
    np.testing.assert_array_equal(out2.reshape(x3.shape), out3)
    assert out3.shape == x3.shape


def test_l2_norm_of_a_zero_row_is_zero_and_eps_counts_inside_the_root():
    x = np.zeros((2, 8), np.float32)
    x[1, 0] = 1e-3
    y = ops.l2_norm(x, 1e-6)
    assert np.all(y[0] == 0)
    close(y[1], ref_l2_norm(x[1], 1e-6))  # 1e-3 / sqrt(1e-6 + 1e-6), not 1
    assert abs(y[1, 0] - 1 / np.sqrt(2)) < 1e-5


def test_gdn_gates_match_sigmoid_and_softplus_with_the_cut_at_20(isa):
    r = rng(3)
    T, Hv = 7, 48
    b = f32(r.standard_normal((T, Hv)) * 8)
    a = f32(r.standard_normal((T, Hv)) * 15)
    a[0, :4] = [19.5, 20.5, -100.0, 100.0]
    ssm_a = f32(-np.exp(r.standard_normal(Hv)))
    dt = f32(r.standard_normal(Hv))
    beta, g = each_isa(isa, lambda: ops.gdn_gates(b, a, ssm_a, dt))
    want_beta, want_g = ref_gates(b, a, ssm_a, dt)
    close(beta, want_beta)
    close(g, want_g)
    assert np.all(g <= 0) and np.all((beta >= 0) & (beta <= 1))
    x = a[0, 1] + dt[1]
    if x > 20:  # above the cut g is ssm_a * x exactly
        assert g[0, 1] == np.float32(ssm_a[1] * x)


def check_delta_rule_in_every_isa(isa, inputs, chunked):
    """gated_delta_rule of inputs (q, k, v, g, beta, state), chunked or not, in every ISA variant
    against the float64 equations: its output and the state it leaves."""
    want_out, want_state = ref_delta_rule(*inputs)

    def run():
        state = inputs[5].copy()
        return ops.gated_delta_rule(*inputs[:5], state, chunked=chunked), state

    out, state = each_isa(isa, run)
    close(out, want_out)
    close(state, want_state)


@pytest.mark.parametrize("T,Hk,Hv,d", [(1, 1, 1, 1), (3, 2, 6, 7), (2, 1, 3, 16), (4, 2, 4, 17), (2, 3, 6, 33),
                                       (2, 2, 4, 128)])
def test_gated_delta_rule_token_by_token_matches_the_equations(isa, T, Hk, Hv, d):
    check_delta_rule_in_every_isa(isa, gdn_inputs(T, Hk, Hv, d, seed=T + d), chunked=False)


def test_gated_delta_rule_tiles_k_heads_over_v_heads():
    """V head h reads K head h % Hk: swapping the two K heads swaps V heads 0 and 1's outputs."""
    q, k, v, g, beta, state = gdn_inputs(1, 2, 4, 8, seed=5)
    v[:, 1] = v[:, 0]
    g[:, 1], beta[:, 1], state[1] = g[:, 0], beta[:, 0], state[0]
    out = ops.gated_delta_rule(q, k, v, g, beta, state.copy())
    out_sw = ops.gated_delta_rule(f32(q[:, ::-1]), f32(k[:, ::-1]), v, g, beta, state.copy())
    np.testing.assert_array_equal(out[:, 0], out_sw[:, 1])
    assert not np.allclose(out[:, 0], out[:, 1])


def test_gated_delta_rule_from_zero_state_stores_beta_v_k_outer():
    q, k, v, g, beta, _ = gdn_inputs(1, 1, 2, 8, seed=6)
    state = np.zeros((2, 8, 8), np.float32)
    ops.gated_delta_rule(q, k, v, g, beta, state)
    for h in range(2):  # state[h, j, i] = beta v_j k_i
        close(state[h], beta[0, h] * np.outer(v[0, h], k[0, 0]).astype(np.float64))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gated_delta_rule_same_bits_for_any_thread_count(threads):
    inputs = gdn_inputs(3, 2, 10, 64, seed=7)
    results = []
    for th in (1, threads):
        state = inputs[5].copy()
        results.append((ops.gated_delta_rule(*inputs[:5], state, threads=th), state))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_gated_delta_rule_split_into_calls_equals_one_call():
    inputs = gdn_inputs(5, 2, 4, 16, seed=8)
    s_one = inputs[5].copy()
    out_one = ops.gated_delta_rule(*inputs[:5], s_one, chunked=False)
    s_split = inputs[5].copy()
    outs = [ops.gated_delta_rule(*(f32(a[t0:t1]) for a in inputs[:5]), s_split, chunked=False)
            for t0, t1 in ((0, 2), (2, 5))]
    np.testing.assert_array_equal(np.concatenate(outs), out_one)
    np.testing.assert_array_equal(s_split, s_one)


@pytest.mark.parametrize("T", [1, 63, 64, 65, 130])
def test_chunked_delta_rule_equals_the_sequential_one(T):
    inputs = gdn_inputs(T, 2, 4, 32, seed=T, state_scale=0.3)
    want_out, want_state = ref_delta_rule(*inputs)
    seq_state, ch_state = inputs[5].copy(), inputs[5].copy()
    seq = ops.gated_delta_rule(*inputs[:5], seq_state, chunked=False)
    ch = ops.gated_delta_rule(*inputs[:5], ch_state, chunked=True, threads=2)
    for got, want in ((seq, want_out), (ch, want_out), (ch, seq), (seq_state, want_state),
                      (ch_state, want_state), (ch_state, seq_state)):
        close(got, want)


def test_chunked_delta_rule_with_strong_decay_and_every_isa(isa):
    """g down to -8 a token: the chunk's cumulative decay underflows e^gam to 0 within a block."""
    T, Hk, Hv, d = 70, 1, 2, 17
    inputs = gdn_inputs(T, Hk, Hv, d, seed=9)
    inputs[3] = f32(-rng(10).uniform(0, 8, (T, Hv)))
    check_delta_rule_in_every_isa(isa, inputs, chunked=True)


@pytest.mark.parametrize("d", D_SIZES)
def test_gated_rms_norm_silu_equals_rms_norm_then_act_mul_bit_for_bit(isa, d):
    r = rng(d)
    o, z = f32(r.standard_normal((3, 4, d)) * 2), f32(r.standard_normal((3, 4, d)) * 4)
    w, eps = f32(1 + r.standard_normal(d) * 0.1), 1e-6
    out, = each_isa(isa, lambda: (ops.gated_rms_norm_silu(o, w, z, eps),))
    two_calls = ops.act_mul("silu", z, ops.rms_norm(o, w, eps))
    np.testing.assert_array_equal(out, two_calls)
    o64 = o.astype(np.float64)
    want = o64 / np.sqrt(np.mean(o64 * o64, axis=-1, keepdims=True) + eps) * w * silu(z.astype(np.float64))
    close(out, want)
    close(ops.gated_rms_norm_silu(f32(o.reshape(12, d)), w, f32(z.reshape(12, d)), eps), want.reshape(12, d))


@pytest.mark.parametrize("n", [1, 7, 16, 17, 100])
def test_sigmoid_mul_matches_numpy_and_survives_huge_gates(isa, n):
    r = rng(n)
    x, gate = f32(r.standard_normal(n)), f32(r.standard_normal(n) * 10)
    gate[0] = -1e30
    if n > 1:
        gate[1] = 1e30
    out, = each_isa(isa, lambda: (ops.sigmoid_mul(x, gate),))
    want = x * sigmoid(np.clip(gate.astype(np.float64), -700, 700))
    assert np.all(np.abs(out - want) <= 1e-6 * (1 + np.abs(want)))
    assert out[0] == 0 and (n == 1 or out[1] == x[1])


def test_elementwise_ops_work_in_place():
    r = rng(11)
    x, gate = f32(r.standard_normal((4, 16))), f32(r.standard_normal((4, 16)))
    want = ops.sigmoid_mul(x, gate)
    y = x.copy()
    assert ops.sigmoid_mul(y, gate, out=y) is y
    np.testing.assert_array_equal(y, want)
    w = f32(np.ones(16))
    want = ops.gated_rms_norm_silu(x, w, gate, 1e-6)
    z = gate.copy()
    ops.gated_rms_norm_silu(x, w, z, 1e-6, out=z)
    np.testing.assert_array_equal(z, want)
    want = ops.l2_norm(x, 1e-6)
    ops.l2_norm(x, 1e-6, out=x)
    np.testing.assert_array_equal(x, want)


def test_zero_tokens_leave_every_state_unchanged():
    inputs = gdn_inputs(1, 2, 4, 8)
    q, k, v, g, beta = (f32(a[:0]) for a in inputs[:5])
    state = inputs[5]
    before = state.copy()
    out = ops.gated_delta_rule(q, k, v, g, beta, state, threads=0)
    assert out.shape == (0, 4, 8)
    np.testing.assert_array_equal(state, before)
    conv_state = f32(rng(12).standard_normal((5, 3)))
    kept = conv_state.copy()
    assert ops.ssm_conv(np.zeros((0, 5), np.float32), f32(np.ones((5, 4))), conv_state).shape == (0, 5)
    np.testing.assert_array_equal(conv_state, kept)


# ---- input checks ---------------------------------------------------------------------------

def test_bad_inputs_raise_naming_the_argument():
    q, k, v, g, beta, state = gdn_inputs(2, 2, 4, 8)
    with pytest.raises(TypeError, match="q must be float32"):
        ops.gated_delta_rule(q.astype(np.float64), k, v, g, beta, state)
    with pytest.raises(ValueError, match="state must be writable"):
        ro = state.copy()
        ro.flags.writeable = False
        ops.gated_delta_rule(q, k, v, g, beta, ro)
    with pytest.raises(ValueError, match="not a multiple of 3 K heads"):
        ops.gated_delta_rule(f32(np.zeros((2, 3, 8))), f32(np.zeros((2, 3, 8))), v, g, beta, state)
    with pytest.raises(ValueError, match="state must have shape"):
        ops.gated_delta_rule(q, k, v, g, beta, f32(state[:, :4]))
    with pytest.raises(ValueError, match="g must have shape"):
        ops.gated_delta_rule(q, k, v, f32(g[:1]), beta, state)
    with pytest.raises(ValueError, match="k must have the shape of q"):
        ops.gated_delta_rule(q, f32(k[:, :1]), v, g, beta, state)
    with pytest.raises(ValueError, match="out must not share memory with state"):
        ops.gated_delta_rule(q, k, v, g, beta, state, out=state.reshape(-1)[:2 * 4 * 8].reshape(2, 4, 8))
    with pytest.raises(TypeError, match="chunked must be None, True or False"):
        ops.gated_delta_rule(q, k, v, g, beta, state, chunked=1)
    x, w, s = f32(np.zeros((3, 5))), f32(np.zeros((5, 4))), f32(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="state must have shape"):
        ops.ssm_conv(x, w, f32(np.zeros((5, 4))))
    with pytest.raises(ValueError, match="w must have shape"):
        ops.ssm_conv(x, f32(np.zeros((4, 4))), s)
    with pytest.raises(ValueError, match="out must not share memory with x"):
        ops.ssm_conv(x, w, s, out=x)
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        ops.ssm_conv(np.zeros((5, 3), np.float32).T, w, s)
    with pytest.raises(ValueError, match="eps must be >= 0"):
        ops.l2_norm(x, -1.0)
    with pytest.raises(ValueError, match="w must have shape"):
        ops.gated_rms_norm_silu(x, f32(np.ones(4)), x, 1e-6)
    with pytest.raises(ValueError, match="differ in shape"):
        ops.sigmoid_mul(x, f32(np.zeros((3, 4))))
    with pytest.raises(ValueError, match="ssm_a must have shape"):
        ops.gdn_gates(x, x, f32(np.zeros(4)), f32(np.zeros(5)))
    with pytest.raises(ValueError, match="beta_out and g_out must not share memory"):
        buf = f32(np.zeros((3, 5)))
        ops.gdn_gates(x, x, f32(np.zeros(5)), f32(np.zeros(5)), beta_out=buf, g_out=buf)
