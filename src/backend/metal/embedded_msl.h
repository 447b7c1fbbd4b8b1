// The MSL of every embedded kernel, generated at build time from its SPIR-V
// (msl_gen_main.cpp, msl_translate.h) and compiled into Metal builds: the
// source the device compiles at startup when no prebuilt library is found,
// and the sidecar it checks against the kernel table first.
//
// Contract:
//   - embedded_msl() has one entry per embedded_kernels() entry, in the same
//     order and with the same label; source() joins its pieces (kept below
//     the 64 KiB a string literal may portably hold).
// Defined only in builds with MINFER_METAL. Threading: immutable.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace minfer::metal {

struct EmbeddedMsl {
  std::string_view label;  // "matmul.q4_k"
  std::span<const std::string_view> pieces;
  std::string_view sidecar;  // its JSON (msl_abi.h)

  std::string source() const {
    std::string s;
    for (std::string_view p : pieces) s += p;
    return s;
  }
};

std::span<const EmbeddedMsl> embedded_msl();

}  // namespace minfer::metal
