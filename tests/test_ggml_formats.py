"""ggml's Q5_0 / Q4_K / Q6_K, read from llama.cpp's files and multiplied in place: the layouts against
gguf-py's decoder, the kernels against float64, every variant against scalar bit for bit."""
import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit
from test_kernels import (GGML_FORMATS, VARIANTS, act_group, emulate_for, ggml_weights,
                          random_code_weights)


def test_ggml_formats_are_known_with_llama_cpp_activation_groups():
    assert {f: (lb.format_info(f).type_id, lb.format_info(f).block_size, lb.format_info(f).type_size)
            for f in GGML_FORMATS} == {"q5_0": (6, 32, 22), "q4_k": (12, 256, 144), "q6_k": (14, 256, 210)}
    assert {f: act_group(f) for f in GGML_FORMATS} == {"q5_0": 32, "q4_k": 256, "q6_k": 256}


@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_dequantize_matches_gguf_bit_exact(fmt):
    from gguf import GGMLQuantizationType as T
    from gguf import quants as gq

    w = ggml_weights(fmt, 7, 1024, seed=1)
    ref = gq.dequantize(w.data.reshape(7, -1), T[fmt.upper()]).reshape(7, 1024)
    np.testing.assert_array_equal(w.dequantize(), ref)


@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_gemv_matches_float64_dot_of_gguf_decode(fmt):
    """The kernels against gguf-py's dequantize times the emulated activations, in float64."""
    from gguf import GGMLQuantizationType as T
    from gguf import quants as gq

    rng = np.random.default_rng(2)
    for rows, cols in [(1, 256), (5, 512), (33, 2048), (70, 256 * 3)]:
        w = ggml_weights(fmt, rows, cols, seed=rows)
        wd = gq.dequantize(w.data.reshape(rows, -1), T[fmt.upper()]).astype(np.float64)
        x = rng.standard_normal((3, cols)).astype(np.float32)
        for b in range(3):
            xa, _, _ = emulate_for(x[b], fmt)
            ref = wd.reshape(rows, cols) @ xa
            scale = np.abs(wd.reshape(rows, cols)) @ np.abs(xa) + 1e-30
            assert np.max(np.abs(w.gemv(x[b]) - ref) / scale) < 2e-6, (rows, cols)
            assert np.max(np.abs(w.gemm(x)[b] - ref) / scale) < 2e-6, (rows, cols)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_every_variant_equals_scalar_bit_exact(fmt, variant, isa):
    """Q5_0 / Q4_K / Q6_K keep the reference's float order in every variant (NEON and dotprod
    run the reference itself), so results are bit-identical; packing borrows the file bytes."""
    rng = np.random.default_rng(5)
    for rows, cols in [(1, 256), (3, 768), (17, 1280), (65, 512), (67, 2560)]:
        w = ggml_weights(fmt, rows, cols, seed=rows)
        x = (rng.standard_normal((6, cols)) * rng.choice([1e-3, 1, 50], (6, cols))).astype(np.float32)
        isa("scalar")
        ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
        isa(variant)
        p = w.pack()
        assert not p.is_packed and p.data is w.data  # borrowed, computed in place
        for threads in (1, 2):
            np.testing.assert_array_equal(w.gemv(x[0], threads=threads), ref_v)
            np.testing.assert_array_equal(w.gemm(x, threads=threads), ref_m)
            np.testing.assert_array_equal(p.gemm(x, threads=threads), ref_m)


@pytest.mark.parametrize("fmt", GGML_FORMATS)
def test_ggml_formats_refuse_malformed_sizes_and_quantize(fmt):
    info = lb.format_info(fmt)
    w = ggml_weights(fmt, 2, 512)
    with pytest.raises(ValueError, match="needs"):
        lb.QTensor(w.data[:-1], fmt, (2, 512))
    with pytest.raises(ValueError, match="multiple of the block"):
        lb.QTensor(w.data, fmt, (2 * 512 // (info.block_size // 2), info.block_size // 2))
    with pytest.raises(ValueError, match="columns|shape"):
        w.gemv(np.zeros(256, np.float32))
    with pytest.raises(ValueError, match="does not quantize"):
        lb.quantize(np.zeros(512, np.float32), fmt)
    with pytest.raises(ValueError, match="unsupported"):  # the C library refuses it too
        _lowbit.quantize(np.zeros(512, np.float32), info.type_id)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["q5_0", "q8_0", "q4_k", "q6_k"])
def test_file_kernels_long_rows_equal_scalar(fmt, variant, isa):
    """Rows longer than the VNNI kernels' activation-table windows (the accumulators carry across
    windows through the output), an odd number of 32-blocks, short row and activation tiles."""
    cols = 8192 + (96 if fmt in ("q5_0", "q8_0") else 512)
    w = (ggml_weights if fmt in GGML_FORMATS else random_code_weights)(fmt, 9, cols, seed=3)
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((10, cols)) * rng.choice([1e-3, 1, 50], (10, cols))).astype(np.float32)
    isa("scalar")
    ref_v, ref_m = w.gemv(x[0]), w.gemm(x)
    isa(variant)
    np.testing.assert_array_equal(w.gemv(x[0]), ref_v)
    np.testing.assert_array_equal(w.gemm(x), ref_m)
