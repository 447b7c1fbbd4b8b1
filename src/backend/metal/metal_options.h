// The Metal backend's switches, as an options section (base/options.h).
// Header-only so that a build without Metal still lists them.
#pragma once

#include <span>
#include <string>

#include "base/options.h"

namespace minfer::metal {

struct MetalOptions {
  // MINFER_DISABLE_METAL (or MINFER_DISABLE_MPS, its older name): no Metal device.
  bool disable_metal = false;
  std::string metallib_file;  // MINFER_METALLIB_FILE: a Metal kernel library to load

  static std::span<const OptionField<MetalOptions>> fields() {
    // clang-format off
    static const OptionField<MetalOptions> kRows[] = {
        {{"MINFER_DISABLE_METAL", "1: no Metal device"}, &MetalOptions::disable_metal},
        {{"MINFER_DISABLE_MPS", "1: no Metal device (the older name)"}, &MetalOptions::disable_metal},
        {{"MINFER_METALLIB_FILE", "PATH: the Metal kernel library to load instead of the one beside the binary"}, &MetalOptions::metallib_file},
    };
    // clang-format on
    return kRows;
  }
};

}  // namespace minfer::metal
