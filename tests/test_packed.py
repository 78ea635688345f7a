"""Packed (row-interleaved) matrices: the GEMV decode paths of every variant against scalar."""
import os
import sys

import numpy as np
import pytest

import pylowbit as lb
from test_kernels import emulate_for, random_code_weights, scale_at  # every code value, arbitrary fp16 scales

NONSCALAR = [v for v in lb.isa_supported() if v != "scalar"]


# ---- Arm fast paths ------------------------------------------------------------------------------
# kernels_arm.h's two packed GEMV decode paths (the counterparts of AVX2's): group-32 formats with
# their codes transposed to lane = row, 8 rows per step, and I2_S with P2 activations summed as
# integers over the whole row.  On x86 the same tests run the AVX2 paths; the C test runner
# (native/tests/test_packed.c) runs them for neon and dotprod under qemu.  Every variant must
# equal scalar bit for bit: same integer group sums, same float order per row.


def _same_as_scalar(p, x, variant, isa):
    isa("scalar")
    ref = p.gemv(x)
    isa(variant)
    for threads in (1, 2):
        np.testing.assert_array_equal(p.gemv(x, threads=threads), ref)


# rows: lone and partial row groups, pairs of them and a lone one inside a 64-row task
ARM_ROWS = (1, 5, 7, 9, 12, 13, 67, 75)


@pytest.mark.parametrize("variant", NONSCALAR)
@pytest.mark.parametrize("fmt", ["q2_0", "pq2_0", "ptq1_0"])
def test_arm_group32_gemv_edges(fmt, variant, isa):
    """Group-32 GEMV: row-group tails, Q2_0 rows ending on a half chunk (odd block counts),
    arbitrary weight and activation scales (a float step out of order would show)."""
    bs = lb.format_info(fmt).block_size
    rng = np.random.default_rng(11)
    for k, rows in enumerate(ARM_ROWS):
        cols = (1, 3, 9, 16)[k % 4] * bs
        p = random_code_weights(fmt, rows, cols, seed=k).pack()
        x = (rng.standard_normal(cols) * rng.uniform(0.1, 10, cols)).astype(np.float32)
        _same_as_scalar(p, x, variant, isa)


@pytest.mark.parametrize("variant", NONSCALAR)
def test_arm_i2_s_row_sums(variant, isa):
    """I2_S: one int sum per row where the P2 scale allows it (plain, tiny scale 2^-126 region),
    the per-group path where it does not (amax above 127 * 2^100), across runs of chunks."""
    rng = np.random.default_rng(12)
    for k, rows in enumerate(ARM_ROWS):
        cols = (1, 8, 9, 19)[k % 4] * 128
        p = random_code_weights("i2_s", rows, cols, seed=k).pack()
        x = rng.standard_normal(cols).astype(np.float32)
        for scale in (1.0, 1e-36, 1e34):
            _same_as_scalar(p, x * np.float32(scale), variant, isa)


@pytest.mark.parametrize("variant", NONSCALAR)
def test_arm_i2_s_row_sums_at_their_bound(variant, isa):
    """Every code 3 against activation codes all +127 or all -127 (x = +-127 * 2^-7: P2 scale
    2^-7) over 19 chunks: the baseline NEON kernel's int16 runs of 8 chunks at their bound."""
    rows, cols = 9, 19 * 128
    data = np.full(lb.tensor_nbytes("i2_s", rows * cols), 0xFF, np.uint8)
    data[-32:-28] = np.frombuffer(np.float32(0.5).tobytes(), np.uint8)
    p = lb.QTensor(data, "i2_s", (rows, cols)).pack()
    for sign in (1.0, -1.0):
        x = np.full(cols, sign * 127 / 128, np.float32)
        q, d, _ = lb.quantize_act(x, 128)
        assert np.all(q == sign * 127) and np.all(d == 2.0 ** -7)
        isa(variant)
        y = p.gemv(x)
        np.testing.assert_array_equal(y, np.float32(sign * 2 * 127 * cols * 2.0 ** -7 * 0.5))
        _same_as_scalar(p, x, variant, isa)


# ---- AVX2 group-256 path -------------------------------------------------------------------------
# kernels_avx2.c's packed GEMV of the 256-groups (TQ2_0, TQ1_0, packed_gemv256) keeps planes 1 and 3
# of the codes as 4 x the code and adds 4 x (planes 0, 2) + (planes 1, 3) of a group's two chunks in
# one int16 lane per row and byte position: <= 4 x 4 x 762 + 4 x 3048 = 24384 with |a| <= 127.


@pytest.mark.parametrize("variant", NONSCALAR)
@pytest.mark.parametrize("fmt", ["tq2_0", "tq1_0"])
def test_group256_sums_at_their_bound(fmt, variant, isa):
    """Every weight at its largest code (TQ2_0: code 3, i.e. +2 x scale; TQ1_0: +1) against
    activation codes all -127 or all +127 (Q8_K of a constant vector): the int16 lanes at their
    bound, where an overflow would show against scalar and the exact value.  Rows 4, 8, 11: one
    row group, two, a partial one."""
    cols = 5 * 256
    for rows in (4, 8, 11):
        if fmt == "tq1_0":
            w = lb.quantize(np.ones((rows, cols), np.float32), fmt)
        else:
            data = np.full(lb.tensor_nbytes(fmt, rows * cols), 0xFF, np.uint8)
            size, at = scale_at(fmt)
            data.reshape(-1, size)[:, at:at + 2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
            w = lb.QTensor(data, fmt, (rows, cols))
        wd = w.dequantize().astype(np.float64)
        assert np.all(wd == wd.max()) and wd.max() > 0
        p = w.pack()
        for sign in (1.0, -1.0):
            x = np.full(cols, sign, np.float32)
            q, d, _ = lb.quantize_act(x, 256)
            assert np.all(np.abs(q) == 127)
            isa(variant)
            want = wd @ (q.astype(np.float64) * np.repeat(d.astype(np.float64), 256))
            np.testing.assert_allclose(p.gemv(x), want, rtol=1e-6)
            _same_as_scalar(p, x, variant, isa)


# ---- the dense base-3 layout (TQ1_0 / PTQ1_0) -----------------------------------------------------
# internal.h: 5 trits a byte in 32-byte units, every 5 activation groups in S = group / 32 units and
# the last ng % 5 groups in S / 4 units each.  PYLOWBIT_BASE3 forces the layout at pack time, so
# every variant runs both layouts here (a variant that does not decode base-3 runs the reference);
# every result must equal the scalar file layout's bit for bit.

BASE3 = ["tq1_0", "ptq1_0"]
VARIANTS = lb.isa_supported()


def _base3_cases(fmt):
    bs = lb.format_info(fmt).block_size
    # 1..11 groups: tails of 0..4 groups after 0..2 periods; rows: lone, partial and paired row
    # groups, one 64-row task and several (paired tasks need more than one)
    return [((1, 5, 8, 67, 130, 259)[k % 6], k * bs) for k in range(1, 12)]


# the packed layouts a format can be asked for (PYLOWBIT_BASE3, PYLOWBIT_ROWS16): the canonical
# 2-bit one, dense base-3, and rows16 (2-bit codes in 16-row sets) for the formats it has kernels for
LAYOUT_ENV = {"packed": ("0", "0", "0"), "base3": ("1", "0", "0"), "rows16": ("0", "1", "0"),
              "base3f": ("0", "0", "1")}
LAYOUT_CASES = [(f, layout) for f in BASE3 for layout in ("packed", "base3", "base3f")] + [
    (f, "rows16") for f in ("q2_0", "pq2_0", "ptq1_0")]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt,layout", LAYOUT_CASES)
def test_packed_layouts_equal_file_layout(fmt, layout, variant, isa, monkeypatch):
    from test_kernels import base3_units
    rng = np.random.default_rng(21)
    monkeypatch.setenv("PYLOWBIT_BASE3", LAYOUT_ENV[layout][0])
    monkeypatch.setenv("PYLOWBIT_ROWS16", LAYOUT_ENV[layout][1])
    monkeypatch.setenv("PYLOWBIT_BASE3F", LAYOUT_ENV[layout][2])
    bs = lb.format_info(fmt).block_size
    for k, (rows, cols) in enumerate(_base3_cases(fmt)):
        w = random_code_weights(fmt, rows, cols, seed=k)
        x = (rng.standard_normal((9, cols)) * rng.uniform(0.1, 10, cols)).astype(np.float32)
        isa("scalar")
        ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
        isa(variant)
        p = w.pack()
        units = base3_units(fmt, cols) if layout in ("base3", "base3f") else -(-cols // 128)
        rows_padded = -(-rows // 4) * 4 if layout == "packed" else -(-rows // 16) * 16
        assert p.packed_nbytes == rows_padded * units * 32 + rows_padded * (cols // bs) * 2
        for threads in (1, 2):
            np.testing.assert_array_equal(p.gemv(x[0], threads=threads), ref_v)
            np.testing.assert_array_equal(p.gemm(x, threads=threads), ref_m)


@pytest.mark.parametrize("fmt", BASE3)
def test_base3_dense_is_file_density(fmt, monkeypatch):
    """At the models' widths the dense copy is within 2 % of the file's bytes; the 2-bit one is
    1.2x them."""
    for cols in (2560, 5120, 6912, 17408):
        w = random_code_weights(fmt, 64, cols)
        monkeypatch.setenv("PYLOWBIT_BASE3", "1")
        dense = w.pack().packed_nbytes
        monkeypatch.setenv("PYLOWBIT_BASE3", "0")
        two_bit = w.pack().packed_nbytes
        assert dense <= 1.02 * w.data.nbytes
        assert two_bit >= 1.2 * w.data.nbytes


@pytest.mark.parametrize("layout", ["base3", "base3f"])
@pytest.mark.parametrize("fmt", BASE3)
def test_base3_at_the_code_bounds(fmt, layout, isa, monkeypatch):
    """Every weight +1 (top code, trits all 2: bytes 242) or -1 against activation codes all +127
    or all -127: the kernels' int16 steps at their bound, against the exact value."""
    for name, value in zip(("PYLOWBIT_BASE3", "PYLOWBIT_ROWS16", "PYLOWBIT_BASE3F"), LAYOUT_ENV[layout]):
        monkeypatch.setenv(name, value)
    cols = 11 * lb.format_info(fmt).block_size
    for value in (1.0, -1.0):
        w = lb.quantize(np.full((12, cols), value, np.float32), fmt)
        wd = w.dequantize().astype(np.float64)
        for variant in VARIANTS:
            isa(variant)
            p = w.pack()
            for sign in (1.0, -1.0):
                x = np.full(cols, sign, np.float32)
                want = wd @ emulate_for(x, fmt)[0]  # exact: every activation code is +-127
                np.testing.assert_allclose(p.gemv(x), want, rtol=1e-6)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("fmt", ["tq2_0", "tq1_0"])
def test_packed_matrices_keep_their_values_and_give_memory_back(fmt):
    """Matrices packed one after another share the library's huge-page slabs (weight_slabs.c):
    each keeps its values while its neighbours are freed, and on Linux a freed matrix's memory goes
    back to the system at once but for the huge pages it shares with a neighbour (other tests'
    matrices may live in the same slab, so it is not unmapped)."""
    rng = np.random.default_rng(5)
    ws = [random_code_weights(fmt, 8192 + 16 * k, 5632, seed=k) for k in range(6)]
    x = rng.standard_normal(5632).astype(np.float32)
    refs = [w.gemv(x) for w in ws]  # the file layout's kernels
    linux = sys.platform.startswith("linux")
    shared = 2 * (2 << 20) * len(ws)  # at most two shared huge pages a matrix
    rss0 = _rss_bytes() if linux else 0
    packed = [w.pack() for w in ws]
    total = sum(p.packed_nbytes for p in packed)
    rss1 = _rss_bytes() if linux else 0
    for gone in (1, 3, 5, 0):  # interior ones first, then the last and the first
        packed[gone] = None
        for k, p in enumerate(packed):
            if p is not None:
                np.testing.assert_array_equal(p.gemv(x), refs[k], err_msg=f"matrix {k}, {gone} freed")
    packed = None
    if linux:
        assert rss1 - rss0 >= total - shared  # packing made them resident
        assert rss1 - _rss_bytes() >= total - shared  # and freeing gave it back
