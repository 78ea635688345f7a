"""Bad input gets a clear exception naming the problem, never a crash."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit


def good(fmt="tq2_0", rows=4, cols=256):
    return lb.quantize(np.ones((rows, cols), np.float32), fmt)


def test_unknown_format_name():
    with pytest.raises(ValueError, match="unknown format 'tq3_0'"):
        lb.quantize(np.ones(256, np.float32), "tq3_0")
    with pytest.raises(ValueError, match="unknown tensor type id 99"):
        lb.format_info(99)
    with pytest.raises(TypeError, match="format must be"):
        lb.format_info(3.5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16])
def test_wrong_dtype(dtype):
    with pytest.raises(TypeError, match="float32"):
        lb.quantize(np.ones(256, dtype), "tq2_0")
    with pytest.raises(TypeError, match="float32"):
        good().gemv(np.ones(256, dtype))


def test_object_array_is_refused():
    with pytest.raises(TypeError, match="dtype object"):
        lb.quantize(np.array([None] * 256), "tq2_0")


def test_row_length_not_a_multiple_of_block():
    with pytest.raises(ValueError, match="row length 200 is not a multiple of the block size 256"):
        lb.quantize(np.ones((2, 200), np.float32), "tq2_0")
    with pytest.raises(ValueError, match="not a multiple of the block size 64"):
        lb.QTensor(np.zeros(18, np.uint8), "q2_0", (1, 60))


def test_wrong_byte_length():
    w = good()
    with pytest.raises(ValueError, match="needs 264 bytes, got 263"):
        lb.QTensor(w.data[:-1], "tq2_0", (4, 256))
    with pytest.raises(ValueError, match="needs"):
        lb.dequantize(np.zeros(65, np.uint8), "tq2_0", (256,))


def test_non_contiguous_and_misaligned():
    raw = np.zeros(2 * 66 + 1, np.uint8)
    with pytest.raises(ValueError, match="C-contiguous"):
        lb.QTensor(np.zeros(2 * 66 * 2, np.uint8)[::2], "tq2_0", (2, 256))
    misaligned = raw[1:]
    assert misaligned.ctypes.data % 2 == 1
    with pytest.raises(ValueError, match="aligned"):
        lb.dequantize(misaligned, "tq2_0", (2, 256))
    # strided activations are fine: they are copied to contiguous memory
    x = np.ones(512, np.float32)[::2]
    assert good().gemv(x).shape == (4,)


def test_bytes_must_be_uint8():
    with pytest.raises(TypeError, match="uint8"):
        lb.QTensor(np.zeros(33, np.uint16), "tq2_0", (1, 256))


def test_activation_shape_errors():
    w = good()
    with pytest.raises(ValueError, match=r"x must have shape \(256,\)"):
        w.gemv(np.ones(128, np.float32))
    with pytest.raises(ValueError, match=r"x must have shape \(batch, 256\)"):
        w.gemm(np.ones((2, 128), np.float32))
    with pytest.raises(ValueError, match="out must have shape"):
        w.gemv(np.ones(256, np.float32), out=np.empty(5, np.float32))
    with pytest.raises(TypeError, match="out must be a float32"):
        w.gemv(np.ones(256, np.float32), out=np.empty(4, np.float64))
    with pytest.raises(ValueError, match="2-D weight"):
        lb.quantize(np.ones(256, np.float32), "tq2_0").gemv(np.ones(256, np.float32))


def test_zero_threads_refused():
    with pytest.raises(ValueError, match="threads must be >= 1"):
        good().gemv(np.ones(256, np.float32), threads=0)
    with pytest.raises(ValueError, match="threads"):
        lb.set_threads(0)


def test_unknown_or_unsupported_isa(monkeypatch):
    with pytest.raises(ValueError, match="unknown ISA variant 'sse9'"):
        lb.set_isa("sse9")
    missing = [v for v in ("avx2", "avx512vnni", "neon", "dotprod") if v not in lb.isa_supported()]
    for v in missing:
        with pytest.raises(RuntimeError, match=v):
            lb.set_isa(v)
    assert lb.isa_active() in lb.isa_supported()


def test_bad_isa_environment_variable_is_refused_at_import(tmp_path):
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import pylowbit"], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYLOWBIT_ISA": "sse9"})
    assert r.returncode != 0
    assert "PYLOWBIT_ISA=sse9 is not a known variant" in r.stderr


def test_quantize_act_group_mismatch():
    with pytest.raises(ValueError, match="not a multiple of the group size 128"):
        lb.quantize_act(np.ones(100, np.float32), 128)


def test_gemv_act_inconsistent_sizes():
    w = good()
    with pytest.raises(ValueError, match="inconsistent"):
        _lowbit.gemv_act(w.data, w.type_id, 4, 256, np.zeros(128, np.int8), np.zeros(2, np.float32),
                         np.zeros(2, np.int32), np.zeros(4, np.float32))
