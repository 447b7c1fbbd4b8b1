#!/usr/bin/env bash
# Builds minfer with warnings as errors and runs every test: unit tests, the
# checks against independent references (the gguf Python package, llama.cpp
# goldens), the parity tests on the real Gemma 3 270M, and the bounded fuzz runs.
# Then builds the kernel tests (CPU backend and quantization) a second time
# with AddressSanitizer and UndefinedBehaviorSanitizer and runs them; any
# sanitizer report fails the run (measured on 2 cores: about 2.5 minutes to
# build, 6 seconds to run). MINFER_SANITIZE_TESTS=0 skips that part.
# Between the two, the CPU kernels are cross-built for AArch64 and their tests
# run under qemu (tools/aarch64_test.sh). Arguments go to ctest (e.g. -R attention).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh --tests
MINFER_GEMMA3_GGUF=$(bash tools/gemma3_path.sh)
export MINFER_GEMMA3_GGUF
build=${MINFER_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Release -DMINFER_WERROR=ON
cmake --build "$build" -j"$(nproc)"
(cd "$build" && ctest --output-on-failure -j"$(nproc)" "$@")

# The CPU kernels cross-built for AArch64 and tested under qemu (NEON paths).
MINFER_AARCH64_BUILD_DIR="$build-aarch64" bash tools/aarch64_test.sh

[ "${MINFER_SANITIZE_TESTS:-1}" = 0 ] && exit 0
# -O1 keeps the sanitized run fast enough; asserts stay on. Only the kernel
# test binaries are built (CUDA and fuzz targets are off).
san=${MINFER_SANITIZE_BUILD_DIR:-build-asan}
cmake -S . -B "$san" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DMINFER_WERROR=ON -DMINFER_SANITIZE=ON \
      -DMINFER_CUDA=OFF -DMINFER_FUZZ=OFF
cmake --build "$san" -j"$(nproc)" --target minfer_backend_test minfer_quant_test
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
for t in minfer_backend_test minfer_quant_test; do
  echo "== $t (AddressSanitizer + UndefinedBehaviorSanitizer)"
  "$san/tests/$t" --gtest_brief=1 --gtest_filter='-Vulkan*:OpConformance*'
done
# The Vulkan tests run on lavapipe, whose driver leaks 128 bytes of its own
# (a realloc in the ICD, unloaded before LeakSanitizer reports, so no
# suppression can name it; a bare vkCreateInstance + vkDestroyInstance
# leaks the same): our Vulkan code still runs under both
# sanitizers, with leak checking off for this one run. The op-conformance
# table opens the same device, so it runs here too.
echo "== minfer_backend_test Vulkan*, OpConformance* (AddressSanitizer + UndefinedBehaviorSanitizer, no leak check)"
ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 "$san/tests/minfer_backend_test" --gtest_brief=1 \
  --gtest_filter='Vulkan*:OpConformance*'

