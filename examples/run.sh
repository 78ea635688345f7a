#!/usr/bin/env bash
# Build and run the three consumer examples against the pylowbit installed in the active Python
# (not the source tree), each in a scratch copy, and check their results against pylowbit's numpy API.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# the examples' own build tools (--no-build-isolation: they compile against the installed pylowbit)
"$PY" -m pip install -q "setuptools>=70.1" "cython>=3.0"
cp -r "$HERE"/c_pkgconfig "$HERE"/cython_consumer "$HERE"/cpp_capsule "$WORK"/

echo "== C program through pkg-config"
make -s -C "$WORK/c_pkgconfig" PYTHON="$PY"
"$WORK/c_pkgconfig/gemv" 64 512 > "$WORK/c_out.txt"
"$PY" - "$WORK/c_out.txt" <<'PY'
import sys
import numpy as np, pylowbit as lb
value = lambda i: ((i * 7919 % 2003) - 1001).astype(np.float32) / np.float32(1001)
w = value(np.arange(64 * 512)).reshape(64, 512)
x = value(np.arange(512) + 17)
got = np.loadtxt(sys.argv[1], dtype=np.float32)
np.testing.assert_array_equal(got, lb.quantize(w, "tq2_0").gemv(x))
print("C program: 64 rows equal to pylowbit.gemv")
PY

echo "== Cython extension of another package (cimports pylowbit.lowbit)"
"$PY" -m pip install -q --no-build-isolation --no-deps "$WORK/cython_consumer"
"$PY" - <<'PY'
import numpy as np, pylowbit as lb
from lowbit_consumer import mlp_tq2_0
rng = np.random.default_rng(0)
w1, w2 = lb.quantize(rng.standard_normal((256, 512), np.float32), "tq2_0"), \
    lb.quantize(rng.standard_normal((32, 256), np.float32), "tq2_0")
x = rng.standard_normal(512, np.float32)
expect = w2.gemv(np.maximum(w1.gemv(x, threads=1), 0), threads=1)
np.testing.assert_array_equal(mlp_tq2_0(w1.data, w2.data, 256, 32, x), expect)
try:
    mlp_tq2_0(w1.data, w2.data, 256, 32, x[:500])
except ValueError as e:
    print("Cython consumer: equal to pylowbit; a bad size says:", e)
else:
    raise SystemExit("a bad size was not refused")
PY
"$PY" -m pip uninstall -q -y lowbit-consumer

echo "== C++ extension through the capsule"
"$PY" -m pip install -q --no-build-isolation --no-deps "$WORK/cpp_capsule"
"$PY" - <<'PY'
import numpy as np, pylowbit as lb
import lowbit_capsule_user as cu
rng = np.random.default_rng(1)
for fmt in ("tq2_0", "tq1_0", "q2_0", "i2_s"):
    w = lb.quantize(rng.standard_normal((48, 1024), np.float32), fmt)
    x = rng.standard_normal(1024, np.float32)
    y = np.empty(48, np.float32)
    cu.gemv(lb.format_info(fmt).type_id, w.data, 48, 1024, x, y)
    np.testing.assert_array_equal(y, w.gemv(x))
try:
    cu.gemv(35, w.data, 48, 1000, x, y)
except ValueError as e:
    print(f"C++ capsule consumer ({cu.isa()}): 4 formats equal to pylowbit; a bad size says:", e)
else:
    raise SystemExit("a bad size was not refused")
PY
"$PY" -m pip uninstall -q -y lowbit-capsule-user
