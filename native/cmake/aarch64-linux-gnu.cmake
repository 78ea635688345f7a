# Cross-compile for Linux aarch64 with Debian's gcc-aarch64-linux-gnu (used by .ci/arm.sh).
# If qemu-aarch64 is installed, ctest runs the test binaries through it (pick the emulated CPU
# with the QEMU_CPU environment variable, e.g. QEMU_CPU=max or QEMU_CPU=cortex-a53).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(LOWBIT_CROSS_PREFIX aarch64-linux-gnu- CACHE STRING "Cross toolchain prefix")
set(CMAKE_C_COMPILER ${LOWBIT_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${LOWBIT_CROSS_PREFIX}g++)

# Debian installs the target libraries and headers here.
set(LOWBIT_CROSS_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "Target library root")
set(CMAKE_FIND_ROOT_PATH ${LOWBIT_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(LOWBIT_QEMU_AARCH64 qemu-aarch64)
if(LOWBIT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LOWBIT_QEMU_AARCH64} -L ${LOWBIT_CROSS_SYSROOT})
endif()
