# Cross-compile liblowbit for macOS with zig's clang-based `cc` (PyPI ziglang carries the macOS
# headers and libSystem stubs): a build and link check, not a shipping build (the wheels are built
# on macOS itself, .github/workflows/wheels.yml).  -DLOWBIT_ZIG_TARGET=aarch64-macos|x86_64-macos;
# LOWBIT_ZIG is the command that runs zig (default: python3 -m ziglang).  Used by .ci/macos.sh.
set(CMAKE_SYSTEM_NAME Darwin)
set(LOWBIT_ZIG_TARGET aarch64-macos CACHE STRING "zig target triple")
if(LOWBIT_ZIG_TARGET MATCHES "^aarch64")
  set(CMAKE_SYSTEM_PROCESSOR arm64)
  set(CMAKE_OSX_ARCHITECTURES arm64 CACHE STRING "")
else()
  set(CMAKE_SYSTEM_PROCESSOR x86_64)
  set(CMAKE_OSX_ARCHITECTURES x86_64 CACHE STRING "")
endif()
# CMake would pass -arch and -isysroot for an Apple SDK; zig takes the target instead.
set(CMAKE_OSX_SYSROOT "" CACHE PATH "")
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "")

# CMAKE_C_COMPILER must be one file: a wrapper script that calls `zig cc -target ...`.
set(LOWBIT_ZIG "python3 -m ziglang" CACHE STRING "command that runs zig")
set(_wrapper ${CMAKE_BINARY_DIR}/zig-cc-${LOWBIT_ZIG_TARGET})
file(WRITE ${_wrapper} "#!/bin/sh\nexec ${LOWBIT_ZIG} cc -target ${LOWBIT_ZIG_TARGET} \"$@\"\n")
file(CHMOD ${_wrapper} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
set(CMAKE_C_COMPILER ${_wrapper})
set(_ar ${CMAKE_BINARY_DIR}/zig-ar)
file(WRITE ${_ar} "#!/bin/sh\nexec ${LOWBIT_ZIG} ar \"$@\"\n")
file(CHMOD ${_ar} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
set(CMAKE_AR ${_ar} CACHE FILEPATH "")
set(CMAKE_RANLIB true CACHE FILEPATH "") # zig ar writes the symbol index itself
# zig reads -march as a CPU name: the dotprod sources get the feature this way.
set(LOWBIT_DOTPROD_FLAGS -mcpu=generic+dotprod CACHE STRING "")
