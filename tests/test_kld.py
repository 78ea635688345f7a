"""KL divergence against a base run: llama-perplexity's base-file format and statistics.

The reference here is a second implementation written from tools/perplexity/perplexity.cpp in
llama.cpp, token by token and logit by logit in float32 scalars with float64 sums, as the C++
does it: it writes the base file with struct and llama.cpp's own rounding trick, parses it, and
prints the statistics with llama-perplexity's printf formats.  pylowbit's vectorized code must
write the same bytes and print the same text."""

import math
import shutil
import struct

import numpy as np
import pytest

from pylowbit import kld
from pylowbit.gguf import GGUFFile, MetaValue, TensorSpec, write_gguf
from pylowbit.model import Model
from pylowbit.model.synthetic import write_synthetic_model

F = np.float32


# ---- the reference: llama-perplexity, transliterated -------------------------------------------

def _nearest_int(x):
    """perplexity.cpp's nearest_int: add 1.5 * 2^23 in float32, read the mantissa bits."""
    v = F(F(x) + F(12582912.0))
    (i,) = struct.unpack("<i", struct.pack("<f", v))
    return (i & 0x007FFFFF) - 0x00400000


def _expf(x):
    """glibc's expf: the float32 rounding of exp."""
    return F(math.exp(float(x)))


def _softmax_top(row):
    mx, imax = row[0], 0
    for i in range(1, len(row)):
        if row[i] > mx:
            mx, imax = row[i], i
    s = 0.0
    for v in row:
        s += float(_expf(F(v - mx)))
    return mx, imax, F(math.log(s))


def ref_base_bytes(n_ctx, tokens, rows):
    """The file llama-perplexity writes for these chunks' tokens and scored rows of logits."""
    n_vocab = rows.shape[1]
    out = [b"_logits_", struct.pack("<iii", n_ctx, n_vocab, len(tokens) // n_ctx),
           struct.pack(f"<{len(tokens)}i", *map(int, tokens))]
    nv = 2 * ((n_vocab + 1) // 2) + 4
    for row in rows:
        mx, mn = row[0], row[0]
        for v in row[1:]:
            mx, mn = max(mx, v), min(mn, v)
        mn = max(mn, F(mx - F(16)))
        _, _, lse = _softmax_top(row)
        min_lp = F(F(mn - mx) - lse)
        scale = F(F(mx - mn) / F(65535))
        codes = [0] * (nv - 4)
        if scale:
            inv = F(F(1) / scale)
            codes[:n_vocab] = [_nearest_int(F(inv * F(v - mn))) if v > mn else 0 for v in row]
        out.append(struct.pack("<ff", scale, min_lp) + struct.pack(f"<{nv - 4}H", *codes))
    return b"".join(out)


def ref_kld_text(base_bytes, q_rows):
    """llama-perplexity --kl-divergence's final statistics for logits q_rows (all chunks' scored
    rows, in order) against a base file's bytes."""
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<iii", base_bytes, 8)
    tokens = struct.unpack_from(f"<{n_ctx * n_chunk}i", base_bytes, 20)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first, n_row = n_ctx // 2, n_ctx - 1 - n_ctx // 2
    off = 20 + 4 * n_ctx * n_chunk
    S = dict.fromkeys(["nll", "nll2", "nllb", "nllb2", "nllnllb", "kld", "kld2", "dp", "dp2", "dp4"], 0.0)
    same = count = 0
    klds, dps = [], []
    for c in range(n_chunk):
        for j in range(n_row):
            row = q_rows[c * n_row + j]
            tok = tokens[c * n_ctx + first + j + 1]
            scale, min_lp = (F(v) for v in struct.unpack_from("<ff", base_bytes, off))
            codes = struct.unpack_from(f"<{n_vocab}H", base_bytes, off + 8)
            off += 2 * nv
            mx, imax, lse = _softmax_top(row)
            nll = F(F(mx + lse) - row[tok])
            S["nll"] += float(nll)
            S["nll2"] += float(F(nll * nll))
            nllb = -F(F(scale * F(codes[tok])) + min_lp)
            S["nllb"] += float(nllb)
            S["nllb2"] += float(F(nllb * nllb))
            S["nllnllb"] += float(F(nll * nllb))
            mx = F(mx + lse)
            s, imax_b, lb_max = 0.0, -1, F(0)
            for i in range(n_vocab):
                lb = F(F(scale * F(codes[i])) + min_lp)
                if i == 0 or lb > lb_max:
                    lb_max, imax_b = lb, i
                if lb > F(-16):
                    s += float(F(_expf(lb) * F(F(lb - row[i]) + mx)))
            S["kld"] += s
            S["kld2"] += s * s
            count += 1
            same += imax == imax_b
            dp = F(_expf(-nll) - _expf(-nllb))
            S["dp"] += float(dp)
            dp2 = float(F(dp * dp))
            S["dp2"] += dp2
            S["dp4"] += dp2 * dp2
            klds.append(F(s))
            dps.append(dp)
    klds.sort()
    dps.sort()

    def mean_unc(s, s2, n):
        f = s / n
        df = s2 / n - f * f
        return f, (math.sqrt(df / (n - 1)) if df > 0 and n > 10 else 0.0)

    def pctl(v, frac):
        p = F(F(frac) * F(len(v) - 1))
        ip = int(p)
        p = F(p - F(ip))
        return F(F(F(1) - p) * v[ip]) + F(p * v[min(ip + 1, len(v) - 1)])

    def median(v):
        return v[len(v) // 2] if len(v) % 2 else F(F(0.5) * F(v[len(v) // 2] + v[len(v) // 2 - 1]))

    n = count
    lq, lqe = mean_unc(S["nll"], S["nll2"], n)
    lb, lbe = mean_unc(S["nllb"], S["nllb2"], n)
    cov = (S["nllnllb"] / n - (S["nll"] / n) * (S["nllb"] / n)) / (n - 1)
    ppl, pplb = math.exp(lq), math.exp(lb)
    r, re = lq - lb, math.sqrt(lqe * lqe + lbe * lbe - 2 * cov)
    L = ["====== Perplexity statistics ======",
         "Mean PPL(Q)                   : %10.6f ± %10.6f" % (ppl, ppl * lqe),
         "Mean PPL(base)                : %10.6f ± %10.6f" % (pplb, pplb * lbe),
         "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%" % (100 * cov / (lqe * lbe)),
         "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f" % (r, re),
         "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f" % (math.exp(r), math.exp(r) * re),
         "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f" % (
             ppl - pplb, math.sqrt((ppl * lqe) ** 2 + (pplb * lbe) ** 2 - 2 * ppl * pplb * cov)),
         "", "====== KL divergence statistics ======",
         "Mean    KLD: %10.6f ± %10.6f" % mean_unc(S["kld"], S["kld2"], n),
         "Maximum KLD: %10.6f" % klds[-1]]
    L += ["%-7s KLD: %10.6f" % (lab, pctl(klds, f)) for lab, f in
          [("99.9%", 0.999), ("99.0%", 0.99), ("95.0%", 0.95), ("90.0%", 0.90)]]
    L += ["Median  KLD: %10.6f" % median(klds)]
    L += ["%-7s KLD: %10.6f" % (lab, pctl(klds, f)) for lab, f in
          [("10.0%", 0.1), (" 5.0%", 0.05), (" 1.0%", 0.01), (" 0.1%", 0.001)]]
    L += ["Minimum KLD: %10.6f" % klds[0], "", "====== Token probability statistics ======",
          "Mean    Δp: %6.3f ± %5.3f %%" % tuple(100 * v for v in mean_unc(S["dp"], S["dp2"], n)),
          "Maximum Δp: %6.3f%%" % (100 * dps[-1])]
    L += ["%-7s Δp: %6.3f%%" % (lab, 100 * pctl(dps, f)) for lab, f in
          [("99.9%", 0.999), ("99.0%", 0.99), ("95.0%", 0.95), ("90.0%", 0.90), ("75.0%", 0.75)]]
    L += ["Median  Δp: %6.3f%%" % (100 * median(dps))]
    L += ["%-7s Δp: %6.3f%%" % (lab, 100 * pctl(dps, f)) for lab, f in
          [("25.0%", 0.25), ("10.0%", 0.1), (" 5.0%", 0.05), (" 1.0%", 0.01), (" 0.1%", 0.001)]]
    mse, mse_e = mean_unc(S["dp2"], S["dp4"], n)
    top = same / n
    L += ["Minimum Δp: %6.3f%%" % (100 * dps[0]),
          "RMS Δp    : %6.3f ± %5.3f %%" % (100 * math.sqrt(mse), 100 * 0.5 / math.sqrt(mse) * mse_e),
          "Same top p: %6.3f ± %5.3f %%" % (100 * top, 100 * math.sqrt(top * (1 - top) / (n - 1)))]
    return "\n".join(L)


# ---- logits that exercise every branch ---------------------------------------------------------

N_CTX, N_CHUNK, VOCAB = 64, 4, 37  # 124 scored tokens (llama-perplexity prints from 100); odd vocab


def _logit_sets(seed=0):
    """Base and candidate logits of every scored row, plus the chunks' tokens: wide rows (the -16
    clamp and code 0), exact ties at the top (first index wins), one flat row (scale 0)."""
    rng = np.random.default_rng(seed)
    n = N_CHUNK * kld.scored_per_chunk(N_CTX)
    base = (rng.standard_normal((n, VOCAB)) * rng.uniform(0.5, 8, (n, 1))).astype(F)
    base[3, [5, 20]] = base[3].max() + 1  # a tie at the top, in the base
    base[7] = 2.5  # flat: every log-prob equal, scale 0
    q = (base + rng.standard_normal((n, VOCAB)).astype(F) * F(0.3)).astype(F)
    q[11, [2, 9]] = q[11].max() + 0.5  # a tie at the top, in the candidate
    tokens = rng.integers(0, VOCAB, N_CTX * N_CHUNK).astype(np.int32)
    return base, q, tokens


def _write_base(path, base, tokens):
    rows = kld.scored_per_chunk(N_CTX)
    with kld.BaseWriter(path, N_CTX, VOCAB, tokens, notice=None) as w:
        for c in range(N_CHUNK):  # uneven slices, as a runtime streams them
            block = base[c * rows:(c + 1) * rows]
            w.add(block[:5])
            w.add(block[5:])
    return path


def test_base_file_bytes_equal_the_reference_writer(tmp_path):
    base, _, tokens = _logit_sets()
    p = _write_base(tmp_path / "base.bin", base, tokens)
    want = ref_base_bytes(N_CTX, tokens, base)
    assert p.read_bytes() == want
    assert len(want) == kld.base_file_size(N_CTX, VOCAB, N_CHUNK)
    with kld.BaseFile(p) as f:
        assert (f.n_ctx, f.n_vocab, f.n_chunk) == (N_CTX, VOCAB, N_CHUNK)
        assert np.array_equal(f.tokens.reshape(-1), tokens)


def test_statistics_print_as_llama_perplexity_prints_them(tmp_path):
    base, q, tokens = _logit_sets()
    p = _write_base(tmp_path / "base.bin", base, tokens)
    want = ref_kld_text(p.read_bytes(), q)
    rows = kld.scored_per_chunk(N_CTX)
    acc = kld.KLDAccumulator(VOCAB)
    with kld.BaseFile(p) as f:
        for c in range(N_CHUNK):
            targets = f.tokens[c][N_CTX // 2 + 1:]
            acc.add(q[c * rows:(c + 1) * rows], targets, base_codes=f.rows(c))
    got = acc.stats()
    assert got.format() == want
    # the function on two logit sets, base compressed as the file holds it: the same statistics
    targets = tokens.reshape(N_CHUNK, N_CTX)[:, N_CTX // 2 + 1:].reshape(-1)
    assert kld.kl_divergence(base, q, targets, compress=True).format() == want
    assert 0 < got.same_top < 1 and got.kld > 0.01


def test_a_model_against_itself_and_against_a_perturbed_copy(tmp_path):
    src = write_synthetic_model(tmp_path / "a.gguf", arch="llama", fmt="f32", seed=4)
    with GGUFFile(src) as f:
        meta = {k: MetaValue(f.metadata_types[k][0], v, f.metadata_types[k][1]) for k, v in f.metadata.items()}
        specs = []
        for t in f.tensors.values():
            data = np.array(t.data)
            if t.name == "blk.1.ffn_down.weight":  # one tensor, 2 % bigger
                data = (data.view(F) * F(1.02)).view(data.dtype)
            specs.append(TensorSpec(t.name, t.file_type_id, t.shape, data))
    bent = write_gguf(tmp_path / "b.gguf", meta, specs)
    tokens = np.random.default_rng(1).integers(0, 512, 64)
    a = Model(src, ctx=64, notice=None).forward(tokens, pos=0, logits="all")[:-1]
    b = Model(bent, ctx=64, notice=None).forward(tokens, pos=0, logits="all")[:-1]
    tgt = tokens[1:]
    same = kld.kl_divergence(a, a.copy(), tgt)
    assert same.kld == 0 and same.kld_max == 0 and same.same_top == 1 and same.dp_rms == 0
    assert same.ppl_ratio == 1 and same.ln_ppl_cor == pytest.approx(1)
    other = kld.kl_divergence(a, b, tgt)
    assert other.kld > 1e-5 and other.kld_max > other.kld_median > 0 and other.dp_rms > 0
    # through the compressed base: the codes' rounding alone is far below the perturbation
    stored = kld.kl_divergence(a, a, tgt, compress=True)
    assert abs(stored.kld) < 1e-5 and stored.same_top == 1
    assert kld.kl_divergence(a, b, tgt, compress=True).kld == pytest.approx(other.kld, rel=0.05)


def test_perplexity_cli_writes_and_reads_a_base(tmp_path, capsys):
    from pylowbit.cli import main

    a = write_synthetic_model(tmp_path / "a.gguf", arch="qwen3", fmt="q2_0", seed=6)
    b = write_synthetic_model(tmp_path / "b.gguf", arch="qwen3", fmt="tq2_0", seed=6)
    text = tmp_path / "t.txt"
    text.write_text("the capital of France is Paris, and the capital of Spain is Madrid. " * 40)
    base = tmp_path / "base.kld"
    assert main(["perplexity", "-m", str(a), "-f", str(text), "-c", "64", "--chunks", "3",
                 "--kl-divergence-base", str(base)]) == 0
    out, err = capsys.readouterr()
    assert f"{kld.base_file_size(64, 512, 3) / 1e6:.1f} MB" in err and "perplexity:" in out
    assert base.stat().st_size == kld.base_file_size(64, 512, 3)
    assert not (tmp_path / "base.kld.part").exists()
    stats = {}
    for name, m in (("self", a), ("other", b)):
        assert main(["perplexity", "-m", str(m), "--kl-divergence-base", str(base), "--kl-divergence"]) == 0
        out = capsys.readouterr().out
        assert "====== KL divergence statistics ======" in out and "Same top p:" in out
        stats[name] = float(out.split("Mean    KLD:")[1].split("±")[0])
    assert abs(stats["self"]) < 1e-5 < stats["other"]


def test_bad_base_files_and_arguments_are_refused(tmp_path, capsys, monkeypatch):
    from pylowbit.cli import main

    base, _, tokens = _logit_sets()
    good = _write_base(tmp_path / "base.bin", base, tokens).read_bytes()
    bad = tmp_path / "bad.bin"
    for data, msg in [(b"_logits", "no '_logits_' header"), (b"x" * 8 + good[8:], "no '_logits_' header"),
                      (good[:-2], "bytes, but n_ctx 64"), (good[:8] + struct.pack("<i", 0) + good[12:], "bad header")]:
        bad.write_bytes(data)
        with pytest.raises(kld.BaseFileError, match=msg):
            kld.BaseFile(bad)
    m = write_synthetic_model(tmp_path / "m.gguf", arch="llama", fmt="q8_0")
    (tmp_path / "ok.bin").write_bytes(good)
    assert main(["perplexity", "-m", str(m), "--kl-divergence-base", str(tmp_path / "ok.bin"), "--kl-divergence"]) == 1
    assert "vocabulary has 37 tokens, the model's 512" in capsys.readouterr().err
    assert main(["perplexity", "-m", str(m), "--kl-divergence"]) == 1
    assert "needs --kl-divergence-base" in capsys.readouterr().err
    assert main(["perplexity", "-m", str(m)]) == 1
    assert "-f/--file is required" in capsys.readouterr().err
    acc = kld.KLDAccumulator(VOCAB)
    with pytest.raises(ValueError, match="NaN or infinite"):
        acc.add(np.full((1, VOCAB), np.nan, F), [0], base_logits=np.zeros((1, VOCAB), F))
    with pytest.raises(ValueError, match="target token id out of range"):
        acc.add(np.zeros((1, VOCAB), F), [VOCAB], base_logits=np.zeros((1, VOCAB), F))
    with pytest.raises(ValueError, match="base rows: expected uint16"):
        acc.add(np.zeros((1, VOCAB), F), [0], base_codes=np.zeros((1, 5), np.uint16))
    # not enough disk: refused before anything is written
    monkeypatch.setattr(shutil, "disk_usage", lambda d: shutil._ntuple_diskusage(10, 10, 1000))
    with pytest.raises(OSError, match="needs 0.00 GB"):
        kld.BaseWriter(tmp_path / "new.bin", N_CTX, VOCAB, tokens, notice=None)
    assert not list(tmp_path.glob("new.bin*"))


def test_quantize_report_prints_the_new_files_kld(tmp_path, capsys):
    from pylowbit.cli import main

    src = write_synthetic_model(tmp_path / "src.gguf", arch="llama", fmt="f32", seed=8)
    text = tmp_path / "t.txt"
    text.write_text("A hacker is a person who enjoys exploring the details of programmable systems. " * 30)
    got = {}
    for fmt in ("f32", "q8_0", "q2_0"):
        argv = ["quantize", str(src), str(tmp_path / f"{fmt}.gguf"), "--type", fmt, "-q", "--report", str(text),
                "--report-ctx", "64", "--report-chunks", "2"]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "KL divergence of" in out and "scored tokens" in out and " 62" in out  # 2 x 31 rows
        got[fmt] = float(out.split("Mean KLD")[1].split("±")[0])
    assert got["f32"] == 0  # an exact copy scores exactly 0
    assert 0 < got["q8_0"] < got["q2_0"]
    assert main(["quantize", str(src), str(tmp_path / "x.gguf"), "--type", "q8_0", "--report", "nope.txt"]) == 1
    assert "--report text file not found" in capsys.readouterr().err


# ---- against llama-perplexity itself (opt-in) ----------------------------------------------------
#
# The tool is llama-perplexity built from the llama.cpp vendored in llama-cpp-python 0.3.36's sdist,
# linked against that wheel's libllama / libggml, so its logits and llama-cpp-python's are the same
# bits: LLAMA_PERPLEXITY=/path/to/llama-perplexity pytest -m llama tests/test_kld.py
# (docs/ACCURACY.md says how to build it, with a main that drains llama.cpp's asynchronous logger
# before exit: the stock one can lose the statistics it prints last).  Both directions: llama-perplexity reads a base pylowbit
# wrote, pylowbit reads one llama-perplexity wrote; both print the same statistics of the same logits.

LLAMA_FLAGS = ["-c", "128", "-b", "128", "-fa", "off", "-ctk", "f32", "-ctv", "f32", "-nr", "-t", "2"]


def _llama_perplexity():
    import os

    tool = os.environ.get("LLAMA_PERPLEXITY") or shutil.which("llama-perplexity")
    if not tool:
        pytest.skip("set LLAMA_PERPLEXITY to a llama-perplexity binary built against llama-cpp-python's libraries")
    return tool


def _stats_block(text):
    start, end = text.index("====== Perplexity statistics ======"), text.index("Same top p:")
    return text[start:text.index("\n", end)].strip()


def _llama_cpp_stats(model_path, base_path):
    """pylowbit's statistics of llama.cpp's logits (llama-cpp-python) against a base file."""
    from pylowbit.eval.llama_cpp import LlamaCppChunks
    from pylowbit.model import TextTokenizer

    with GGUFFile(model_path) as f:
        tok = TextTokenizer(f)
        bos = tok.bos_id if tok.add_bos else None
    with kld.BaseFile(base_path) as base:
        peer = LlamaCppChunks(model_path, base.n_ctx, "f32", threads=2)
        acc = kld.KLDAccumulator(base.n_vocab)
        try:
            for c in range(base.n_chunk):
                acc.add(peer.scored_logits(base.tokens[c], bos), base.tokens[c][base.n_ctx // 2 + 1:],
                        base_codes=base.rows(c))
        finally:
            peer.close()
    return acc.stats()


@pytest.mark.llama
def test_statistics_equal_llama_perplexitys_both_ways(tmp_path, capsys):
    import subprocess

    from pylowbit.cli import main
    from pylowbit.eval.text import read_text

    pytest.importorskip("llama_cpp")
    tool = _llama_perplexity()
    a = write_synthetic_model(tmp_path / "a.gguf", arch="llama", fmt="q2_0", seed=21)
    b = write_synthetic_model(tmp_path / "b.gguf", arch="llama", fmt="tq2_0", seed=22)
    text = tmp_path / "jargon.txt"
    text.write_text(read_text("/usr/share/doc/jargon-text/jargon.txt.gz")[:20000])

    def llama(*argv):
        r = subprocess.run([tool, *argv, *LLAMA_FLAGS], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout

    # llama-perplexity reads the base pylowbit wrote
    ours = tmp_path / "pylowbit.kld"
    assert main(["perplexity", "-m", str(a), "-f", str(text), "-c", "128", "--chunks", "4",
                 "--kl-divergence-base", str(ours)]) == 0
    capsys.readouterr()
    printed = _stats_block(llama("-m", str(b), "--kl-divergence-base", str(ours), "--kl-divergence"))
    assert _llama_cpp_stats(b, ours).format() == printed
    # pylowbit reads the base llama-perplexity wrote: the same token ids as pylowbit's tokenizer
    theirs = tmp_path / "llama.kld"
    llama("-m", str(a), "-f", str(text), "--chunks", "4", "--kl-divergence-base", str(theirs))
    with kld.BaseFile(theirs) as t, kld.BaseFile(ours) as o:
        assert np.array_equal(t.tokens, o.tokens) and (t.n_ctx, t.n_vocab) == (o.n_ctx, o.n_vocab)
    printed = _stats_block(llama("-m", str(b), "--kl-divergence-base", str(theirs), "--kl-divergence"))
    assert _llama_cpp_stats(b, theirs).format() == printed
    # and pylowbit's own run of b against llama.cpp's base of a prints those statistics too
    assert main(["perplexity", "-m", str(b), "--kl-divergence-base", str(theirs), "--kl-divergence"]) == 0
    assert "Mean    KLD:" in capsys.readouterr().out
