# Cross-compiles minfer for 64-bit Arm Linux on an x86-64 Debian machine, with
# clang and Debian's aarch64 cross libraries (g++-aarch64-linux-gnu brings
# libc, libstdc++ and binutils). Executables run under qemu-user, which CMake
# uses as the emulator for anything it runs at build or test time:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DMINFER_KERNEL_TESTS_ONLY=ON ...
#   qemu-aarch64 -L /usr/aarch64-linux-gnu build-aarch64/tests/minfer_kernel_test
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(MINFER_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER clang)
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_C_COMPILER_TARGET ${MINFER_CROSS_TRIPLE})
set(CMAKE_CXX_COMPILER_TARGET ${MINFER_CROSS_TRIPLE})

# Libraries and headers come only from the cross sysroot, programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${MINFER_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${MINFER_CROSS_TRIPLE})
