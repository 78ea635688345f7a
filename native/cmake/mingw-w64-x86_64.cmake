# Cross-compile for Windows x86-64 with Debian's gcc-mingw-w64-x86-64 (its win32 thread model: the
# library uses Win32 threads itself, so no winpthreads DLL is needed).  Used by .ci/windows.sh,
# which runs the test executables under wine64.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)

set(LOWBIT_CROSS_PREFIX x86_64-w64-mingw32- CACHE STRING "Cross toolchain prefix")
set(CMAKE_C_COMPILER ${LOWBIT_CROSS_PREFIX}gcc)
set(CMAKE_RC_COMPILER ${LOWBIT_CROSS_PREFIX}windres)

set(LOWBIT_CROSS_SYSROOT /usr/x86_64-w64-mingw32 CACHE PATH "Target library root")
set(CMAKE_FIND_ROOT_PATH ${LOWBIT_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
