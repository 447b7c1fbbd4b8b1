// The switches every GPU backend shares (MINFER_GPU_TIMEOUT), as an options
// section (base/options.h). Header-only so that every build lists them.
#pragma once

#include <span>

#include "base/options.h"

namespace minfer::backend {

struct GpuOptions {
  double gpu_timeout_s = 10.0;  // MINFER_GPU_TIMEOUT: deadline of every GPU wait

  static std::span<const OptionField<GpuOptions>> fields() {
    static const OptionField<GpuOptions> kRows[] = {
        {{"MINFER_GPU_TIMEOUT", "S: deadline of every GPU wait in seconds (10)"},
         SecondsOption<GpuOptions>{&GpuOptions::gpu_timeout_s}},
    };
    return kRows;
  }
};

}  // namespace minfer::backend
