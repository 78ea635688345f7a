"""GGUF reader/writer: round trips, cross-checks with gguf-py, and hostile files."""

import struct

import numpy as np
import pytest

from pylowbit.gguf import (GGUFError, GGUFFile, MetaValue, TensorSpec, ValueType, atomic_file, gguf_header,
                           tensor_nbytes, type_id, write_gguf)


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


def test_header_builder_is_what_the_writer_writes(tmp_path):
    specs = _specs()
    head, spans = gguf_header(ALL_META, specs, alignment=64)
    p = write_gguf(tmp_path / "a.gguf", ALL_META, specs, alignment=64)
    raw = p.read_bytes()
    assert len(head) % 64 == 0 and raw[:len(head)] == head
    with GGUFFile(p) as f:
        assert f.data_offset == len(head)
        assert [(f.tensor(s.name).offset - len(head), f.tensor(s.name).nbytes) for s in specs] == spans


@pytest.mark.parametrize("tmpfile", ["O_TMPFILE", "mkstemp"])
def test_atomic_writer_replaces_whole_or_not_at_all(tmp_path, monkeypatch, tmpfile):
    import os

    if tmpfile == "mkstemp":  # the fallback where the kernel has no O_TMPFILE
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    p = tmp_path / "m.gguf"
    write_gguf(p, {"k": 1}, [TensorSpec("w", 0, (1,), b"\0" * 4)])
    old = p.read_bytes()
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_file(p) as f:
            f.write(b"partial")
            raise RuntimeError("boom")
    assert p.read_bytes() == old and sorted(x.name for x in tmp_path.iterdir()) == ["m.gguf"]
    with atomic_file(p) as f:  # over an existing file: replaced in one step
        f.write(b"new")
    assert p.read_bytes() == b"new" and sorted(x.name for x in tmp_path.iterdir()) == ["m.gguf"]
    with atomic_file(tmp_path / "fresh") as f:
        f.write(b"x")
    assert (tmp_path / "fresh").read_bytes() == b"x"


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


# ---- hostile files: the table of refused files is tests/test_malformed.py; here, sweeps --------------

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


def test_long_string_array_is_lazy_and_checked(tmp_path):
    """Past LAZY_STRING_ARRAY entries a string array is a StringArray: same strings (invalid UTF-8 kept
    as surrogate escapes), written back unchanged, and still checked against the file size at open."""
    from pylowbit.gguf import LAZY_STRING_ARRAY, StringArray

    words = [f"w{i}\u2581ü" for i in range(LAZY_STRING_ARRAY + 5)]
    words[7] = b"\xff\xfebad".decode("utf-8", errors="surrogateescape")
    words[8] = ""
    p = tmp_path / "s.gguf"
    write_gguf(p, {"general.architecture": "llama", "t.words": words}, [])
    with GGUFFile(p) as f:
        got = f.get("t.words", list, of=str)
        assert isinstance(got, StringArray) and len(got) == len(words)
        assert got == words and list(got) == words and got[-1] == words[-1] and got[5:9] == words[5:9]
        assert got.index(words[100]) == 100
        write_gguf(tmp_path / "back.gguf", {"t.words": got}, [])
    assert (tmp_path / "back.gguf").read_bytes().count(b"\xff\xfebad") == 1
    data = p.read_bytes()
    for cut in (len(data) - 3, data.index(b"w3000") + 2):
        q = tmp_path / "cut.gguf"
        q.write_bytes(data[:cut])
        with pytest.raises(GGUFError, match=r"truncated file: metadata 't.words'\[\d+\]"):
            GGUFFile(q)
    i = data.index(struct.pack("<Q", len(words[200].encode())) + words[200].encode())
    q.write_bytes(data[:i] + struct.pack("<Q", 1 << 40) + data[i + 8:])
    with pytest.raises(GGUFError, match=r"'t.words'\[200\]: string length \d+ is absurd"):
        GGUFFile(q)
