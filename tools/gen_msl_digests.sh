#!/usr/bin/env bash
# Regenerates tests/backend/msl_digests.sha256, the SHA-256 of every MSL file
# the build generates from the GPU kernels (src/backend/metal/msl.cmake), which
# the test msl_golden_digests checks with sha256sum. Run it after changing a
# kernel, its manifest, or the toolchain (glslc, SPIRV-Cross), and review the
# diff: only the kernels you changed should move.
#   tools/gen_msl_digests.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target minfer_msl_kernels
(cd "$build/shader_kernels/msl" && LC_ALL=C sha256sum -- *.metal) > tests/backend/msl_digests.sha256
echo "wrote tests/backend/msl_digests.sha256 ($(wc -l < tests/backend/msl_digests.sha256) kernels)"
