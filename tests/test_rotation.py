"""Hadamard rotation: the transform itself, a folded rotation giving the plain model's logits (and
the float64 reference's, reading the metadata independently), corrupt prism.hadamard.* refused."""
import numpy as np
import pytest

from model_reference import Ref
from pylowbit.gguf import GGUFFile, MetaValue
from pylowbit.model import HadamardError, Model, parse_rotation
from pylowbit.model.hadamard import fwht, fwht_numpy
from pylowbit.model.synthetic import write_synthetic_model
from test_model import _rewrite, rel_err, run_model


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("synth")


def test_fwht_is_the_normalized_sylvester_transform():
    B = 16
    H = np.array([[1.0]])
    while H.shape[0] < B:
        H = np.block([[H, H], [H, -H]])
    H /= np.sqrt(B)
    x = np.random.default_rng(0).standard_normal((3, 2 * B))
    s = np.where(np.arange(2 * B) % 3 == 0, -1.0, 1.0)
    want = ((x * s).reshape(3, 2, B) @ H.T).reshape(3, 2 * B)
    np.testing.assert_allclose(fwht_numpy(x, B, s), want, atol=1e-12)
    np.testing.assert_allclose(fwht(x.astype(np.float32), B, s.astype(np.float32)), want, atol=1e-5)
    np.testing.assert_allclose(fwht_numpy(fwht_numpy(x, B), B), x, atol=1e-12)  # H H = I


@pytest.mark.parametrize("arch,sign_mode", [("llama", "explicit"), ("gemma3", "explicit"),
                                            ("bitnet-b1.58", "identity")])
def test_folded_rotation_gives_the_same_logits(synth_dir, arch, sign_mode):
    plain = write_synthetic_model(synth_dir / f"plain-{arch}.gguf", arch=arch, fmt="f32", seed=7)
    rot = write_synthetic_model(synth_dir / f"rot-{arch}.gguf", arch=arch, fmt="f32", seed=7,
                                rotation_block=64, sign_mode=sign_mode)
    with GGUFFile(plain) as a, GGUFFile(rot) as b:  # the weights really are different
        wa, wb = a.tensor("blk.0.attn_q.weight").data, b.tensor("blk.0.attn_q.weight").data
        assert not np.array_equal(wa, wb)
    tokens = np.random.default_rng(8).integers(0, 512, 36)
    la, _ = run_model(plain, tokens)
    lb_, _ = run_model(rot, tokens)
    err = rel_err(lb_, la)
    assert err <= 1e-4, f"rotated vs plain: max relative error {err:.2e}"
    # ... and the reference, reading the rotation metadata independently, agrees too
    assert rel_err(lb_, Ref(rot).logits(tokens)) <= 1e-4


K = "prism.hadamard."
CORRUPT = {
    "version": ({K + "version": 2}, (), "prism.hadamard.version"),
    "transform": ({K + "transform": "hadamard"}, (), "prism.hadamard.transform"),
    "axis": ({K + "axis": "output"}, (), "prism.hadamard.axis"),
    "sign mode": ({K + "sign_mode": "random"}, (), "prism.hadamard.sign_mode"),
    "block not pow2": ({K + "block_size": 48}, (), "prism.hadamard.block_size"),
    "block wrong type": ({K + "block_size": "64"}, (), "prism.hadamard.block_size"),
    "empty weights": ({K + "weight_names": MetaValue(9, [], 8)}, (), "prism.hadamard.weight_names: empty"),
    "not foldable": ({K + "weight_names": ["blk.0.attn_norm.weight"]}, (), "not a foldable weight"),
    "missing weight": ({K + "weight_names": ["blk.7.attn_q.weight"]}, (), "not a tensor of this file"),
    "bad inverse": ({K + "inverse_weight_names": ["output.weight"]}, (), "prism.hadamard.inverse_weight_names"),
    "width not multiple": ({K + "sign_widths": MetaValue(9, [256, 100], 5)}, (), "prism.hadamard.sign_widths"),
    "values length": ({K + "sign_values": np.ones(10, np.float32)}, (), "prism.hadamard.sign_values"),
    "values not pm1": ({K + "sign_values": np.full(768, 0.5, np.float32)}, (), "prism.hadamard.sign_values"),
    "width missing": ({K + "sign_widths": MetaValue(9, [256], 5), K + "sign_values": np.ones(256, np.float32)},
                      (), "no sign vector for width 512"),
    "key missing": (None, (K + "transform",), "prism.hadamard.transform: missing"),
}


@pytest.fixture(scope="module")
def rotated_file(synth_dir):
    return write_synthetic_model(synth_dir / "rotated.gguf", arch="llama", fmt="f32", seed=9, rotation_block=64)


def test_valid_rotation_metadata_parses(rotated_file):
    with GGUFFile(rotated_file) as f:
        rot = parse_rotation(f)
    assert rot.block == 64 and set(rot.signs) == {256, 512} and "output.weight" in rot.weight_names


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupted_rotation_metadata_is_refused(tmp_path, rotated_file, case):
    change, drop, msg = CORRUPT[case]
    p = _rewrite(rotated_file, tmp_path / "bad.gguf", change, drop)
    with pytest.raises(HadamardError, match=msg):
        Model(p, notice=None)
