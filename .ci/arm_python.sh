#!/usr/bin/env bash
# The Python package on Linux aarch64, on an x86 machine: an arm64 Debian root (mmdebstrap, Debian
# packages only: python3, its headers, libstdc++), the Python dependencies as aarch64 wheels from
# PyPI, pylowbit cross-compiled with Debian's gcc-aarch64-linux-gnu (compiling under emulation
# would take longer than the tests), then a part of the pytest suite run in that root through
# proot + qemu-user-static, once per emulated CPU:
#   -cpu max         FEAT_DotProd and FEAT_I8MM: the i8mm variant is active, dotprod, neon and
#                    scalar are tested too;
#   -cpu cortex-a53  ARMv8.0: detection must leave dotprod and i8mm out; the plain NEON path is active.
# (Of qemu's models, a64fx and cortex-a35/a53/a57/a72 lack FEAT_DotProd; cortex-a76, neoverse-n1
# and max have it; only max has FEAT_I8MM.)
# Usage: .ci/arm_python.sh (run by .ci/run; needs root for apt-get and mmdebstrap's root mode).
# LOWBIT_ARM_PY_DIR keeps the root, the wheels and the build there (default: a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
T0=$SECONDS

need=()
for p in mmdebstrap proot qemu-user-static gcc-aarch64-linux-gnu cmake; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

WORK=${LOWBIT_ARM_PY_DIR:-}
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
FS=$WORK/root                 # the arm64 root
HOSTSITE=$WORK/site           # the dependencies and pylowbit, bound into the root at $SITE
SITE=/opt/site                # (PYTHONPATH inside the root)
PYVER=3.11                    # Debian bookworm's python3
since() { echo "$(((SECONDS - $1) / 60)) min $(((SECONDS - $1) % 60)) s"; }

# --- the root: files of the Debian packages only (no maintainer scripts run: nothing to emulate).
# Made in the background while the wheels download: both wait on the network.
t=$SECONDS
ROOTPID=
if [ ! -x "$FS/usr/bin/python3" ]; then
  rm -rf "$FS"
  mmdebstrap --quiet --mode=root --variant=extract --architectures=arm64 \
    --include=python3,libpython$PYVER-dev,libstdc++6 bookworm "$FS" >"$WORK/mmdebstrap.log" 2>&1 &
  ROOTPID=$!
fi

# --- the dependencies: aarch64 wheels from PyPI, unpacked by the host's pip
mkdir -p "$HOSTSITE"
python3 -m pip install -q --disable-pip-version-check --target "$HOSTSITE" --upgrade \
  --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 \
  --platform manylinux2014_aarch64 --python-version $PYVER --implementation cp \
  --abi "cp${PYVER/./}" --only-binary=:all: \
  "numpy>=2" "gguf>=0.19,<0.20" "tokenizers>=0.15" "rich>=13" "jinja2>=3" \
  pytest hypothesis "scipy>=1.10" 2>&1 | { grep -v "is ignored: it is neither" || true; }
python3 -m pip install -q --disable-pip-version-check "cython>=3.0" 2>&1 |
  { grep -v "is ignored: it is neither" || true; }
echo "arm-python: aarch64 wheels in $(since $t)"
if [ -n "$ROOTPID" ]; then
  wait "$ROOTPID" || { tail -20 "$WORK/mmdebstrap.log"; echo "arm-python: mmdebstrap FAILED"; exit 1; }
fi
mkdir -p "$FS$SITE" "$FS/tmp"
echo "arm-python: arm64 root (with the wheels) in $(since $t)"

# --- pylowbit, cross-compiled: cython runs on the host, gcc targets aarch64 with the root's
# Python and numpy headers; installed into the site directory with its Python sources
t=$SECONDS
BUILD=$WORK/build
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/native/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DLOWBIT_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" \
  -DPython_INCLUDE_DIR="$FS/usr/include/python$PYVER" \
  -DPython_NumPy_INCLUDE_DIR="$HOSTSITE/numpy/_core/include" \
  -DCMAKE_C_FLAGS="-idirafter $FS/usr/include" >/dev/null
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" >"$BUILD/build.log" 2>&1 ||
  { tail -30 "$BUILD/build.log"; exit 1; }
rm -rf "$HOSTSITE/pylowbit" "$FS/opt/tests" "$FS/opt/pyproject.toml"
cmake --install "$BUILD" --prefix "$HOSTSITE" >/dev/null
(cd "$ROOT" && git ls-files -z pylowbit | grep -z '\.py$' | xargs -0 tar cf -) | tar xf - -C "$HOSTSITE"
cp -r "$ROOT/tests" "$FS/opt/tests"
cp "$ROOT/pyproject.toml" "$FS/opt/" # the pytest settings (markers, the default deselection)
file -L "$HOSTSITE/pylowbit/liblowbit.so" "$HOSTSITE/pylowbit/_lowbit.so" 2>/dev/null || true
echo "arm-python: pylowbit cross-compiled in $(since $t); ready after $(since $T0)"

guest() { # cpu, command...: run a command of the arm64 root under qemu with that CPU model
  local cpu=$1 limit=() # GUEST_LIMIT: seconds before the command is killed (exit 124 or 137)
  shift
  [ -z "${GUEST_LIMIT:-}" ] || limit=(timeout -k 30 "$GUEST_LIMIT")
  # numpy's and scipy's OpenBLAS threads wait for work with sched_yield, a traced system call
  # under proot: one thread each
  "${limit[@]}" env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 PYTHONPATH=$SITE PYTHONDONTWRITEBYTECODE=1 \
    OPENBLAS_NUM_THREADS=1 QEMU_CPU="$cpu" proot -q qemu-aarch64-static -r "$FS" -b /proc -b /dev -b /sys \
    -b "$HOSTSITE:$SITE" -w /opt "$@"
}

# The subset: the kernels (every Arm variant against scalar and numpy), the FWHT, the decoder ops,
# the thread rule on fixture trees and the default on this process (info, affinity), and the decoder
# end to end (logits against the float64 reference for two architectures and formats, every variant
# giving the same logits, `pylowbit run`).
T=tests/test_threads.py
F=tests/test_fwht.py # not its dense-matrix and 2^20-point comparisons: hours under emulation
KERNEL_TESTS=(tests/test_kernels.py tests/test_kernel_list.py tests/test_bit_exact.py tests/test_ggml_formats.py tests/test_act_quantizer.py)
SUBSET=("${KERNEL_TESTS[@]}" tests/test_ops.py tests/test_gdn_ops.py
  $F::test_variant_bit_exact_vs_scalar $F::test_fused_quantize_equals_unfused
  $F::test_fused_quantize_matches_a8_model $F::test_block_is_per_slice_transform
  $F::test_signs_and_inverse_order $F::test_bad_sign_values $F::test_threads_do_not_change_bits
  $T::test_smt_pairs_count_once $T::test_hybrid_leaves_efficiency_cores_out
  $T::test_affinity_smaller_than_the_machine $T::test_hybrid_within_affinity
  $T::test_no_sysfs_falls_back_to_logical_cpus $T::test_default_is_the_rule_on_this_machines_tree
  $T::test_default_is_limited_by_the_affinity_mask $T::test_info_shows_count_and_origin
  "tests/test_model.py::test_logits_match_float64_reference[llama-tq2_0]"
  "tests/test_model.py::test_logits_match_float64_reference[bitnet-b1.58-i2_s]"
  tests/test_model.py::test_every_variant_computes_the_same_logits
  tests/test_model.py::test_cli_run_streams_text_and_reports_speed)
# On the NEON-only CPU: the NEON kernels against scalar (the code above already ran under -cpu
# max; here a dotprod or i8mm instruction outside its variant would fault) and the decoder.
SUBSET_A53=(-k "neon or every_variant or cli_run" "${KERNEL_TESTS[@]}"
  tests/test_model.py::test_every_variant_computes_the_same_logits
  tests/test_model.py::test_cli_run_streams_text_and_reports_speed)

run_cpu() { # cpu, active variant it must pick, supported variants, tests...
  local cpu=$1 active=$2 supported=$3 t=$SECONDS
  shift 3
  echo "== qemu-aarch64 -cpu $cpu: pylowbit info"
  guest "$cpu" /usr/bin/python3 -c "from pylowbit.cli import main; main(['info'])" | tee "$WORK/info.txt"
  grep -q "^active *$active$" "$WORK/info.txt" || { echo "expected active $active"; exit 1; }
  grep -q "^supported *$supported$" "$WORK/info.txt" || { echo "expected supported $supported"; exit 1; }
  echo "== qemu-aarch64 -cpu $cpu: pytest $*"
  # A run has hung once under proot + qemu (a test stuck for over half an hour, then passing when
  # run again): each attempt gets PYTEST_LIMIT seconds, and a hung one is reported and run once more.
  local attempt rc
  for attempt in 1 2; do
    rc=0
    GUEST_LIMIT=$PYTEST_LIMIT guest "$cpu" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
      --basetemp=/tmp/pytest --durations=5 "$@" | tee "$WORK/pytest-$cpu.txt" || rc=$?
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || break
    echo "arm-python: -cpu $cpu: pytest did not end within ${PYTEST_LIMIT} s (attempt $attempt)"
  done
  [ "$rc" -eq 0 ] || { echo "arm-python: -cpu $cpu: pytest failed ($rc)"; exit 1; }
  summary[$cpu]=$(tail -1 "$WORK/pytest-$cpu.txt")
  echo "arm-python: -cpu $cpu took $(since $t)"
}

PYTEST_LIMIT=${ARM_PY_PYTEST_LIMIT:-900} # seconds; a whole -cpu max run takes about 2 minutes
declare -A summary
run_cpu max i8mm "scalar, neon, dotprod, i8mm" "${SUBSET[@]}"
run_cpu cortex-a53 neon "scalar, neon" "${SUBSET_A53[@]}"
for cpu in max cortex-a53; do echo "arm-python: -cpu $cpu: ${summary[$cpu]}"; done
echo "arm-python: all passed in $(since $T0)"
