#!/usr/bin/env bash
# Installs what building and testing minfer needs on a fresh Debian machine:
# compilers and libraries from apt, test tooling (the `gguf` reader) from PyPI.
# Idempotent: skips what is already there. Needs root (or sudo) for apt.
set -euo pipefail

apt_packages=(cmake ninja-build clang libclang-rt-dev g++ pkg-config libgtest-dev libgmock-dev
              libbenchmark-dev libpcre2-dev libutf8proc-dev python3 python3-pip)
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

# Python test tooling: the independent GGUF reader/dequantizer used by the tests.
py=python3
if ! $py -c "import gguf, numpy" >/dev/null 2>&1; then
  echo "install_deps: pip packages: gguf numpy"
  $py -m pip install -q gguf numpy || $py -m pip install -q --break-system-packages gguf numpy
fi
