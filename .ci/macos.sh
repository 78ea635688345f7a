#!/usr/bin/env bash
# macOS build check on a Linux machine: liblowbit and the C test runner compiled and linked for
# aarch64-macos and x86_64-macos with zig's clang-based cc (PyPI ziglang), warnings as errors.
# Linking the test executables against the dylib proves it has no undefined symbols; a Linux-only
# call outside LOWBIT_LINUX (sched_getaffinity, getauxval, O_TMPFILE, ...) fails here.
# Needs cmake and a python3 with ziglang importable (LOWBIT_ZIG overrides the command).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ZIG=${LOWBIT_ZIG:-python3 -m ziglang}
OUT=${LOWBIT_MACOS_BUILD:-$ROOT/build/ci-macos}
$ZIG version >/dev/null # fails early if ziglang is missing
for target in aarch64-macos x86_64-macos; do
  dir=$OUT/$target
  rm -rf "$dir"
  cmake -S "$ROOT" -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$ROOT/native/cmake/zig-macos.cmake" \
    -DLOWBIT_ZIG_TARGET=$target "-DLOWBIT_ZIG=$ZIG" -DLOWBIT_PYTHON=OFF -DLOWBIT_BUILD_TESTS=ON \
    -DCMAKE_C_FLAGS=-Werror >/dev/null
  cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" >"$dir/build.log" 2>&1 || {
    grep -E "error|warning" "$dir/build.log" | head -20
    echo "macos: $target build FAILED"
    exit 1
  }
  if command -v file >/dev/null; then file -L "$dir/liblowbit.dylib" "$dir/test_kernels"; fi
  echo "macos: $target built and linked ($(ls "$dir"/test_* | wc -l) test executables)"
done
