#!/usr/bin/env bash
# Arm check on an x86 machine: cross-compile liblowbit and the C test runner for Linux aarch64 with
# Debian's gcc-aarch64-linux-gnu, then run the tests under qemu-aarch64 twice:
#   -cpu max          has FEAT_DotProd and FEAT_I8MM: the neon, dotprod and i8mm variants are
#                     tested against scalar;
#   -cpu neoverse-n1  dotprod without i8mm: detection must leave i8mm out (and refuse forcing it);
#   -cpu cortex-a53   ARMv8.0, no dotprod: detection must leave dotprod out (and refuse forcing it).
# Exits non-zero on any failure.  LOWBIT_ARM_SANITIZE=1 adds an ASan+UBSan build (slow: minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
command -v cmake >/dev/null || need+=(cmake)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi

SYSROOT=/usr/aarch64-linux-gnu
TOOLCHAIN="$ROOT/native/cmake/aarch64-linux-gnu.cmake"
JOBS=$(nproc 2>/dev/null || echo 2)

build() { # build dir, extra cmake args...
  local dir=$1
  shift
  cmake -S "$ROOT" -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DCMAKE_BUILD_TYPE=Release \
    -DLOWBIT_BUILD_TESTS=ON -DLOWBIT_PYTHON=OFF "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

# Every test_* binary of a build dir under one emulated CPU; $2 = variants it must test.
run_tests() { # build dir, qemu cpu, expected non-scalar variants
  local dir=$1 cpu=$2 variants=$3 t
  for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    echo "== qemu-aarch64 -cpu $cpu $(basename "$t")"
    QEMU_CPU=$cpu LOWBIT_TEST_VARIANTS=$variants ASAN_OPTIONS=detect_leaks=0 \
      qemu-aarch64 -L "$SYSROOT" "$t"
  done
}

BUILD=${LOWBIT_ARM_BUILD:-$ROOT/build/ci-arm}
build "$BUILD"
if command -v file >/dev/null; then file -L "$BUILD/liblowbit.so"; fi
run_tests "$BUILD" max neon,dotprod,i8mm
echo "== qemu-aarch64 -cpu neoverse-n1 test_kernels (dotprod, no i8mm)"
QEMU_CPU=neoverse-n1 LOWBIT_TEST_VARIANTS=neon,dotprod qemu-aarch64 -L "$SYSROOT" "$BUILD/test_kernels"
run_tests "$BUILD" cortex-a53 neon

# Without getauxval (a LOWBIT_PORTABLE build: the path of systems lacking it) dotprod and i8mm must
# not be assumed even on a CPU that has them.
cmake -S "$ROOT" -B "$BUILD-portable" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DCMAKE_BUILD_TYPE=Release \
  -DLOWBIT_BUILD_TESTS=ON -DLOWBIT_PYTHON=OFF -DLOWBIT_PORTABLE=ON >/dev/null
cmake --build "$BUILD-portable" -j "$JOBS" --target test_threads >/dev/null
echo "== qemu-aarch64 -cpu max test_threads (LOWBIT_PORTABLE)"
QEMU_CPU=max qemu-aarch64 -L "$SYSROOT" "$BUILD-portable/test_threads"

if [ "${LOWBIT_ARM_SANITIZE:-0}" = 1 ]; then
  # LeakSanitizer cannot run under qemu-user (ptrace-like environment): leaks are off.
  build "$BUILD-san" -DLOWBIT_SANITIZE=ON
  run_tests "$BUILD-san" max neon,dotprod,i8mm
fi
echo "arm: all tests passed"
