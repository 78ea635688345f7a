"""Bit-exactness: the variants that keep the scalar spec's float order equal scalar bit for bit, and
the packed (row-interleaved) layout gives the file layout's results, at its int16 bounds too."""
import gc

import numpy as np
import pytest

import pylowbit as lb
from test_kernels import (ALL_FORMATS, BIT_EXACT_VARIANTS, BLOCK_SCALED, FLOAT_FORMATS, KERNEL_FORMATS, VARIANTS,
                          base3_dense, base3_units, emulate_for, rows16_layout, rows64_layout, q8rows_layout, random_code_weights, scale_at,
                          shapes, weights)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v in BIT_EXACT_VARIANTS])
@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_bit_exact_variants_equal_scalar(fmt, variant, isa):
    rng = np.random.default_rng(5)
    for rows, cols in shapes(fmt) + [(67, 2560)]:
        for w in (weights(fmt, rows, cols, seed=rows), random_code_weights(fmt, rows, cols, rows)):
            x = rng.standard_normal((6, cols)).astype(np.float32)
            isa("scalar")
            ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
            isa(variant)
            np.testing.assert_array_equal(w.gemv(x[0]), ref_v)
            np.testing.assert_array_equal(w.gemm(x), ref_m)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_packed_matches_scalar_file_layout(fmt, variant, isa):
    """The repacked layout gives the file layout's results (bit for bit for repacked formats on
    bit-exact variants), for GEMV and GEMM, on 1 and 2 threads."""
    rng = np.random.default_rng(6)
    cases = shapes(fmt) + [(67, 2560)]
    if variant in BIT_EXACT_VARIANTS and fmt in ("tq2_0", "pq2_0"):
        cases.append((2052, 4096))  # > 2 MB packed: 2 MB-aligned, huge pages asked for (pack.c)
    for k, (rows, cols) in enumerate(cases):
        ws = [weights(fmt, rows, cols, seed=rows)]
        if fmt in BLOCK_SCALED or fmt == "i2_s":
            ws.append(random_code_weights(fmt, rows, cols, rows))
        for w in ws:
            x = rng.standard_normal((5, cols)).astype(np.float32)
            isa("scalar")
            ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
            isa(variant)
            p = w.pack()
            assert p.shape == w.shape and p.fmt == w.fmt
            assert (p.data is None) == p.is_packed  # repacked: the file bytes are let go
            packs = (fmt not in ("q8_0", "q1_0", *FLOAT_FORMATS) or rows64_layout(fmt, variant)
                     or q8rows_layout(fmt, variant))
            assert p.is_packed == packs
            if packs and fmt == "q1_0":  # the file's bytes, rows in tiles of 64
                assert p.packed_nbytes == -(-rows // 64) * 64 * (cols // 128) * 18
            elif fmt == "q8_0" and packs:  # the file's bytes, rows in sets of 16
                assert p.packed_nbytes == -(-rows // 16) * 16 * cols // 32 * 34
            elif packs:
                # codes: 2 bits a weight in 32-byte chunks of 128 (rows padded to 4), or the base-3
                # formats' dense units where the variant decodes them (rows in sets of 16 there and
                # for the rows16 layout, rows16_layout); fp16 scales
                blk = lb.format_info(fmt).block_size
                dense = base3_dense(fmt, variant)
                sets = dense or rows16_layout(fmt, variant)  # rows in sets of 16
                rows4 = -(-rows // 16) * 16 if sets else -(-rows // 4) * 4
                scales = 0 if fmt == "i2_s" else rows4 * (cols // blk) * 2
                units = base3_units(fmt, cols) if dense else -(-cols // 128)
                assert p.packed_nbytes == rows4 * units * 32 + scales
            for threads in (1, 2):
                yv, ym = p.gemv(x[0], threads=threads), p.gemm(x, threads=threads)
                if (packs or fmt in FLOAT_FORMATS) and variant in BIT_EXACT_VARIANTS:
                    np.testing.assert_array_equal(yv, ref_v)
                    np.testing.assert_array_equal(ym, ref_m)
                else:
                    tol = np.abs(w.dequantize()).astype(np.float64) @ np.abs(x.T) * 1e-6 + 1e-30
                    assert np.all(np.abs(yv - ref_v) <= tol[:, 0])
                    assert np.all(np.abs(ym - ref_m) <= tol.T)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["q2_0", "pq2_0", "ptq1_0"])
def test_packed_group32_sums_at_their_bound(fmt, variant, isa):
    """Every weight at its largest code against activation codes all +127 or all -127: the
    group-32 (Q2_0) and group-128 (PQ2_0, PTQ1_0) GEMVs' int16 partial sums at their bound (AVX2
    keeps planes 1 and 3 as 4x codes in int16 lanes: an overflow there would show).  Rows 4..12:
    pairs of row groups and a lone one."""
    cols = 1024 + 64 if fmt == "q2_0" else 1024  # Q2_0: a last half chunk too
    for rows in (4, 8, 12):
        if fmt == "ptq1_0":  # base-3: +1 is the top code
            w = lb.quantize(np.ones((rows, cols), np.float32), fmt)
        else:
            size, at = scale_at(fmt)
            data = np.full(lb.tensor_nbytes(fmt, rows * cols), 0xFF, np.uint8)  # code 3
            data.reshape(-1, size)[:, at:at + 2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
            w = lb.QTensor(data, fmt, (rows, cols))
        wd = w.dequantize().astype(np.float64)
        assert np.all(wd == wd.max()) and wd.max() > 0
        for sign in (1.0, -1.0):
            x = np.full(cols, sign, np.float32)
            isa("scalar")
            ref = w.gemv(x)
            isa(variant)
            y = w.pack().gemv(x)
            want = wd @ emulate_for(x, fmt)[0]  # exact: every activation code is +-127
            np.testing.assert_allclose(y, want, rtol=1e-6)
            if variant in BIT_EXACT_VARIANTS:
                np.testing.assert_array_equal(y, ref)


def test_packed_outlives_its_source():
    w = weights("tq2_0", 9, 512)
    x = np.random.default_rng(7).standard_normal(512).astype(np.float32)
    ref = w.gemv(x)
    p = lb.QTensor(w.data.copy(), "tq2_0", w.shape).pack()
    assert p.data is None and p.nbytes == p.packed_nbytes
    with pytest.raises(ValueError, match="keep_source"):
        p.dequantize()
    np.testing.assert_array_equal(w.pack(keep_source=True).dequantize(), w.dequantize())
    gc.collect()
    np.testing.assert_array_equal(p.gemv(x), ref)
    q8 = lb.QTensor(weights("q8_0", 9, 512).data.copy(), "q8_0", (9, 512))
    ref8 = q8.gemv(x)
    p8 = q8.pack()  # borrows the bytes: must keep them alive
    del q8
    gc.collect()
    np.testing.assert_array_equal(p8.gemv(x), ref8)


@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_row_and_column_tiles(threads):
    """Few rows and a batch of 64: the work is split by columns too; every column is the GEMV."""
    rng = np.random.default_rng(8)
    for fmt in ("tq2_0", "q2_0"):
        w = weights(fmt, 70, 512)
        x = rng.standard_normal((64, 512)).astype(np.float32)
        for m in (w, w.pack()):
            y = m.gemm(x, threads=threads)
            for b in (0, 1, 31, 62, 63):
                np.testing.assert_array_equal(y[b], m.gemv(x[b], threads=1))
