"""qwen35's sequence state in the decoder: the recurrent state's lifecycle (reset, no rewinding,
the context limit), the prompt path against token-by-token decoding, every ISA variant, and the
commands that show the state's size."""

import numpy as np
import pytest

import pylowbit as lb
from pylowbit.model import Model, ModelError
from pylowbit.model.synthetic import write_synthetic_model
from test_model import rel_err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen35rt")
    return {fmt: write_synthetic_model(d / f"{fmt}.gguf", arch="qwen35", fmt=fmt, seed=4)
            for fmt in ("f32", "tq2_0", "ptq1_0")}


def _tokens(n, seed=5):
    return np.random.default_rng(seed).integers(0, 512, n)


@pytest.mark.parametrize("fmt", ["f32", "tq2_0", "ptq1_0"])
@pytest.mark.parametrize("T", [63, 64, 65, 130])
def test_prompt_path_equals_token_by_token(files, fmt, T):
    """One T-token prompt call (GEMM, the batched conv and delta rule) against T one-token calls."""
    tokens = _tokens(T)
    m = Model(files[fmt], ctx=256, notice=None)
    whole = m.forward(tokens, logits="all")
    m.reset()
    steps = np.vstack([m.forward([t])[None] for t in tokens])
    assert rel_err(whole, steps) <= 1e-5


def test_reset_starts_a_new_sequence(files):
    m = Model(files["tq2_0"], ctx=64, notice=None)
    a = m.forward(_tokens(20), logits="all")
    assert np.abs(m.state.ssm[0]).max() > 0 and np.abs(m.state.conv[0]).max() > 0
    m.reset()
    assert not m.state.ssm[0].any() and not m.state.conv[0].any() and m.cache.n == 0
    np.testing.assert_array_equal(m.forward(_tokens(20), logits="all"), a)
    b = m.forward(_tokens(20), pos=0, logits="all")  # position 0 is a new sequence too
    np.testing.assert_array_equal(b, a)


def test_the_state_cannot_be_rewound(files):
    m = Model(files["tq2_0"], ctx=64, notice=None)
    m.forward(_tokens(10))
    with pytest.raises(ModelError, match="recurrent state cannot go back to position 4 from 10"):
        m.forward([1], pos=4)
    m.forward([1], pos=10)  # the next position is fine


def test_context_limit(files):
    m = Model(files["tq2_0"], ctx=16, notice=None)
    m.forward(_tokens(16))
    with pytest.raises(ModelError, match="context full"):
        m.forward([1])


def test_state_sizes(files):
    m = Model(files["tq2_0"], ctx=32, notice=None)
    s = m.cfg.ssm
    n_gdn = sum(m.cfg.recurrent)
    assert m.state.nbytes == 4 * n_gdn * (s.conv_channels * (s.conv_kernel - 1) + s.n_v_heads * s.state_size ** 2)
    assert m.cache.nbytes == 4 * 2 * (m.cfg.n_layer - n_gdn) * m.cfg.n_head_kv * 32 * m.cfg.head_dim
    assert "recurrent state" in m.memory_summary() and "KV cache" in m.memory_summary()


def test_every_variant_computes_the_same_logits(files, isa):
    """Kernels and GDN ops are bit-identical to scalar in every variant; the F32 alpha / beta
    GEMV sums in each variant's own order (tests/test_kernels.py), so logits agree to float noise."""
    tokens = _tokens(70)
    runs = {}
    for variant in lb.isa_supported():
        isa(variant)
        m = Model(files["ptq1_0"], ctx=80, notice=None)
        runs[variant] = np.vstack([m.forward(tokens, logits="all")] + [m.forward([t])[None] for t in (3, 5)])
    ref = runs.pop("scalar")
    assert runs
    for variant, logits in runs.items():
        assert rel_err(logits, ref) <= 1e-5, variant


def test_run_and_info_show_the_state(files, capsys):
    from pylowbit.cli import main

    assert main(["run", "-m", str(files["tq2_0"]), "-p", "The capital of France", "-n", "4"]) == 0
    err = capsys.readouterr().err
    assert "recurrent state" in err and "generation: " in err
    assert main(["info", "-m", str(files["tq2_0"])]) == 0
    out = capsys.readouterr().out
    assert "qwen35, 4 layers" in out and "recurrent state" in out and "RARA" in out


def test_decoder_timing_counts_the_recurrent_part_and_changes_no_result(files):
    """The decoder's benchmark timer (_ops.decoder_timing): the recurrent part's time is positive
    and below the run's, is reset by each read, stops when disabled, and leaves the logits as they
    were."""
    from pylowbit import _ops

    m = Model(files["tq2_0"], ctx=64, notice=None)
    plain = m.forward(_tokens(12), logits="all")
    _ops.decoder_timing(True)
    m.reset()
    timed = m.forward(_tokens(12), logits="all")
    rec, total = _ops.decoder_timing(False)
    np.testing.assert_array_equal(timed, plain)
    assert 0 < rec < total
    m.reset()
    m.forward(_tokens(12), logits="all")
    assert _ops.decoder_timing(False) == (0.0, 0.0)  # disabled: nothing counted
