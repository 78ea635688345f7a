"""The packed copy in a caller's buffer (PackedMatrix(..., out=), PackedMatrix.wrap, unpack):
the file bytes back byte for byte, the same products as the packed copy of its own, clear errors."""
import os
import sys

import numpy as np
import pytest

import pylowbit as lb
from pylowbit import _lowbit
from test_kernels import random_code_weights

REPACKED = ["i2_s", "tq2_0", "tq1_0", "ptq1_0", "q2_0", "pq2_0"]
LAYOUTS = {"chosen": (None, None, None, None), "packed": ("0", "0", "0", "0"),
           "base3": ("1", "0", "0", "0"), "base3f": ("0", "0", "1", "0"),
           "rows16": ("0", "1", "0", "0"), "q8rows": ("0", "0", "0", "1")}
CASES = [(f, L) for f in REPACKED for L in ("chosen", "packed")] + [
    (f, L) for f in ("tq1_0", "ptq1_0") for L in ("base3", "base3f")] + [
    (f, "rows16") for f in ("q2_0", "pq2_0", "ptq1_0")] + [("q8_0", "q8rows")]


def _layout(monkeypatch, layout):
    for name, v in zip(("PYLOWBIT_BASE3", "PYLOWBIT_ROWS16", "PYLOWBIT_BASE3F", "PYLOWBIT_Q8ROWS"),
                       LAYOUTS[layout]):
        if v is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, v)


def _canonical(fmt, rows, cols, seed):
    """A file as the encoder writes it: for the base-3 formats the quantizer's bytes of ternary
    values (random bytes elsewhere: every 2-bit code, any I2_S tail)."""
    if fmt not in ("tq1_0", "ptq1_0"):
        w = random_code_weights(fmt, rows, cols, seed)
        if fmt == "i2_s":  # the padding after the tensor scale too
            w.data[-28:] = np.random.default_rng(seed).integers(0, 256, 28, dtype=np.uint8)
        return w
    rng = np.random.default_rng(seed)
    bs = lb.format_info(fmt).block_size
    v = rng.integers(-1, 2, (rows, cols)).astype(np.float32)
    v[:, ::bs] = 1  # every block's absmax is its scale
    return lb.quantize(v * rng.uniform(0.5, 2, (rows, cols // bs)).repeat(bs, 1).astype(np.float32), fmt)


@pytest.mark.parametrize("variant", lb.isa_supported())
@pytest.mark.parametrize("fmt,layout", CASES)
def test_round_trip_and_products(fmt, layout, variant, isa, monkeypatch):
    _layout(monkeypatch, layout)
    isa(variant)
    tid = lb.format_info(fmt).type_id
    bs = lb.format_info(fmt).block_size
    rng = np.random.default_rng(3)
    for k, (rows, cols) in enumerate([(1, bs), (5, 3 * bs), (17, 5 * bs), (40, 11 * bs)]):
        w = _canonical(fmt, rows, cols, k)
        n = _lowbit.packed_nbytes(tid, rows, cols)
        buf = _lowbit.empty_packed(n)
        m = _lowbit.PackedMatrix(w.data, tid, rows, cols, 2, out=buf)
        own = _lowbit.PackedMatrix(w.data, tid, rows, cols, 1)
        assert m.nbytes == 0 and m.buffer is buf and m.is_packed
        np.testing.assert_array_equal(m.unpack(), w.data)
        np.testing.assert_array_equal(own.unpack(threads=1), w.data)
        if fmt != "i2_s":  # rows looked up: their file bytes, in the order asked
            file_rows = w.data.reshape(rows, -1)
            np.testing.assert_array_equal(m.unpack_rows([rows - 1, 0]), file_rows[[rows - 1, 0]])
            with pytest.raises(IndexError):
                m.unpack_rows([rows])
        x = rng.standard_normal((3, cols)).astype(np.float32)
        for batch in (1, 3):
            y, want = (np.empty((batch, rows), np.float32) for _ in range(2))
            m.gemm(x[:batch], y)
            own.gemm(x[:batch], want)
            np.testing.assert_array_equal(y, want)
        # a copy of the bytes, wrapped: the same matrix, not packed again
        copy = _lowbit.empty_packed(n)
        copy[:] = buf
        del m
        wm = _lowbit.PackedMatrix.wrap(copy)
        assert (wm.type_id, wm.rows, wm.cols) == (tid, rows, cols)
        np.testing.assert_array_equal(wm.unpack(), w.data)


@pytest.mark.parametrize("fmt", ["tq1_0", "ptq1_0"])
def test_base3_bytes_of_any_file_give_the_same_weights(fmt):
    """Base-3 bytes that are not the encoder's come back as the encoder's bytes of the same trits."""
    w = random_code_weights(fmt, 9, 5 * lb.format_info(fmt).block_size, 7)
    tid = w.type_id
    buf = _lowbit.empty_packed(_lowbit.packed_nbytes(tid, *w.shape))
    back = _lowbit.PackedMatrix(w.data, tid, *w.shape, out=buf).unpack()
    assert not np.array_equal(back, w.data)  # random bytes are not all canonical
    np.testing.assert_array_equal(lb.dequantize(lb.QTensor(back, w.fmt, w.shape)), lb.dequantize(w))
    again = _lowbit.PackedMatrix(back, tid, *w.shape, out=_lowbit.empty_packed(buf.size)).unpack()
    np.testing.assert_array_equal(again, back)


def test_bad_buffers(monkeypatch):
    monkeypatch.setenv("PYLOWBIT_Q8ROWS", "0")  # Q8_0 not repacked, whatever the variant
    w = random_code_weights("tq2_0", 8, 512)
    tid = w.type_id
    n = _lowbit.packed_nbytes(tid, 8, 512)
    assert n > 0 and _lowbit.packed_nbytes(lb.format_info("q8_0").type_id, 8, 512) == 0
    with pytest.raises(ValueError, match="multiple of the block"):
        _lowbit.packed_nbytes(tid, 8, 100)
    big = _lowbit.empty_packed(n + 1)
    with pytest.raises(ValueError, match="not a multiple of 64"):
        _lowbit.PackedMatrix(w.data, tid, 8, 512, out=big[1:])
    with pytest.raises(ValueError, match=f"needs {n}"):
        _lowbit.PackedMatrix(w.data, tid, 8, 512, out=big[:n - 1])
    with pytest.raises(TypeError, match="uint8"):
        _lowbit.PackedMatrix(w.data, tid, 8, 512, out=np.zeros(n, np.float32))
    ro = _lowbit.empty_packed(n)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        _lowbit.PackedMatrix(w.data, tid, 8, 512, out=ro)
    q8 = random_code_weights("q8_0", 8, 512)
    with pytest.raises(ValueError, match="not repacked"):
        _lowbit.PackedMatrix(q8.data, q8.type_id, 8, 512, out=_lowbit.empty_packed(n))
    zeros = _lowbit.empty_packed(n)
    zeros[:] = 0
    with pytest.raises(ValueError, match="no valid header"):
        _lowbit.PackedMatrix.wrap(zeros)
    m = _lowbit.PackedMatrix(w.data, tid, 8, 512, out=big[:n])
    with pytest.raises(ValueError, match="take 1056 bytes, out has 7"):
        m.unpack(np.empty(7, np.uint8))
    with pytest.raises(ValueError, match="short of"):  # of what the header describes
        _lowbit.PackedMatrix.wrap(big[:n - 1])


def _thp_eligible(address: int) -> bool | None:
    """THPeligible of the mapping holding address (/proc/self/smaps), None where there is none."""
    try:
        smaps = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    inside = False
    for line in smaps:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "THPeligible:":
            return line.split()[1] == "1"
    return None


def test_empty_packed_is_weight_memory():
    """empty_packed hands out the library's memory for packed matrices (lowbit_weights_alloc):
    aligned, writable, alive as long as any view of it, and on Linux in the huge-page slabs
    wherever the kernel allows them at all (THP not "never")."""
    for n in (1, 100, 64 << 10, (3 << 20) + 5):
        a = _lowbit.empty_packed(n)
        assert a.dtype == np.uint8 and a.shape == (n,) and a.flags.writeable
        assert a.ctypes.data % _lowbit.PACKED_ALIGN == 0
    assert _lowbit.empty_packed(0).shape == (0,)
    with pytest.raises(ValueError, match="negative"):
        _lowbit.empty_packed(-1)
    with pytest.raises(ValueError, match="positive"):
        _lowbit.WeightMemory(0)
    # a view outlives the array it came from: the memory stays its own
    a = _lowbit.empty_packed(5 << 20)
    a[:] = np.arange(a.size, dtype=np.uint64).astype(np.uint8)
    tail = a[-4096:]
    del a
    others = [_lowbit.empty_packed(5 << 20) for _ in range(3)]
    for o in others:
        o[:] = 0xEE
    np.testing.assert_array_equal(tail, (np.arange((5 << 20) - 4096, 5 << 20) % 256).astype(np.uint8))
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    if sys.platform.startswith("linux") and os.path.exists(thp):
        allowed = "[never]" not in open(thp).read()
        big = _lowbit.empty_packed(8 << 20)
        big[:] = 1
        assert _thp_eligible(big.ctypes.data) is allowed
