"""Block codecs: bit-exact against gguf-py where it has the format, hand-written golden vectors
from docs/FORMATS.md where it does not."""
import struct

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants as gq

import pylowbit as lb
from pylowbit.transcode import pq2_0_to_q2_0, q2_0_to_pq2_0
from test_kernels import scale_at

GGUF_TYPES = {"tq1_0": T.TQ1_0, "tq2_0": T.TQ2_0, "q8_0": T.Q8_0}
WRITTEN = sorted(set(lb.FORMATS) - lb.core.DECODE_ONLY)  # decode-only ones: tests/test_ggml_formats.py


def edge_inputs(n, rng):
    """Random and edge-case rows, all of length n."""
    rows = [
        rng.standard_normal(n),
        np.zeros(n),
        np.full(n, 0.37),
        np.full(n, -5.0),
        rng.standard_normal(n) * 1e4,  # huge (fp16 scale still finite)
        rng.standard_normal(n) * 1e-6,  # tiny: fp16 scale becomes subnormal
        rng.standard_normal(n) * 1e-9,  # tinier: fp16 scale flushes to zero
        rng.choice([-1.0, 0.0, 1.0], n) * 0.75,  # already ternary
        np.round(rng.standard_normal(n) * 2) / 4,  # many exact halves: rounding ties
        rng.uniform(-1, 1, n) * (rng.random(n) < 0.05),  # sparse
    ]
    return np.stack(rows).astype(np.float32)


@pytest.mark.parametrize("fmt", sorted(GGUF_TYPES))
def test_quantize_matches_gguf_bit_exact(fmt):
    rng = np.random.default_rng(1)
    x = edge_inputs(1024, rng)
    ours = lb.quantize(x, fmt).data
    ref = gq.quantize(x, GGUF_TYPES[fmt]).reshape(-1)
    assert ours.tobytes() == ref.tobytes()


@pytest.mark.parametrize("fmt", sorted(GGUF_TYPES))
def test_dequantize_matches_gguf_bit_exact(fmt):
    rng = np.random.default_rng(2)
    info = lb.format_info(fmt)
    nblocks = 300
    raw = rng.integers(0, 256, nblocks * info.type_size, dtype=np.uint8)
    # Random bytes make random fp16 scales, NaN/inf included; keep them finite so the comparison
    # is about codes (both sides follow IEEE for non-finite scales, checked below separately).
    blocks = raw.reshape(nblocks, info.type_size)
    at = scale_at(fmt)[1]
    blocks[:, at:at + 2] = np.frombuffer(
        rng.standard_normal(nblocks).astype(np.float16).tobytes(), dtype=np.uint8).reshape(-1, 2)
    n = nblocks * info.block_size
    ours = lb.dequantize(raw, fmt, (n,))
    ref = gq.dequantize(raw, GGUF_TYPES[fmt]).reshape(-1)
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("fmt", sorted(GGUF_TYPES))
def test_dequantize_nonfinite_scale_like_gguf(fmt):
    info = lb.format_info(fmt)
    x = np.linspace(-1, 1, info.block_size, dtype=np.float32)
    blk = lb.quantize(x, fmt).data.copy()
    at = scale_at(fmt)[1]
    for special in (np.inf, np.nan):
        blk[at:at + 2] = np.frombuffer(np.float16(special).tobytes(), dtype=np.uint8)
        np.testing.assert_array_equal(lb.dequantize(blk, fmt, x.shape),
                                      gq.dequantize(blk, GGUF_TYPES[fmt]).reshape(-1))


@pytest.mark.parametrize("fmt", WRITTEN)
def test_nan_input_is_refused(fmt):
    info = lb.format_info(fmt)
    x = np.zeros(max(info.block_size, 32), dtype=np.float32)
    x[3] = np.nan
    if fmt in ("f32", "f16", "bf16"):
        assert np.isnan(lb.quantize(x, fmt).dequantize()[3])  # float formats store NaN as is
        return
    with pytest.raises(ValueError, match="NaN"):
        lb.quantize(x, fmt)


@pytest.mark.parametrize("fmt", WRITTEN)
def test_roundtrip_of_representable_values(fmt):
    """Values already on a format's grid survive quantize -> dequantize exactly."""
    info = lb.format_info(fmt)
    rng = np.random.default_rng(3)
    n = info.block_size * 8
    if fmt in ("f32", "f16"):
        x = rng.standard_normal(n).astype(np.float16).astype(np.float32)
    elif fmt == "q8_0":
        x = (rng.integers(-127, 128, n) * 0.5).astype(np.float32)
        x[::32] = 63.5  # pin each block's max so the scale is exactly 0.5
    elif fmt == "q1_0":
        x = (rng.choice([-1, 1], n) * 0.25).astype(np.float32)
    else:
        x = (rng.integers(-1, 2, n) * 0.5).astype(np.float32)
        x[::info.block_size] = 0.5
    np.testing.assert_array_equal(lb.quantize(x, fmt).dequantize(), x)


# ---- golden vectors written by hand from docs/FORMATS.md -------------------------------------------

HALF = bytes.fromhex("0038")  # fp16 0.5, little endian


def test_q2_0_golden_layout_and_codes():
    # Code j%4 everywhere: byte = 0 | 1<<2 | 2<<4 | 3<<6 = 0xE4; value (code - 1) * d.
    blk = HALF + bytes([0xE4] * 16)
    y = lb.dequantize(np.frombuffer(blk, np.uint8), "q2_0", (64,))
    np.testing.assert_array_equal(y, np.tile([-0.5, 0.0, 0.5, 1.0], 16).astype(np.float32))
    # One weight at +d, all others zero (code 1 = 0b01): weight 21 is qs[5] bits 2..3.
    qs = bytearray([0x55] * 16)
    qs[5] = 0b01011001
    y = lb.dequantize(np.frombuffer(HALF + bytes(qs), np.uint8), "q2_0", (64,))
    expect = np.zeros(64, np.float32)
    expect[21] = 0.5
    np.testing.assert_array_equal(y, expect)
    # The quantizer writes exactly that block back (d = max|w| = 0.5).
    assert lb.quantize(expect, "q2_0").data.tobytes() == HALF + bytes(qs)


def test_q2_0_quantizer_rounds_half_away_and_never_emits_code_3():
    x = np.zeros(64, np.float32)
    x[:6] = [2.0, -2.0, 1.0, -1.0, 0.9, -0.9]  # d = 2: w/d = 1, -1, .5, -.5, .45, -.45
    q = lb.quantize(x, "q2_0").data
    assert q[:2].tobytes() == np.float16(2.0).tobytes()
    codes = [(q[2 + j // 4] >> (2 * (j % 4))) & 3 for j in range(64)]
    assert codes[:6] == [2, 0, 2, 0, 1, 1]
    assert max(codes) == 2


def test_pq2_0_golden_layout():
    # Weight 100 of a 128-block lives in qs[25] bits 0..1; 0x55 bytes are all code 1 (zero).
    qs = bytearray([0x55] * 32)
    qs[25] = 0b01010110  # code 2 -> +d
    qs[0] = 0b01010100  # weight 0: code 0 -> -d
    blk = HALF + bytes(qs)
    y = lb.dequantize(np.frombuffer(blk, np.uint8), "pq2_0", (128,))
    expect = np.zeros(128, np.float32)
    expect[100], expect[0] = 0.5, -0.5
    np.testing.assert_array_equal(y, expect)
    assert lb.quantize(expect, "pq2_0").data.tobytes() == blk


def test_pq2_0_to_q2_0_is_lossless_and_reversible():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 512)).astype(np.float32)
    pq = lb.quantize(x, "pq2_0")
    q2 = pq2_0_to_q2_0(pq)
    assert q2.fmt == "q2_0" and q2.shape == pq.shape
    np.testing.assert_array_equal(q2.dequantize(), pq.dequantize())
    assert q2_0_to_pq2_0(q2).data.tobytes() == pq.data.tobytes()
    # Q2_0 quantized on its own has a scale per 64: going back to PQ2_0 must refuse.
    with pytest.raises(ValueError, match="lose information"):
        q2_0_to_pq2_0(lb.quantize(x, "q2_0"))


def test_ptq1_0_golden_positions():
    # All-zero block: 5 trits of code 1 -> q = 121 -> ceil(121*256/243) = 128; qh: 4 trits -> 127.
    qs = bytearray([128] * 24)
    qh = bytearray([127, 127])
    # weight 35 = 16*2 + 3: trit 2 of qs[3] = 2 -> q = 81+27+18+3+1 = 130 -> byte 137
    qs[3] = 137
    # weight 117 = 80 + 8*4 + 5: trit 4 of qs[16+5] = 2 -> q = 122 -> byte 129
    qs[21] = 129
    # weight 127 = 120 + 2*3 + 1: trit 3 of qh[1] = 2 -> q = (27+9+3+2)*3 = 123 -> byte 130
    qh[1] = 130
    # weight 6 = 16*0 + 6: trit 0 of qs[6] = 0 -> q = 121 - 81 = 40 -> ceil(40*256/243) = 43
    qs[6] = 43
    d = np.float16(0.25).tobytes()
    blk = bytes(qs) + bytes(qh) + d  # scale last
    y = lb.dequantize(np.frombuffer(blk, np.uint8), "ptq1_0", (128,))
    expect = np.zeros(128, np.float32)
    expect[[35, 117, 127]] = 0.25
    expect[6] = -0.25
    np.testing.assert_array_equal(y, expect)
    assert lb.quantize(expect, "ptq1_0").data.tobytes() == blk


def test_i2_s_golden_layout_and_tensor_scale():
    # Byte p of a 128-group holds weights p, p+32, p+64, p+96 at shifts 6, 4, 2, 0; 0x55 = zeros.
    codes = bytearray([0x55] * 64)  # two groups: 256 weights
    codes[6] = 0b01011001  # weight 70 = 64 + 6 -> shift 2 -> code 2 (+1)
    codes[1] = 0b01010100  # weight 97 = 96 + 1 -> shift 0 -> code 0 (-1)
    codes[32 + 0] = 0b10010101  # weight 128 + 0 -> shift 6 -> code 2 (+1)
    tail = struct.pack("<f", 0.75) + bytes(28)  # one fp32 scale, padded to 32 bytes
    data = np.frombuffer(bytes(codes) + tail, np.uint8)
    assert lb.tensor_nbytes("i2_s", 256) == 256 // 4 + 32
    y = lb.dequantize(data, "i2_s", (2, 128))
    expect = np.zeros((2, 128), np.float32)
    expect[0, 70], expect[0, 97], expect[1, 0] = 0.75, -0.75, 0.75
    np.testing.assert_array_equal(y, expect)
    assert lb.quantize(expect, "i2_s").data.tobytes() == data.tobytes()


def test_q1_0_golden_bits():
    # Bit j%8 of qs[j/8]: set -> +d, clear -> -d; weight 10 is qs[1] bit 2.
    qs = bytearray(16)
    qs[1] = 0b100
    blk = HALF + bytes(qs)
    y = lb.dequantize(np.frombuffer(blk, np.uint8), "q1_0", (128,))
    expect = np.full(128, -0.5, np.float32)
    expect[10] = 0.5
    np.testing.assert_array_equal(y, expect)
    # Quantizer: d = mean|w|, bit = w >= 0.
    assert lb.quantize(expect, "q1_0").data.tobytes() == blk


def test_tq2_0_element_position_rule():
    # Element (j/32)*128 + n*32 + m lives in qs[j + m] at bits 2n: check one element per (j, n).
    for j, n, m in [(0, 0, 0), (0, 3, 31), (32, 1, 5), (32, 2, 17)]:
        expect = np.zeros(256, np.float32)
        expect[(j // 32) * 128 + n * 32 + m] = 1.0
        q = lb.quantize(expect, "tq2_0").data
        assert (q[j + m] >> (2 * n)) & 3 == 2
        others = np.delete(np.arange(64), j + m)
        assert (q[others] == 0x55).all()


def test_fp16_scale_conversion_matches_numpy():
    # Every fp16 value as a Q8_0 scale: our fp16->fp32 equals numpy's.
    h = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)
    blocks = np.zeros((h.size, 34), np.uint8)
    blocks[:, :2] = h.view(np.uint8).reshape(-1, 2)
    blocks[:, 2] = 1  # code 1 -> value = d
    y = lb.dequantize(blocks.reshape(-1), "q8_0", (h.size * 32,)).reshape(-1, 32)[:, 0]
    np.testing.assert_array_equal(y, h.view(np.float16).astype(np.float32))
    # and fp32->fp16 (F16 quantize) equals numpy's round-to-nearest-even on awkward values
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(4096) * 10 ** rng.uniform(-9, 5, 4096),
                        [65504, 65519.99, 65520, 7e4, 6e-8, 2.9e-8, 3e-8, 6.1e-5]]).astype(np.float32)
    np.testing.assert_array_equal(lb.quantize(x, "f16").data.view(np.float16), x.astype(np.float16))
