"""GGUF reader/writer: round trips, cross-checks with gguf-py, and hostile files."""

import struct

import numpy as np
import pytest

from pylowbit.gguf import (GGUFError, GGUFFile, MetaValue, TensorSpec, ValueType, tensor_nbytes, type_id,
                           write_gguf)


def _rand_bytes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


ALL_META = {
    "general.architecture": "llama",
    "t.u8": MetaValue(ValueType.UINT8, 200), "t.i8": MetaValue(ValueType.INT8, -5),
    "t.u16": MetaValue(ValueType.UINT16, 65000), "t.i16": MetaValue(ValueType.INT16, -30000),
    "t.u32": 4000000000, "t.i32": -7, "t.f32": 0.5, "t.bool": True,
    "t.u64": MetaValue(ValueType.UINT64, 2**60), "t.i64": -(2**40),
    "t.f64": MetaValue(ValueType.FLOAT64, 1e-300), "t.str": "héllo wörld",
    "t.arr_i32": np.arange(-3, 3, dtype=np.int32), "t.arr_f32": np.array([1.5, -2.0], np.float32),
    "t.arr_str": ["a", "", "ünï"], "t.arr_bool": np.array([True, False]),
    "t.nested": MetaValue(ValueType.ARRAY, [[1, 2], [3]], ValueType.ARRAY),
}

TENSOR_TYPES = [("f32", (3, 5)), ("f16", (2, 8)), ("q8_0", (2, 64)), ("tq1_0", (2, 256)), ("tq2_0", (1, 512)),
                ("i2_s", (4, 128)), ("q2_0", (3, 64)), ("pq2_0", (2, 128)), ("ptq1_0", (2, 256)),
                ("q4_k", (1, 256)), ("q6_k", (2, 256)), ("f32", (7,))]


def _specs():
    out = []
    for i, (fmt, shape) in enumerate(TENSOR_TYPES):
        nb = tensor_nbytes(type_id(fmt), shape)
        out.append(TensorSpec(f"t{i}.{fmt}", type_id(fmt), shape, _rand_bytes(nb, i)))
    return out


def test_round_trip_all_value_and_tensor_types(tmp_path):
    p = write_gguf(tmp_path / "a.gguf", ALL_META, _specs())
    with GGUFFile(p) as f:
        assert f.version == 3 and f.alignment == 32
        assert f.get("t.u8", int) == 200 and f.get("t.i8", int) == -5 and f.get("t.u16", int) == 65000
        assert f.get("t.i16", int) == -30000 and f.get("t.u32", int) == 4000000000 and f.get("t.i32", int) == -7
        assert f.get("t.f32", float) == 0.5 and f.get("t.bool", bool) is True and f.get("t.u64", int) == 2**60
        assert f.get("t.i64", int) == -(2**40) and f.get("t.f64", float) == 1e-300
        assert f.get("t.str", str) == "héllo wörld"
        np.testing.assert_array_equal(f.get("t.arr_i32", list), np.arange(-3, 3))
        np.testing.assert_array_equal(f.get("t.arr_f32", list), [1.5, -2.0])
        assert f.get("t.arr_str", list) == ["a", "", "ünï"]
        assert f.get("t.arr_bool", list).tolist() == [True, False]
        assert [list(x) for x in f.get("t.nested", list)] == [[1, 2], [3]]
        assert f.metadata_types["t.u8"][0] == ValueType.UINT8
        assert f.metadata_types["t.arr_str"] == (ValueType.ARRAY, ValueType.STRING)
        for spec in _specs():
            t = f.tensor(spec.name)
            assert t.shape == tuple(spec.shape) and t.file_type_id == spec.type_id
            assert t.offset % 32 == 0
            np.testing.assert_array_equal(t.data, spec.data)
            assert np.shares_memory(t.data, f._buf)  # zero copy: a view of the mapping


def test_typed_get_refuses_wrong_type(tmp_path):
    p = write_gguf(tmp_path / "a.gguf", ALL_META, [])
    with GGUFFile(p) as f:
        with pytest.raises(GGUFError, match="t.str.*expected int"):
            f.get("t.str", int)
        with pytest.raises(GGUFError, match="t.u32.*expected str"):
            f.get("t.u32", str)
        with pytest.raises(GGUFError, match="missing metadata key 'nope'"):
            f.get("nope")
        assert f.get("nope", int, 3) == 3


def test_matches_gguf_py_reader_both_ways(tmp_path):
    gguf = pytest.importorskip("gguf")
    known = [s for s in _specs() if s.type_id not in (36, 42, 142, 143)]
    meta = {k: v for k, v in ALL_META.items() if k != "t.nested"}
    p = write_gguf(tmp_path / "ours.gguf", meta, known)
    r = gguf.GGUFReader(p)
    assert r.fields["t.str"].contents() == "héllo wörld"
    assert r.fields["t.u64"].contents() == 2**60
    assert r.fields["t.arr_str"].contents() == ["a", "", "ünï"]
    by_name = {t.name: t for t in r.tensors}
    for s in known:
        np.testing.assert_array_equal(np.asarray(by_name[s.name].data).reshape(-1).view(np.uint8), s.data)
        assert [int(x) for x in by_name[s.name].shape] == list(reversed(s.shape))
    # and a file gguf-py wrote, read by us
    w = gguf.GGUFWriter(tmp_path / "theirs.gguf", "llama")
    w.add_uint32("llama.block_count", 3)
    w.add_array("x.list", [1.0, 2.0])
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    w.add_tensor("w", x)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with GGUFFile(tmp_path / "theirs.gguf") as f:
        assert f.get("llama.block_count", int) == 3
        np.testing.assert_array_equal(f.tensor("w").data.view(np.float32).reshape(4, 32), x)


def test_writer_is_atomic_and_checks_sizes(tmp_path):
    p = tmp_path / "m.gguf"
    with pytest.raises(GGUFError, match="got 3 bytes"):
        write_gguf(p, {}, [TensorSpec("w", 0, (2,), b"abc")])

    def boom():
        raise RuntimeError("generator failed")

    with pytest.raises(RuntimeError):
        write_gguf(p, {}, [TensorSpec("w", 0, (2,), boom)])
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temp file is left
    with pytest.raises(GGUFError, match="duplicate tensor name"):
        write_gguf(p, {}, [TensorSpec("w", 0, (1,), b"\0" * 4), TensorSpec("w", 0, (1,), b"\0" * 4)])
    write_gguf(p, {"k": 1}, [TensorSpec("w", 0, (1,), b"\0" * 4)], alignment=64)
    with GGUFFile(p) as f:
        assert f.alignment == 64 and f.tensor("w").offset % 64 == 0


# ---- type id 42: group-64 Q2_0 or legacy group-128 data, told apart by byte span ------------

def _retype(path, name, new_id):
    """Patch the stored type id of tensor `name` in place."""
    raw = bytearray(path.read_bytes())
    key = struct.pack("<Q", len(name)) + name.encode()
    i = raw.index(key) + len(key)
    n_dims = struct.unpack_from("<I", raw, i)[0]
    struct.pack_into("<I", raw, i + 4 + 8 * n_dims, new_id)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("stored,expect", [(42, 42), (142, 142)])
def test_type_42_resolved_by_span(tmp_path, stored, expect):
    shape = (16, 512)  # big enough that the two sizes differ by more than the alignment
    nb = tensor_nbytes(stored, shape)
    p = write_gguf(tmp_path / "q.gguf", {}, [TensorSpec("a", stored, shape, _rand_bytes(nb)),
                                             TensorSpec("b", 0, (4,), np.zeros(16, np.uint8))])
    _retype(p, "a", 42)
    with GGUFFile(p) as f:
        t = f.tensor("a")
        assert t.file_type_id == 42 and t.type_id == expect and t.nbytes == nb


def test_type_42_refuses_span_that_fits_neither(tmp_path):
    shape = (16, 512)
    nb = tensor_nbytes(35, shape)  # a TQ2_0-sized span: smaller than either reading of id 42
    p = write_gguf(tmp_path / "q.gguf", {}, [TensorSpec("a", 35, shape, _rand_bytes(nb)),
                                             TensorSpec("b", 0, (4,), np.zeros(16, np.uint8))])
    _retype(p, "a", 42)
    with pytest.raises(GGUFError, match="fits neither"):
        GGUFFile(p)


# ---- hostile files -----------------------------------------------------------------------------

def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def build(kvs=(), tensors=(), data=b"", version=3, n_kv=None, n_t=None, align=32) -> bytes:
    """Raw GGUF bytes; kvs: (key, type, payload bytes); tensors: (name, ne list, type id, offset)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_t is None else n_t,
                                len(kvs) if n_kv is None else n_kv)
    for k, t, payload in kvs:
        out += _s(k) + struct.pack("<I", t) + payload
    for name, ne, tid, off in tensors:
        out += _s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", tid, off)
    out += b"\0" * (-len(out) % align)
    return out + data


F32x4 = np.arange(4, dtype=np.float32).tobytes()
BAD = {
    "bad magic": (b"GGML" + build()[4:], "not a GGUF file"),
    "version": (build(version=7), "unsupported GGUF version 7"),
    "absurd tensor count": (build(n_t=2**62), "tensor count .* absurd"),
    "absurd kv count": (build(n_kv=2**40), "metadata count .* absurd"),
    "absurd string": (build([("k", 8, struct.pack("<Q", 2**60))]), "absurd|truncated"),
    "absurd array": (build([("k", 9, struct.pack("<IQ", 6, 2**50))]), "array length .* absurd"),
    "array of unknown type": (build([("k", 9, struct.pack("<IQ", 77, 1))]), "unknown array element type 77"),
    "unknown value type": (build([("k", 42, b"")]), "unknown value type 42"),
    "bad bool": (build([("k", 7, b"\x05")]), "neither 0 nor 1"),
    "duplicate key": (build([("k", 4, struct.pack("<I", 1))] * 2), "duplicate metadata key 'k'"),
    "deep nesting": (build([("k", 9, struct.pack("<IQ", 9, 1) * 6 + struct.pack("<IQ", 4, 0))]), "nested deeper"),
    "alignment not pow2": (build([("general.alignment", 4, struct.pack("<I", 48))]), "not a positive power of two"),
    "alignment wrong type": (build([("general.alignment", 8, _s("32"))]), "general.alignment.*expected int"),
    "too many dims": (build(tensors=[("w", [1, 1, 1, 1, 4], 0, 0)], data=F32x4), "5 dims"),
    "zero dim": (build(tensors=[("w", [4, 0], 0, 0)], data=F32x4), "zero dimension"),
    "overflowing dims": (build(tensors=[("w", [2**32, 2**32, 2**32], 0, 0)], data=F32x4), "overflow"),
    "unknown tensor type": (build(tensors=[("w", [4], 99, 0)], data=F32x4), "unknown type id 99"),
    "misaligned offset": (build(tensors=[("w", [1], 0, 4)], data=F32x4 * 2), "not a multiple of the alignment"),
    "tensor past EOF": (build(tensors=[("w", [8], 0, 0)], data=F32x4), "past the end of the file"),
    "offset past EOF": (build(tensors=[("w", [4], 0, 2**40)], data=F32x4), "past the end of the file"),
    "duplicate tensor": (build(tensors=[("w", [4], 0, 0), ("w", [4], 0, 32)], data=F32x4 + bytes(16) + F32x4),
                         "duplicate tensor name 'w'"),
    "overlapping tensors": (build(tensors=[("a", [16], 0, 0), ("b", [4], 0, 32)], data=bytes(64)), "overlaps"),
    "row not a block multiple": (build(tensors=[("w", [48], 8, 0)], data=bytes(64)), "not a multiple of the q8_0 block"),
    "truncated tensor info": (build(tensors=[("w" * 40, [4], 0, 0)])[:80], "truncated file: dim 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_files_are_refused_by_name(tmp_path, case):
    raw, msg = BAD[case]
    p = tmp_path / "bad.gguf"
    p.write_bytes(raw)
    with pytest.raises(GGUFError, match=msg):
        GGUFFile(p)


def test_every_truncation_and_random_corruption_gives_gguf_error(tmp_path):
    good = write_gguf(tmp_path / "good.gguf", ALL_META, _specs()).read_bytes()
    p = tmp_path / "cut.gguf"
    # every prefix up to the end of the header, then a stride through the tensor data
    with GGUFFile(tmp_path / "good.gguf") as f:
        header_end = f.data_offset
    for n in list(range(0, header_end)) + list(range(header_end, len(good), 97)):
        p.write_bytes(good[:n])
        with pytest.raises(GGUFError):
            GGUFFile(p)
    rng = np.random.default_rng(5)
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(300):
        raw = bytearray(good)
        for i in rng.integers(0, header_end, rng.integers(1, 4)):
            raw[i] = rng.integers(0, 256)
        p.write_bytes(bytes(raw))
        try:
            GGUFFile(p).close()
            outcomes["ok"] += 1
        except GGUFError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0  # corruption is noticed; no other exception type escaped


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(GGUFError, match="cannot open"):
        GGUFFile(tmp_path / "nope.gguf")
