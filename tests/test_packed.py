"""Packed GEMV kernels at the bounds of their int16 partial sums.

The AVX2 packed GEMV of the 256-groups (TQ2_0, TQ1_0) keeps planes 1 and 3 of the 2-bit codes as
4 x the code and adds 4 x (planes 0, 2) + (planes 1, 3) of a group's two chunks in one int16 lane
per row and position (<= 24384); the I2_S row kernel adds 8 chunks of codes in int16 lanes
(<= 24384).  Every weight at its largest code against activation codes all +127 or all -127 puts
those lanes at their bound, where an overflow would show against the scalar reference and the
exact value (a longer I2_S run does).  The group-32 path has its own such test in
test_kernels.py."""
import numpy as np
import pytest

import pylowbit as lb
from test_kernels import _SCALE_AT, BIT_EXACT_VARIANTS, VARIANTS, emulate_a8


def top_code_weights(fmt, rows, cols):
    """Every weight at the format's largest code (2-bit: code 3, i.e. +2 x scale; base 3: +1)."""
    if fmt == "tq1_0":
        return lb.quantize(np.ones((rows, cols), np.float32), fmt)
    n = lb.tensor_nbytes(fmt, rows * cols)
    data = np.full(n, 0xFF, np.uint8)
    if fmt == "i2_s":  # one fp32 tensor scale after the codes
        data[n - 32:n - 28] = np.frombuffer(np.float32(0.5).tobytes(), np.uint8)
    else:
        size, at = _SCALE_AT[fmt]
        data.reshape(-1, size)[:, at:at + 2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
    return lb.QTensor(data, fmt, (rows, cols))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt,cols", [("tq2_0", 1280), ("tq1_0", 1280), ("i2_s", 1152), ("i2_s", 2048)])
def test_packed_sums_at_their_int16_bound(fmt, cols, variant, isa):
    """Rows 4, 8, 11: one row group, two, and a partial one; I2_S 1152 columns: a run of 8 chunks
    and a last one of one."""
    group = 128 if fmt == "i2_s" else 256
    # I2_S's P2 codes reach 127 for |x| = 127/128 (scale 2^-7); Q8_K's for any constant x
    mag = np.float32(127 / 128) if fmt == "i2_s" else np.float32(1)
    for rows in (4, 8, 11):
        w = top_code_weights(fmt, rows, cols)
        wd = w.dequantize().astype(np.float64)
        assert np.all(wd == wd.max()) and wd.max() > 0
        for sign in (1, -1):
            x = np.full(cols, sign * mag, np.float32)
            deq, q, _ = emulate_a8(x, group)
            assert np.all(np.abs(q) == 127)
            isa("scalar")
            ref = w.gemv(x)
            isa(variant)
            y = w.pack().gemv(x)
            np.testing.assert_allclose(y, wd @ deq, rtol=1e-6)
            if variant in BIT_EXACT_VARIANTS:
                np.testing.assert_array_equal(y, ref)
