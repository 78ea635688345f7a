"""Every code path a user touches first, once, for `.ci/run` to run under an emulated CPU: each
weight format's GEMV and GEMM (plain and packed) against its dequantized matrix, the FWHT, and a
synthetic model's forward pass.  An instruction the emulated CPU lacks kills the process (SIGILL),
so running this under qemu -cpu Nehalem proves the scalar build has no AVX in it, and under
-cpu Haswell that the AVX2 variant has no AVX-512."""
import tempfile
from pathlib import Path

import numpy as np

import pylowbit as lb
from pylowbit.model import Model
from pylowbit.model.synthetic import write_synthetic_model

lb.show_runtime()
rng = np.random.default_rng(0)
x = rng.standard_normal(256).astype(np.float32)
xs = rng.standard_normal((3, 256)).astype(np.float32)
for fmt in lb.FORMATS:
    try:
        q = lb.quantize(rng.standard_normal((8, 256)).astype(np.float32), fmt)
    except (ValueError, NotImplementedError):  # a format this build only reads
        continue
    ref = q.dequantize().astype(np.float64)
    for w in (q, lb.pack(q)) if lb.packing_pays_off() else (q,):
        y, Y = lb.gemv(w, x), lb.gemm(w, xs)
        # activations are rounded to 8 bits: a few percent of the sum of |terms|
        assert np.abs(y - ref @ x).max() <= 0.05 * (np.abs(ref) @ np.abs(x)).max() + 1e-6, fmt
        assert np.abs(Y - xs @ ref.T).max() <= 0.05 * (np.abs(xs) @ np.abs(ref).T).max() + 1e-6, fmt
h = lb.fwht(np.eye(64, dtype=np.float32))
assert np.allclose(h @ h.T, np.eye(64), atol=1e-5)
with tempfile.TemporaryDirectory() as d:
    p = write_synthetic_model(Path(d) / "m.gguf", arch="llama", fmt="tq2_0", seed=1)
    m = Model(p, notice=None)
    logits = m.forward(np.arange(4))
    assert np.isfinite(logits).all()
    del m
print(f"smoke: {lb.isa_active()} variant ran every format, the FWHT and a forward pass")
