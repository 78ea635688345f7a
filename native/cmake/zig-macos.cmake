# Cross-compile liblowbit for macOS with zig's clang-based `cc` (PyPI ziglang carries the macOS
# headers and libSystem stubs): a build and link check, not a shipping build (the wheels are built
# on macOS itself, .github/workflows/wheels.yml).  -DLOWBIT_ZIG_TARGET=aarch64-macos|x86_64-macos;
# -DLOWBIT_ZIG=the absolute path of the zig executable (ziglang's is next to its __init__.py).
# The wrappers call that file directly: a command resolved through PATH at build time found another
# interpreter than the one ziglang was installed for.  Used by .ci/macos.sh.
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
set(LOWBIT_ZIG "" CACHE FILEPATH "absolute path of the zig executable")
# try_compile projects read this file again: hand them the same zig and target.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES LOWBIT_ZIG LOWBIT_ZIG_TARGET)
if(NOT IS_ABSOLUTE "${LOWBIT_ZIG}" OR NOT EXISTS "${LOWBIT_ZIG}")
  message(FATAL_ERROR "zig-macos.cmake: LOWBIT_ZIG must be the absolute path of a zig executable, "
                      "got '${LOWBIT_ZIG}'")
endif()
set(_wrapper ${CMAKE_BINARY_DIR}/zig-cc-${LOWBIT_ZIG_TARGET})
# zig's Mach-O linker crashes linking a -bundle with -undefined dynamic_lookup (how CMake links a
# Python extension module on macOS): the check links it as a dylib, which Python loads alike.
file(WRITE ${_wrapper} "#!/bin/sh
for arg do shift; [ \"$arg\" = -bundle ] && arg=-shared; set -- \"$@\" \"$arg\"; done
exec '${LOWBIT_ZIG}' cc -target ${LOWBIT_ZIG_TARGET} \"$@\"
")
file(CHMOD ${_wrapper} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
set(CMAKE_C_COMPILER ${_wrapper})
set(_ar ${CMAKE_BINARY_DIR}/zig-ar)
file(WRITE ${_ar} "#!/bin/sh\nexec '${LOWBIT_ZIG}' ar \"$@\"\n")
file(CHMOD ${_ar} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
set(CMAKE_AR ${_ar} CACHE FILEPATH "")
set(CMAKE_RANLIB true CACHE FILEPATH "") # zig ar writes the symbol index itself
# zig reads -march as a CPU name: the dotprod and i8mm sources get their features this way.
set(LOWBIT_DOTPROD_FLAGS -mcpu=generic+dotprod CACHE STRING "")
set(LOWBIT_I8MM_FLAGS -mcpu=generic+dotprod+i8mm CACHE STRING "")
