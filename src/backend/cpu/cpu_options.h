// The CPU backend's switches, as an options section (base/options.h).
// Header-only, like every backend's section.
#pragma once

#include <span>

#include "base/options.h"

namespace minfer::cpu {

struct CpuOptions {
  bool cpu_scalar = false;     // MINFER_CPU_SCALAR: scalar CPU kernels (process-wide)
  bool cpu_no_avx512 = false;  // MINFER_CPU_NO_AVX512: AVX2 prefill GEMM (process-wide)
  // MINFER_CPU_NO_REPACK: CPU matmuls read the file's rows, no packed copy.
  bool cpu_no_repack = false;

  static std::span<const OptionField<CpuOptions>> fields() {
    // clang-format off
    static const OptionField<CpuOptions> kRows[] = {
        {{"MINFER_CPU_SCALAR", "1: scalar CPU kernels"}, &CpuOptions::cpu_scalar},
        {{"MINFER_CPU_NO_AVX512", "1: AVX2 prefill GEMM instead of the AVX-512 VNNI one"}, &CpuOptions::cpu_no_avx512},
        {{"MINFER_CPU_NO_REPACK", "1: CPU matmuls read the file's rows instead of a repacked copy"}, &CpuOptions::cpu_no_repack},
    };
    // clang-format on
    return kRows;
  }
};

}  // namespace minfer::cpu
