"""Bad input gets a clear exception naming the problem, never a crash.  Wrong dtypes, shapes, block
sizes, contiguity and thread counts are rows of the table in tests/test_malformed.py; here, the rest."""
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


def test_strided_activations_are_copied_not_refused():
    # (non-contiguous or misaligned weight bytes are refused: rows of tests/test_malformed.py)
    x = np.ones(512, np.float32)[::2]
    assert good().gemv(x).shape == (4,)


def test_unknown_or_unsupported_isa(monkeypatch):
    with pytest.raises(ValueError, match="unknown ISA variant 'sse9'"):
        lb.set_isa("sse9")
    missing = [v for v in ("avx2", "avx512vnni", "avxvnni", "neon", "dotprod", "i8mm")
               if v not in lb.isa_supported()]
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
