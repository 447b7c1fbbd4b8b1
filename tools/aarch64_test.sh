#!/usr/bin/env bash
# Cross-compiles minfer for 64-bit Arm Linux (clang with Debian's aarch64
# cross libraries, cmake/aarch64-linux-gnu.cmake) and runs the CPU kernel
# tests (NEON kernels against the scalar reference, matmul, GEMM, ops,
# attention) under qemu-user: all of them on qemu's default CPU, which has
# the ARMv8.2 dot product, and the dot-product tests again on a Cortex-A53
# (ARMv8.0, no dot product), where dispatch must fall back to plain NEON.
# The whole engine and the CLI are compiled; only the kernel tests are linked
# (MINFER_KERNEL_TESTS_ONLY: no pcre2/utf8proc for the target needed).
# Needs what tools/install_deps.sh --tests installs (g++-aarch64-linux-gnu, qemu-user,
# googletest). Build folder: $MINFER_AARCH64_BUILD_DIR (default build-aarch64).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MINFER_AARCH64_BUILD_DIR:-build-aarch64}
cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
      -DCMAKE_BUILD_TYPE=Release -DMINFER_WERROR=ON -DMINFER_CUDA=OFF -DMINFER_FUZZ=OFF \
      -DMINFER_TESTS=ON -DMINFER_KERNEL_TESTS_ONLY=ON
cmake --build "$build" -j"$(nproc)"
run=(qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/minfer_kernel_test" --gtest_brief=1)
echo "aarch64_test: kernel tests under qemu-aarch64 (default CPU, with dotprod)"
"${run[@]}"
echo "aarch64_test: dot-product tests under qemu-aarch64 -cpu cortex-a53 (no dotprod)"
QEMU_CPU=cortex-a53 "${run[@]}" --gtest_filter='cpu_VecDot*:*cpu_VecDotSimd*:cpu_Matmul.*'
