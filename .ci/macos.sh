#!/usr/bin/env bash
# macOS build check on a Linux machine: liblowbit, the C test runner and the Python extension
# modules compiled and linked for aarch64-macos and x86_64-macos with zig's clang-based cc (PyPI
# ziglang), warnings as errors.  The dylib is linked with -undefined error and the test
# executables against it, so an undefined symbol fails; a Linux-only call outside LOWBIT_LINUX
# (sched_getaffinity, getauxval, O_TMPFILE, ...) fails to compile against the macOS headers.
# The extension modules' Cython C is compiled against macOS's libc headers, numpy's headers from its
# macOS wheel of each architecture (PyPI), and this machine's Python headers (no registry carries
# macOS's: the pyconfig.h is Linux's), and linked as macOS bundles (Python's symbols resolved at
# load time, as on a Mac).
# Needs cmake and a python with ziglang, cython and numpy importable: the one on PATH, or
# LOWBIT_MACOS_PYTHON.  Its zig executable is called by absolute path (LOWBIT_ZIG overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
T0=$SECONDS
PY=${LOWBIT_MACOS_PYTHON:-$(command -v python3)}
PY=$("$PY" -c 'import sys; print(sys.executable)') # the venv's interpreter itself, by path
ZIG=${LOWBIT_ZIG:-$("$PY" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')}
echo "macos: zig $("$ZIG" version) at $ZIG, python $PY"
PYINC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
NPVER=$("$PY" -c 'import numpy; print(numpy.__version__)')
"$PY" -m cython --version >/dev/null 2>&1
OUT=${LOWBIT_MACOS_BUILD:-$ROOT/build/ci-macos}
# zig's caches inside the build directory: every run compiles from nothing
export ZIG_GLOBAL_CACHE_DIR=$OUT/zig-cache ZIG_LOCAL_CACHE_DIR=$OUT/zig-cache
for target in aarch64-macos x86_64-macos; do
  dir=$OUT/$target
  rm -rf "$dir"
  mkdir -p "$dir/numpy-wheel"
  # numpy's configured headers differ per platform (endian.h, long double): its macOS wheel's
  case $target in
    aarch64-macos) plat=macosx_11_0_arm64 ;;
    x86_64-macos) plat=macosx_10_13_x86_64 ;;
  esac
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform $plat --implementation cp "numpy==$NPVER" -d "$dir/numpy-wheel" 2>&1 | grep -v "is ignored" || true
  "$PY" - "$dir/numpy-wheel" <<'PYEOF'
import sys, zipfile
from pathlib import Path
d = Path(sys.argv[1])
with zipfile.ZipFile(next(d.glob("numpy-*.whl"))) as z:
    z.extractall(d, [n for n in z.namelist() if n.startswith("numpy/_core/include/")])
PYEOF
  NPINC=$dir/numpy-wheel/numpy/_core/include
  cmake -S "$ROOT" -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$ROOT/native/cmake/zig-macos.cmake" \
    -DLOWBIT_ZIG_TARGET=$target "-DLOWBIT_ZIG=$ZIG" -DLOWBIT_BUILD_TESTS=ON \
    -DCMAKE_C_FLAGS=-Werror -DCMAKE_SHARED_LINKER_FLAGS=-Wl,-undefined,error \
    -DLOWBIT_PYTHON=ON -DPython_EXECUTABLE="$PY" -DPython_INCLUDE_DIR="$PYINC" \
    -DPython_NumPy_INCLUDE_DIR="$NPINC" >"$dir/configure.log" 2>&1 || {
    tail -20 "$dir/configure.log"
    echo "macos: $target configure FAILED"
    exit 1
  }
  cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" >"$dir/build.log" 2>&1 || {
    grep -E "error|warning|undefined" "$dir/build.log" | head -20 || tail -20 "$dir/build.log"
    echo "macos: $target build FAILED"
    exit 1
  }
  if command -v file >/dev/null; then
    file -L "$dir/liblowbit.dylib" "$dir/test_kernels" "$dir"/_lowbit*.so | sed "s|$dir/||"
    # the Mach-O header's NOUNDEFS flag: the linker left no symbol to resolve at load time
    file -L "$dir/liblowbit.dylib" | grep -q NOUNDEFS || { echo "macos: undefined symbols"; exit 1; }
  fi
  echo "macos: $target built and linked: liblowbit.dylib, $(ls "$dir"/test_* | wc -l) test" \
    "executables, $(ls "$dir"/*.so | wc -l) extension modules"
done
echo "macos: both targets in $((SECONDS - T0)) s"
