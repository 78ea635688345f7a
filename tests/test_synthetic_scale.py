"""The generator at Bonsai 2 27B's scale, tested on qwen35-tiny (CI never writes the 7 GB files):
random codes straight to packed bytes, the release's recipe (ternary embedding and head, BF16 gates,
prism.hadamard metadata), the exact tensor bytes of the real files, and the cache: disk check,
atomic write, progress, reuse, the lock."""
from __future__ import annotations

import shutil
import threading
import time
from collections import namedtuple

import numpy as np
import pytest

import pylowbit as lb
import pylowbit.bench_models as B
from pylowbit.gguf import DiskSpaceError, GGUFFile, tensor_nbytes, type_id
from pylowbit.model import Model
from pylowbit.model import synthetic as S

from test_bench_cli import bench


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYLOWBIT_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("fmt", S.TERNARY)
def test_random_codes_are_uniform_ternary_with_the_set_scale(fmt, monkeypatch):
    """Decoded by the format's own codec: every weight is -d, 0 or +d, each about a third of the
    time, and the chunks (made small here) add up to exactly the tensor's bytes."""
    monkeypatch.setattr(S, "CODE_CHUNK_BYTES", 4096)
    rows, cols = 96, 1024
    chunks = list(S.random_ternary_bytes(3, "w", rows, cols, fmt))
    assert len(chunks) > 2
    data = np.concatenate([np.asarray(c).reshape(-1) for c in chunks])
    assert data.nbytes == tensor_nbytes(type_id(fmt), (rows, cols))
    w = np.asarray(lb.dequantize(data, fmt, (rows, cols)), dtype=np.float32)
    d = np.float32(S.ternary_scale(cols))
    assert set(np.unique(w).tolist()) <= {-float(d), 0.0, float(d)}
    share = [(w == v).mean() for v in (-d, 0, d)]
    assert all(abs(s - 1 / 3) < 0.02 for s in share), share
    again = np.concatenate([np.asarray(c).reshape(-1) for c in S.random_ternary_bytes(3, "w", rows, cols, fmt)])
    assert np.array_equal(data, again)  # seeded by (seed, name)
    other = np.concatenate([np.asarray(c).reshape(-1) for c in S.random_ternary_bytes(3, "v", rows, cols, fmt)])
    assert not np.array_equal(data, other)


def test_random_q8_0_codes_span_the_format_with_unit_spread(monkeypatch):
    """The bench's Q8_0 embedding written without a float pass: every code in [-127, 127], the
    blocks' one scale, values spread about as a standard normal's, exactly the tensor's bytes."""
    monkeypatch.setattr(S, "CODE_CHUNK_BYTES", 4096)
    rows, cols = 64, 512
    chunks = list(S.random_q8_0_bytes(5, "token_embd.weight", rows, cols))
    assert len(chunks) > 2
    data = np.concatenate([np.asarray(c).reshape(-1) for c in chunks])
    assert data.nbytes == tensor_nbytes(type_id("q8_0"), (rows, cols))
    w = np.asarray(lb.dequantize(data, "q8_0", (rows, cols)), dtype=np.float32)
    d = float(np.float16(np.sqrt(3.0) / 127))
    codes = np.rint(w / d)
    assert np.allclose(w, codes * d) and codes.min() == -127 and codes.max() == 127
    assert abs(w.std() - 1.0) < 0.05 and abs(w.mean()) < 0.05
    with pytest.raises(ValueError, match="not a multiple of the q8_0 block"):
        list(S.random_q8_0_bytes(0, "w", 2, 48))


def test_random_codes_refuse_what_they_cannot_write():
    with pytest.raises(ValueError, match="not a multiple of the pq2_0 block"):
        list(S.random_ternary_bytes(0, "w", 2, 200, "pq2_0"))
    with pytest.raises(ValueError, match="no random-code writer for 'q8_0'"):
        list(S.random_ternary_bytes(0, "w", 2, 256, "q8_0"))
    with pytest.raises(ValueError, match="random_codes needs a ternary format"):
        S.write_synthetic_model("x.gguf", fmt="f16", preset="qwen35-tiny", random_codes=True)


# The real files' tensor bytes (QWEN35.md section 6): 26 869 760 000 ternary weights at 34 or 28 bytes
# per 128, 47 185 920 bytes of BF16 ssm_alpha / ssm_beta, 10 582 016 of F32; both files are 11 120 992
# bytes of header more (7 206 168 928 and 5 946 648 928 bytes).
REAL_TENSOR_BYTES = {"pq2_0": 7_206_168_928 - 11_120_992, "ptq1_0": 5_946_648_928 - 11_120_992}


@pytest.mark.parametrize("fmt", ["pq2_0", "ptq1_0"])
def test_bonsai2_27b_files_hold_the_real_files_tensor_bytes(fmt, cache):
    spec = B.synthetic_file("bonsai2-27b", fmt)
    assert spec.tensor_bytes() == REAL_TENSOR_BYTES[fmt]
    assert spec.rotation_block == 1024 and spec.kwargs["embed_fmt"] == fmt
    assert spec.path.parent == cache and not spec.path.exists()  # the layout alone: nothing written


def test_bench_rotates_the_release_types_and_not_llama_cpp_runs(cache):
    assert B.synthetic_file("bonsai2-27b", "q2_0").rotation_block == 1024
    assert B.synthetic_file("bonsai2-27b", "q2_0", plain=True).rotation_block is None
    assert B.synthetic_file("bonsai2-27b", "tq2_0").rotation_block is None
    names = {B.synthetic_file("bonsai2-27b", f, plain=p).path.name
             for f in B.BENCH_TYPES for p in (False, True)}
    assert len(names) == len(B.BENCH_TYPES) + 3  # the rotated types' plain files are separate


@pytest.fixture(scope="module")
def tiny_pq2(tmp_path_factory):
    import os

    old = os.environ.get("PYLOWBIT_CACHE")
    os.environ["PYLOWBIT_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield B.synthetic_model("qwen35-tiny", "pq2_0")
    finally:
        if old is None:
            del os.environ["PYLOWBIT_CACHE"]
        else:
            os.environ["PYLOWBIT_CACHE"] = old


def test_release_recipe_on_the_tiny_preset(tiny_pq2):
    """qwen35-tiny takes the 27B path: ternary token_embd and output, BF16 gates, F32 small tensors,
    and the full prism.hadamard metadata with one sign vector per input width."""
    spec = B.synthetic_file("qwen35-tiny", "pq2_0")
    with GGUFFile(tiny_pq2) as f:
        m, t = f.metadata, f.tensors
        types = {n: x.fmt for n, x in t.items()}
        assert types["token_embd.weight"] == types["output.weight"] == "pq2_0"
        assert types["blk.0.ssm_alpha.weight"] == types["blk.0.ssm_beta.weight"] == "bf16"
        assert types["blk.0.ssm_conv1d.weight"] == types["blk.0.ssm_a"] == types["blk.0.ssm_dt.bias"] == "f32"
        widths = sorted({x.shape[-1] for x in t.values() if len(x.shape) == 2 and x.fmt == "pq2_0"})
        assert m["prism.hadamard.block_size"] == 256
        assert list(m["prism.hadamard.sign_widths"]) == widths
        signs = np.asarray(m["prism.hadamard.sign_values"])
        assert signs.size == sum(widths) and set(np.unique(signs).tolist()) == {-1.0, 1.0}
        assert m["prism.hadamard.gdn_v_grouped"] is True
        assert list(m["prism.hadamard.inverse_weight_names"]) == ["token_embd.weight"]
        folded = set(m["prism.hadamard.weight_names"])
        assert "output.weight" in folded and not any("ssm_alpha" in n or "ssm_beta" in n for n in folded)
        assert sum(x.nbytes for x in t.values()) == spec.tensor_bytes()


def test_release_recipe_file_runs(tiny_pq2):
    model = Model(tiny_pq2, ctx=32, threads=1)
    assert model.rot is not None
    logits = model.forward(list(range(10, 18)), pos=0)
    assert logits.shape == (model.vocab_size,) and np.isfinite(logits).all() and logits.std() > 0
    step = model.forward([20])
    assert np.isfinite(step).all()


def test_cached_file_is_reused(tiny_pq2, monkeypatch):
    def must_not_write(*a, **k):
        raise AssertionError("the cached file was written again")

    monkeypatch.setattr(S, "write_synthetic_model", must_not_write)
    st = tiny_pq2.stat()
    assert B.synthetic_model("qwen35-tiny", "pq2_0") == tiny_pq2
    assert tiny_pq2.stat().st_ino == st.st_ino and tiny_pq2.stat().st_mtime_ns == st.st_mtime_ns


def test_progress_goes_up_to_the_file_size_chunk_by_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "CODE_CHUNK_BYTES", 1024)
    seen = []
    p = S.write_synthetic_model(tmp_path / "x.gguf", fmt="ptq1_0", preset="qwen35-tiny", random_codes=True,
                                embed_fmt="ptq1_0", rotation_block=256,
                                progress=lambda done, total, name: seen.append((done, total, name)))
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and done[-1] == seen[-1][1] == p.stat().st_size
    n_tensors = len({n for _, _, n in seen})
    assert len(seen) > 2 * n_tensors  # within a tensor too: a 1.3 GB embedding is no frozen bar
    assert len({d for d, _, n in seen if n == "token_embd.weight"}) > 3


def test_interrupted_write_leaves_no_file(cache, monkeypatch):
    real = S.write_synthetic_model

    def interrupted(path, progress=None, **kw):
        def stop(done, total, name):
            if done > total // 2:
                raise KeyboardInterrupt
            progress(done, total, name)
        return real(path, progress=stop, **kw)

    monkeypatch.setattr(S, "write_synthetic_model", interrupted)
    with pytest.raises(KeyboardInterrupt):
        B.synthetic_model("qwen35-tiny", "tq2_0")
    assert list(cache.iterdir()) == []


Usage = namedtuple("Usage", "total used free")


def test_too_little_disk_refuses_before_writing(cache, monkeypatch):
    need = B.synthetic_file("qwen35-tiny", "tq1_0").tensor_bytes()
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10 * need, 10 * need - 1000, 1000))
    with pytest.raises(DiskSpaceError, match=r"not enough disk space for synthetic-qwen35-tiny-tq1_0.*"
                                             r"needs 0\.\d\d GB, 0\.00 GB are free"):
        B.synthetic_model("qwen35-tiny", "tq1_0")
    assert list(cache.iterdir()) == []


def test_bench_without_disk_space_is_one_line_and_no_file(cache):
    """The CLI: the disk check covers every type asked for, before the first is written."""
    pre = ("import shutil, collections\nU = collections.namedtuple('U', 'total used free')\n"
           "shutil.disk_usage = lambda p: U(1 << 40, (1 << 40) - (5 << 20), 5 << 20)")
    r = bench("--preset", "qwen35-tiny", "--type", "tq2_0,pq2_0", "-t", "1", "-r", "1", "-n", "1", "-p", "0",
              pre=pre, env={"PYLOWBIT_CACHE": str(cache)})
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "not enough disk space" in lines[0] and "GB are free" in lines[0], r.stderr
    assert "synthetic-qwen35-tiny-tq2_0" in lines[0] and "synthetic-qwen35-tiny-pq2_0" in lines[0]
    assert list(cache.iterdir()) == []


def test_a_second_writer_waits_for_the_first_and_reuses_its_file(cache, monkeypatch):
    """While one process holds the file's lock (writing it), another asking for it waits, then finds
    it and writes nothing; the lock file goes with the last holder."""
    spec = B.synthetic_file("qwen35-tiny", "q2_0")
    got = []
    monkeypatch.setattr(S, "write_synthetic_model", lambda *a, **k: got.append("wrote"))
    t = threading.Thread(target=lambda: got.append(B.synthetic_model("qwen35-tiny", "q2_0")))
    with B.exclusive_lock(spec.path):
        assert any(p.name.endswith(".lock") for p in cache.iterdir())
        t.start()
        time.sleep(0.3)
        assert got == []  # waiting for the lock
        spec.path.write_bytes(b"written by the first")
    t.join(timeout=30)
    assert got == [spec.path]
    assert [p.name for p in cache.iterdir()] == [spec.path.name]
