#!/usr/bin/env bash
# Windows x86-64 check on a Linux machine: liblowbit and the C test runner cross-compiled with
# Debian's mingw-w64 (gcc-mingw-w64-x86-64, warnings as errors), then every test executable run
# under wine64 once per x86 variant this CPU supports, forced with PYLOWBIT_ISA (scalar, avx2,
# avxvnni_emulated, avxvnni, avx512vnni): the checks of the native ctest run.  test_kernels is also told the variants the CPU
# has (LOWBIT_TEST_VARIANTS, from /proc/cpuinfo), so the Windows build's CPUID / XGETBV detection
# must find the same.  A POSIX-only call outside the platform layer (pthread_*, sysconf,
# posix_memalign, clock_gettime, ...) fails the build here.  Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

need=()
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64)
command -v wine64 >/dev/null || [ -x /usr/lib/wine/wine64 ] || need+=(wine64)
command -v cmake >/dev/null || need+=(cmake)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi
WINE=${LOWBIT_WINE:-$(command -v wine64 || echo /usr/lib/wine/wine64)} # Debian: not on PATH
WINESERVER=$(command -v wineserver || echo "$(dirname "$WINE")/wineserver")

BUILD=${LOWBIT_WINDOWS_BUILD:-$ROOT/build/ci-windows}
rm -rf "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/native/cmake/mingw-w64-x86_64.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DLOWBIT_BUILD_TESTS=ON -DLOWBIT_PYTHON=OFF -DCMAKE_C_FLAGS=-Werror \
  >/dev/null
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" >"$BUILD/build.log" 2>&1 || {
  grep -E "error|warning" "$BUILD/build.log" | head -20
  echo "windows: x86_64-windows build FAILED"
  exit 1
}
if command -v file >/dev/null; then file -L "$BUILD/liblowbit.dll" "$BUILD/test_kernels.exe"; fi

# The variants this CPU has, by the library's rules (isa_select.h: AVX2 with FMA and F16C; AVX-VNNI;
# AVX-512 F/DQ/BW/VL with VNNI).
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
variants=()
# avxvnni_emulated (a LOWBIT_BUILD_TESTS build's test variant) wherever avx2 runs
has avx2 fma f16c && variants+=(avx2 avxvnni_emulated)
has avx2 fma f16c avx_vnni && variants+=(avxvnni)
has avx2 fma f16c avx512f avx512dq avx512bw avx512vl avx512_vnni && variants+=(avx512vnni)
expected=$(IFS=,; echo "${variants[*]:-}")

# A throw-away wine prefix (made on first use, ~10 s); no debug chatter, no Mono / Gecko installs.
# The prefix's wineserver outlives the last program by a few seconds: stopped before the removal.
WINEPREFIX=$(mktemp -d)
trap '"$WINESERVER" -k 2>/dev/null; "$WINESERVER" -w 2>/dev/null; rm -rf "$WINEPREFIX"' EXIT
export WINEPREFIX WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
# The prefix is made here, not by the first test, and one wineserver serves every run (-p: it
# does not exit when idle): CI runs lost a program to wine itself, once while the prefix was set up
# around it (an empty log), once to "wine client error: recvmsg: Connection reset by peer".
"$WINE" wineboot --init >/dev/null 2>&1 || true
"$WINESERVER" -w
"$WINESERVER" -p

# One run of a test program, tried once more only when it printed no test result at all (no
# "passed", no "FAIL": wine did not run it, or it died before its first result), so a test that
# fails still fails, and one that crashes fails twice.
run_test() { # isa exe log
  local i
  for i in 1 2; do
    if PYLOWBIT_ISA=$1 LOWBIT_TEST_VARIANTS=$expected "$WINE" "$2" >"$3" 2>&1; then return 0; fi
    grep -qE "passed|FAIL" "$3" && return 1
    echo "windows (wine64) PYLOWBIT_ISA=$1 $(basename "$2"): no test result (try $i): $(head -c 200 "$3")"
  done
  return 1
}

failed=0
for isa in scalar "${variants[@]}"; do
  for t in "$BUILD"/test_*.exe; do
    name=$(basename "$t" .exe)
    log="$BUILD/$name-$isa.log"
    if run_test "$isa" "$t" "$log"; then
      echo "windows (wine64) PYLOWBIT_ISA=$isa $name: $(tail -1 "$log")"
    else
      echo "windows (wine64) PYLOWBIT_ISA=$isa $name FAILED:"
      grep -E "FAIL|passed" "$log" | head -20 || tail -20 "$log"
      failed=1
    fi
  done
done
[ "$failed" = 0 ] || exit 1
echo "windows: all tests passed under wine64 (variants: scalar${expected:+,$expected})"
