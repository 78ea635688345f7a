"""pylowbit.convert / repack / `pylowbit quantize`: lossless repacks bit-exact, lossy ones refused,
rotated files that decode like their source, atomic writes that survive being killed."""
from __future__ import annotations

import hashlib
import os
import select
import signal
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import pylowbit as lb
from pylowbit.convert import ConversionError, convert, decode_float, quantize_search
from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, write_gguf
from pylowbit.model import load_model
from pylowbit.model.synthetic import write_synthetic_model
from pylowbit.transcode import CODE_FORMATS, LOW_BIT, LossyError, pack_codes, transcode, transcode_problems, unpack_codes

LOWBIT = list(LOW_BIT)
TOKENS = np.array([5, 17, 99, 3, 200, 41, 7, 8, 300, 2])


def fp16_exact(v):
    return np.float32(np.float16(v))


def ternary_values(rows, cols, rng, zeros=True, scale=None):
    """Ternary weights with ONE fp16-exact scale for the whole tensor: every low-bit format can hold
    them (Q1_0 only without zeros).  Every 64-block has a nonzero, so scales are never free."""
    lo = -1 if zeros else 0
    c = rng.integers(lo, 2, size=(rows, cols)).astype(np.float32)
    if not zeros:
        c = c * 2 - 1
    c[:, ::64] = 1.0
    return c * (scale if scale is not None else fp16_exact(0.0123))


def as_fmt(values, fmt):
    return lb.quantize(np.ascontiguousarray(values, dtype=np.float32), fmt)


# ---- codecs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", list(CODE_FORMATS))
def test_unpack_pack_is_bit_exact_against_the_c_codecs(fmt):
    rng = np.random.default_rng(1)
    for x in (rng.standard_normal((3, 512)), np.zeros((1, 256)), ternary_values(2, 256, rng)):
        t = as_fmt(x, fmt)
        codes, scales, bs = unpack_codes(t)
        v = (codes.reshape(-1, bs).astype(np.float32) * scales[:, None]).reshape(t.shape)
        np.testing.assert_array_equal(v, t.dequantize())
        assert pack_codes(fmt, codes, scales, t.shape).data.tobytes() == t.data.tobytes()


# ---- lossless pairs: bit-exact both ways ---------------------------------------------------------

PAIRS = [(a, b) for a in LOWBIT for b in LOWBIT if a != b]


@pytest.mark.parametrize("a,b", PAIRS)
def test_every_lossless_pair_round_trips_bit_exact(a, b):
    rng = np.random.default_rng(zlib.crc32(f"{a}>{b}".encode()))
    zeros = "q1_0" not in (a, b)  # Q1_0 has no zero code
    x = ternary_values(4, 512, rng, zeros=zeros)
    src = as_fmt(x, a)
    np.testing.assert_array_equal(src.dequantize(), x)
    assert transcode_problems(src, b) == []
    mid = transcode(src, b)
    np.testing.assert_array_equal(mid.dequantize(), x)
    back = transcode(mid, a)
    assert back.data.tobytes() == src.data.tobytes()


def test_always_lossless_directions_with_varied_scales():
    """PQ2_0 -> Q2_0, TQ -> Q2_0/PQ2_0/PTQ1_0/Q8_0, TQ1_0 -> TQ2_0, everything -> Q8_0 hold any block scales."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 1024)).astype(np.float32)
    for a, targets in {"pq2_0": ["q2_0", "q8_0"], "tq2_0": ["q2_0", "pq2_0", "ptq1_0", "tq1_0", "q8_0"],
                       "tq1_0": ["tq2_0", "q2_0", "pq2_0", "ptq1_0"], "ptq1_0": ["q2_0", "pq2_0"],
                       "q1_0": ["q2_0", "pq2_0", "ptq1_0"]}.items():
        src = as_fmt(x, a)
        for b in targets:
            out = transcode(src, b)
            np.testing.assert_array_equal(out.dequantize(), src.dequantize(), err_msg=f"{a}->{b}")
            if b in ("q2_0",) and a != "q1_0" or (a, b) == ("tq2_0", "tq1_0"):
                assert transcode(out, a).data.tobytes() == src.data.tobytes()


# ---- lossy pairs: refused with what would be lost -------------------------------------------------

def lossy_cases():
    rng = np.random.default_rng(5)
    g = rng.standard_normal((2, 512)).astype(np.float32)
    plus2 = np.ones((2, 512), np.float32) * fp16_exact(0.5)
    plus2[:, 3] = 1.0  # code +2 with d = 0.5
    q2_plus2 = pack_codes("q2_0", *_codes_scales(plus2, 64), (2, 512))
    i2_odd = as_fmt(ternary_values(2, 512, rng, scale=np.float32(0.1)), "i2_s")  # 0.1 is not fp16-exact
    cases = []
    pq2_plus2 = pack_codes("pq2_0", *_codes_scales(plus2, 128), (2, 512))
    i2_code3 = pack_codes("i2_s", *_codes_scales(plus2, 1024), (2, 512))  # this library reads code 3 as +2
    for b in ("tq1_0", "tq2_0", "ptq1_0", "i2_s", "q1_0"):
        cases.append(("q2_0", q2_plus2, b, "code"))
        cases.append(("pq2_0", pq2_plus2, b, "code"))
        if b != "i2_s":
            cases.append(("i2_s", i2_code3, b, "code"))
    for a in ("q2_0", "pq2_0", "ptq1_0", "q1_0"):  # per-64/128 scales into bigger blocks
        for b in ("tq1_0", "tq2_0", "i2_s") + (("pq2_0", "ptq1_0") if a == "q2_0" else ()):
            if a == "q1_0" and b in ("pq2_0", "ptq1_0"):
                continue
            cases.append((a, as_fmt(g, a), b, "scale"))
    for a in ("tq1_0", "tq2_0"):
        cases.append((a, as_fmt(g, a), "i2_s", "scale"))
    for b in ("tq1_0", "tq2_0", "ptq1_0", "q2_0", "pq2_0", "q8_0"):
        cases.append(("i2_s", i2_odd, b, "fp16"))
    for a in ("tq1_0", "tq2_0", "ptq1_0", "q2_0", "pq2_0", "i2_s"):
        cases.append((a, as_fmt(ternary_values(2, 512, rng), a), "q1_0", "code"))
    return cases


def _codes_scales(x, bs):
    X = x.reshape(-1, bs)
    d = np.where(np.abs(X).max(1) > 0, np.abs(X).min(1, where=X != 0, initial=np.inf), 0).astype(np.float32)
    return np.rint(X / d[:, None]).astype(np.int8).reshape(-1), d


@pytest.mark.parametrize("a,src,b,prop", lossy_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_lossy_pair_is_refused_with_the_reason(a, src, b, prop):
    assert src.fmt == a
    problems = transcode_problems(src, b)
    assert problems and any(prop in p for p, _, _ in problems), problems
    with pytest.raises(LossyError, match="would lose information") as e:
        transcode(src, b)
    assert all(0 < n <= tot for _, n, tot in e.value.problems)


# ---- files: convert() and the CLI ---------------------------------------------------------------

def tensors_bytes(path):
    f = GGUFFile(path)
    out = {n: (t.fmt, bytes(t.data)) for n, t in f.tensors.items()}
    meta = dict(f.metadata)
    f.close()
    return out, meta


@pytest.mark.parametrize("a,b", [("tq2_0", "pq2_0"), ("tq2_0", "tq1_0"), ("pq2_0", "q2_0"), ("i2_s", "tq2_0"),
                                 ("ptq1_0", "q2_0"), ("q2_0", "ptq1_0"), ("tq1_0", "ptq1_0")])
def test_file_round_trip_is_bit_exact(tmp_path, a, b):
    arch = "bitnet-b1.58" if a == "i2_s" else "llama"
    src = write_synthetic_model(tmp_path / "a.gguf", arch, a)
    convert(src, tmp_path / "b.gguf", b)
    convert(tmp_path / "b.gguf", tmp_path / "c.gguf", a)
    ta, ma = tensors_bytes(src)
    tb, _ = tensors_bytes(tmp_path / "b.gguf")
    tc, mc = tensors_bytes(tmp_path / "c.gguf")
    assert ta == tc
    assert {f for f, _ in tb.values()} >= {b}
    ma.pop("general.file_type", None), mc.pop("general.file_type", None)
    assert {k: str(v) for k, v in ma.items()} == {k: str(v) for k, v in mc.items()}
    # the middle file holds the same values (its kernels may round activations differently)
    fa, fb = GGUFFile(src), GGUFFile(tmp_path / "b.gguf")
    for n, t in fa.tensors.items():
        u = fb.tensors[n]
        np.testing.assert_array_equal(decode_float(u.data, u.fmt, u.shape), decode_float(t.data, t.fmt, t.shape))
    fa.close(), fb.close()


def test_lossy_file_conversion_refused_then_allowed(tmp_path):
    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "q2_0")  # per-row scales, 64-blocks
    x = src.read_bytes()
    convert(src, tmp_path / "ok.gguf", "pq2_0")  # the synthetic scales are per row: pairs share
    q2 = tmp_path / "q2.gguf"
    convert(write_synthetic_model(tmp_path / "f.gguf", "llama", "f32"), q2, "q2_0")
    with pytest.raises(ConversionError, match=r"blk\.0\.\w+\.weight \(q2_0 -> pq2_0\) would lose information: "
                                              r"\d+ of \d+ blocks of 64 weights have a scale"):
        convert(q2, tmp_path / "no.gguf", "pq2_0")
    assert not (tmp_path / "no.gguf").exists()
    convert(q2, tmp_path / "yes.gguf", "pq2_0", allow_lossy=True)
    assert GGUFFile(tmp_path / "yes.gguf").tensors["blk.0.attn_q.weight"].fmt == "pq2_0"
    assert src.read_bytes() == x


def test_cli_lossy_is_one_line_and_exit_1(tmp_path, capsys):
    from pylowbit.cli import main

    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "tq2_0")
    assert main(["quantize", str(src), str(tmp_path / "b.gguf"), "--type", "q1_0", "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use code(s) [0]" in err[0] and "--allow-lossy" in err[0]
    assert main(["quantize", str(src), str(tmp_path / "b.gguf"), "--type", "q1_0", "--allow-lossy", "-q"]) == 0


def test_float_quantize_and_non_fitting_rows(tmp_path):
    # width 384: fits Q2_0 / PTQ1_0, not TQ2_0 (256); ffn_down (512 wide) fits everything
    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "f32", d_model=384, n_head=6, n_ff=512)
    notes = []
    r = convert(src, tmp_path / "b.gguf", "tq2_0", notice=notes.append)
    assert r["tensors"]["blk.0.ffn_down.weight"][1] == "tq2_0"
    assert r["tensors"]["blk.0.attn_q.weight"][1] == "f32"
    assert any("blk.0.attn_q.weight" in n and "does not fit tq2_0" in n for n in notes)
    r = convert(src, tmp_path / "c.gguf", "tq2_0", keep="q8_0")
    assert r["tensors"]["blk.0.attn_q.weight"][1] == "q8_0" and r["tensors"]["token_embd.weight"][1] == "q8_0"
    assert r["tensors"]["blk.0.attn_norm.weight"][1] == "f32"  # 1-D stays unless --keep is a float type
    r = convert(src, tmp_path / "d.gguf", "q2_0", keep="f16")
    assert r["tensors"]["blk.0.attn_norm.weight"][1] == "f16" and r["tensors"]["token_embd.weight"][1] == "f16"
    load_model(tmp_path / "d.gguf").forward(TOKENS)


def test_only_and_method(tmp_path):
    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "f32")
    r = convert(src, tmp_path / "b.gguf", "ptq1_0", only=r"ffn_down", rotate=64, method="search")
    changed = {n for n, (a, b, _) in r["tensors"].items() if a != b}
    assert changed == {"blk.0.ffn_down.weight", "blk.1.ffn_down.weight"} == set(r["rotated"])
    ref = load_model(src).forward(TOKENS, logits="all")
    searched = rel(load_model(tmp_path / "b.gguf").forward(TOKENS, logits="all"), ref)
    convert(src, tmp_path / "c.gguf", "ptq1_0", only=r"ffn_down", rotate=64, method="absmax")
    owners = rel(load_model(tmp_path / "c.gguf").forward(TOKENS, logits="all"), ref)
    assert searched < owners, (searched, owners)
    with pytest.raises(ConversionError, match="unknown method"):
        convert(src, tmp_path / "d.gguf", "q2_0", method="best")


@pytest.mark.parametrize("fmt", ["q2_0", "pq2_0", "tq1_0", "tq2_0", "ptq1_0"])
def test_scale_search_never_worse_than_owners_absmax(fmt):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 256)) * rng.random((64, 1)) ** 3).astype(np.float32)
    x[::3, 5] *= 8  # outliers, some negative
    x[1::3, 9] *= -8
    bs = lb.format_info(fmt).block_size
    c, d = quantize_search(x, bs, 2 if fmt in ("q2_0", "pq2_0") else 1)
    ours = pack_codes(fmt, c, d, x.shape).dequantize()
    owners = lb.quantize(x, fmt).dequantize()
    e_ours = ((ours - x) ** 2).reshape(-1, bs).sum(1)
    e_owners = ((owners - x) ** 2).reshape(-1, bs).sum(1)
    assert np.all(e_ours <= e_owners * (1 + 1e-6) + 1e-12)
    assert e_ours.sum() < 0.9 * e_owners.sum()


# ---- rotation ----------------------------------------------------------------------------------

def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # gemma3: tied embedding = LM head
def test_rotated_file_decodes_like_its_float_source(tmp_path, arch):
    src = write_synthetic_model(tmp_path / "f.gguf", arch, "f32")
    ref = load_model(src).forward(TOKENS, logits="all")
    plain = tmp_path / "q.gguf"
    convert(src, plain, "q8_0", keep="q8_0")
    rot = tmp_path / "r.gguf"
    r = convert(src, rot, "q8_0", keep="q8_0", rotate=64, seed=3)
    assert "token_embd.weight" in r["rotated"]
    f = GGUFFile(rot)
    assert f.get("prism.hadamard.inverse_weight_names") == ["token_embd.weight"]
    assert "blk.0.attn_output.weight" in f.get("prism.hadamard.weight_names")
    assert ("output.weight" in f.get("prism.hadamard.weight_names")) == (arch == "llama")
    f.close()
    e_plain = rel(load_model(plain).forward(TOKENS, logits="all"), ref)
    e_rot = rel(load_model(rot).forward(TOKENS, logits="all"), ref)
    assert e_plain < 0.05 and e_rot < 0.05, (e_plain, e_rot)
    # low-bit: rotated or not, the same order of error (random weights have no outliers to spread)
    convert(src, tmp_path / "r2.gguf", "q2_0", rotate=128)
    convert(src, tmp_path / "p2.gguf", "q2_0")
    e2 = rel(load_model(tmp_path / "r2.gguf").forward(TOKENS, logits="all"), ref)
    e2p = rel(load_model(tmp_path / "p2.gguf").forward(TOKENS, logits="all"), ref)
    assert e2 < 2 * e2p + 0.1, (e2, e2p)


def rewrite(src, dst, edit):
    """Copy a GGUF file with metadata changed by edit(meta dict of MetaValue)."""
    f = GGUFFile(src)
    meta = {k: MetaValue(f.metadata_types[k][0], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
    edit(meta)
    specs = [TensorSpec(t.name, t.file_type_id, t.shape, np.array(t.data)) for t in f.tensors.values()]
    write_gguf(dst, meta, specs, alignment=f.alignment)
    f.close()
    return dst


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    d = tmp_path_factory.mktemp("rot")
    src = write_synthetic_model(d / "f.gguf", "llama", "f32")
    convert(src, d / "r.gguf", "q8_0", rotate=64)
    return src, d / "r.gguf"


# Corrupt prism.hadamard.* metadata in a converted file: the rotation rows of tests/test_malformed.py.


def test_rotation_skipped_gives_garbage(tmp_path, rotated):
    src, rot = rotated
    ref = load_model(src).forward(TOKENS, logits="all")
    stripped = rewrite(rot, tmp_path / "s.gguf",
                       lambda m: [m.pop(k) for k in list(m) if k.startswith("prism.hadamard.")])
    assert rel(load_model(rot).forward(TOKENS, logits="all"), ref) < 0.05
    assert rel(load_model(stripped).forward(TOKENS, logits="all"), ref) > 0.5


def test_rotate_refusals(tmp_path, rotated):
    src = write_synthetic_model(tmp_path / "f.gguf", "gemma3", "f32")  # widths 256 and 512
    with pytest.raises(ConversionError, match=r"--rotate 512: blk\.0\.attn_q\.weight has input width 256"):
        convert(src, tmp_path / "x.gguf", "q2_0", rotate=512)
    with pytest.raises(ConversionError, match="power of two"):
        convert(src, tmp_path / "x.gguf", "q2_0", rotate=96)
    with pytest.raises(ConversionError, match="nothing to fold"):
        convert(src, tmp_path / "x.gguf", "f16", rotate=64)
    with pytest.raises(ConversionError, match="already Hadamard-rotated"):
        convert(rotated[1], tmp_path / "x.gguf", "q2_0", rotate=64)
    t = write_synthetic_model(tmp_path / "t.gguf", "llama", "tq2_0")
    with pytest.raises(ConversionError, match="would be rotated"):
        convert(t, tmp_path / "x.gguf", "tq2_0", rotate=64)
    assert not (tmp_path / "x.gguf").exists()
    convert(t, tmp_path / "x.gguf", "tq2_0", rotate=64, allow_lossy=True)
    load_model(tmp_path / "x.gguf").forward(TOKENS)


def test_repacking_a_rotated_file_keeps_its_metadata(tmp_path, rotated):
    src = write_synthetic_model(tmp_path / "f.gguf", "llama", "f32")
    convert(src, tmp_path / "r.gguf", "pq2_0", rotate=64)
    convert(tmp_path / "r.gguf", tmp_path / "q.gguf", "q2_0")
    _, mr = tensors_bytes(tmp_path / "r.gguf")
    _, mq = tensors_bytes(tmp_path / "q.gguf")
    assert {k: str(v) for k, v in mr.items() if k.startswith("prism.")} == \
        {k: str(v) for k, v in mq.items() if k.startswith("prism.")}
    a = load_model(tmp_path / "r.gguf").forward(TOKENS, logits="all")
    assert rel(load_model(tmp_path / "q.gguf").forward(TOKENS, logits="all"), a) < 0.02  # same values


# ---- safety: never over the input, atomic, killable -----------------------------------------------

def test_refuses_to_write_over_its_input(tmp_path):
    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "tq2_0")
    h = hashlib.sha256(src.read_bytes()).hexdigest()
    with pytest.raises(ConversionError, match="is the input"):
        convert(src, src, "pq2_0")
    with pytest.raises(ConversionError, match="is the input"):
        convert(src, tmp_path / "." / "a.gguf", "pq2_0")
    os.link(src, tmp_path / "hard.gguf")
    with pytest.raises(ConversionError, match="same file"):
        convert(src, tmp_path / "hard.gguf", "pq2_0")
    (tmp_path / "sym.gguf").symlink_to(src)
    with pytest.raises(ConversionError):
        convert(src, tmp_path / "sym.gguf", "pq2_0")
    assert hashlib.sha256(src.read_bytes()).hexdigest() == h


def test_progress_reaches_the_total(tmp_path):
    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "f32")
    seen = []
    r = convert(src, tmp_path / "b.gguf", "q2_0", progress=lambda d, t, n: seen.append((d, t)))
    assert seen[-1][0] == seen[-1][1] == r["bytes"] == (tmp_path / "b.gguf").stat().st_size
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


HANG_GUARD_S = 300  # only ends a child that would otherwise hang the run: no step waits on it


def first_line(p):
    """The first line p writes to stdout; a failure with its stderr if it ends (or hangs) first."""
    ready, _, _ = select.select([p.stdout], [], [], HANG_GUARD_S)
    line = p.stdout.readline() if ready else ""
    if not line:
        p.kill()
        _, err = p.communicate()
        pytest.fail(f"the converter wrote no line (exit {p.returncode}):\n{err}")
    return line


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_mid_conversion_leaves_no_output(tmp_path, sig):
    """The signal comes once the child says it is mid-write (a progress call: the output open, some
    bytes written, more to come), and the child stays there until the signal ends it.  SIGINT is
    Python's KeyboardInterrupt in the child even where this run inherited it ignored (a shell's
    background job does), and the child waits in short sleeps, so that the interrupt is raised
    whichever of its threads the signal reaches."""
    src = write_synthetic_model(tmp_path / "a.gguf", "llama", "f32")
    h = hashlib.sha256(src.read_bytes()).hexdigest()
    before = set(os.listdir(tmp_path))
    script = textwrap.dedent(f"""
        import signal, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from pylowbit.convert import convert
        def progress(done, total, name):
            print("WRITING", done, total, flush=True)
            while True:  # mid-write until the signal
                time.sleep(0.01)
        convert({str(src)!r}, {str(tmp_path / 'out.gguf')!r}, "q2_0", progress=progress)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=tmp_path.parent)
    try:
        word, done, total = first_line(p).split()
        assert word == "WRITING" and 0 < int(done) < int(total)
        assert not (tmp_path / "out.gguf").exists()  # the output has no name while it is written
        p.send_signal(sig)
        _, err = p.communicate(timeout=HANG_GUARD_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    # killed by the signal (an uncaught KeyboardInterrupt ends Python by SIGINT)
    assert p.returncode == -sig, err
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    assert not (tmp_path / "out.gguf").exists()
    if sys.platform.startswith("linux") or sig == signal.SIGINT:
        # Linux: the output is an O_TMPFILE until complete, so not even a temporary file remains
        assert set(os.listdir(tmp_path)) == before
    assert hashlib.sha256(src.read_bytes()).hexdigest() == h
