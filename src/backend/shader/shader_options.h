// The switches of the shared command-buffer layer under the Vulkan and Metal
// backends, as an options section (base/options.h). Header-only so that
// every build lists them.
#pragma once

#include <span>

#include "base/options.h"

namespace minfer::shader {

struct ShaderOptions {
  // MINFER_WEIGHT_COPY: GPU weights copied into buffers, not read in place
  // from the mapped file (unified-memory devices).
  bool weight_copy = false;
  bool no_gpu_replay = false;  // MINFER_NO_GPU_REPLAY: record every split, never resubmit one

  static std::span<const OptionField<ShaderOptions>> fields() {
    // clang-format off
    static const OptionField<ShaderOptions> kRows[] = {
        {{"MINFER_WEIGHT_COPY", "1: copy the weights into GPU buffers instead of reading the file in place (Metal)"}, &ShaderOptions::weight_copy},
        {{"MINFER_NO_GPU_REPLAY", "1: Vulkan records every split anew (no command-buffer replay)"}, &ShaderOptions::no_gpu_replay},
    };
    // clang-format on
    return kRows;
  }
};

}  // namespace minfer::shader
