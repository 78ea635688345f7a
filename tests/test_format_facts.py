"""Every format fact Python shows is liblowbit's (lowbit_type_facts, through pylowbit._lowbit):
the format tables of core, gguf, transcode, model.weights and model.synthetic are built from it."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit, transcode
from pylowbit.gguf import TYPES, tensor_nbytes
from pylowbit.model import synthetic, weights

WEIGHT_IDS = _lowbit.weight_types()


def facts(fmt):
    return _lowbit.type_facts(lb.format_info(fmt).type_id)


def test_formats_are_the_weight_types():
    assert sorted(f.type_id for f in lb.FORMATS.values()) == sorted(WEIGHT_IDS)
    assert weights.KERNEL_FORMATS == set(lb.FORMATS)
    assert "q8_k" not in lb.FORMATS  # activations only


@pytest.mark.parametrize("tid", _lowbit.known_types())
def test_format_info_and_gguf_table(tid):
    f = _lowbit.type_facts(tid)
    name = _lowbit.type_info(tid)[0]
    t = TYPES[tid]
    assert (t.name, t.block_size, t.type_size) == (name, f["block_size"], f["block_bytes"])
    if tid in WEIGHT_IDS:
        info = lb.FORMATS[name]
        assert (info.type_id, info.block_size, info.type_size) == (tid, f["block_size"],
                                                                   f["block_bytes"])
    n = 4 * f["block_size"] * (128 if f["block_size"] == 1 else 1)
    assert tensor_nbytes(tid, (4, n // 4)) == _lowbit.tensor_nbytes(tid, n)


@pytest.mark.parametrize("fmt", sorted(transcode.CODE_FORMATS))
def test_code_formats(fmt):
    c, f, info = transcode.CODE_FORMATS[fmt], facts(fmt), lb.format_info(fmt)
    assert c.scale_off == f["scale_offset"]
    assert c.block == (f["block_size"] if f["scale_offset"] >= 0 else 0)
    # the code bytes are the block but its fp16 scale
    scale = set(range(f["scale_offset"], f["scale_offset"] + 2)) if f["scale_offset"] >= 0 else set()
    assert set(range(c.code_start, c.code_end)) | scale == set(range(info.type_size))
    assert not set(range(c.code_start, c.code_end)) & scale


@pytest.mark.parametrize("fmt", transcode.BASE3_FORMATS)
def test_base3_runs(fmt):
    """5 trits a byte in the first two runs, 4 in the qh run: the block's weights, then its scale."""
    n0, n1, nh = transcode.base3_runs(fmt)
    f = facts(fmt)
    assert 5 * (n0 + n1) + 4 * nh == f["block_size"]
    assert n0 + n1 + nh == f["scale_offset"]


@pytest.mark.parametrize("fmt", sorted(synthetic._BLOCKS))
def test_synthetic_blocks(fmt):
    bs, nbytes, at, qh = synthetic._BLOCKS[fmt]
    f = facts(fmt)
    assert (bs, nbytes, at) == (f["block_size"], f["block_bytes"], f["scale_offset"])
    assert qh is None or qh[1] == f["scale_offset"]


def test_synthetic_i2_s_tail():
    data = synthetic.pack_i2_s_ternary(0, "w", 4, 256)
    assert data.nbytes == _lowbit.tensor_nbytes(lb.format_info("i2_s").type_id, 4 * 256)


@pytest.mark.parametrize("lut", ["_TWO_BIT", "_TRIT5"])
@pytest.mark.parametrize("n", [0, 1, 2, 66 * 5, 54 * 7 + 1])
def test_synthetic_lookup_is_the_table(lut, n):
    table = getattr(synthetic, lut)
    raw = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    for shape in ((n,), (1, n)):
        got = synthetic._lookup(table, raw.reshape(shape))
        assert got.dtype == np.uint8 and got.shape == shape
        assert np.array_equal(got, table[raw.reshape(shape)])
