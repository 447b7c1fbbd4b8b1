// The CUDA backend's switches, as an options section (base/options.h).
// Header-only so that a build without CUDA still lists them.
#pragma once

#include <span>

#include "base/options.h"

namespace minfer::cuda {

struct CudaOptions {
  bool disable_cuda = false;   // MINFER_DISABLE_CUDA: the CPU alone
  int cuda_device = 0;         // MINFER_CUDA_DEVICE: which GPU (process-wide)
  bool no_cuda_graph = false;  // MINFER_NO_CUDA_GRAPH: no CUDA graph replay
  bool gemv_f32 = false;       // MINFER_GEMV_F32: GPU decode GEMVs on f32 activations
  bool no_pdl = false;         // MINFER_NO_PDL: no programmatic dependent launch (process-wide)
  bool no_split_kv = false;    // MINFER_NO_SPLIT_KV: no split-KV decode attention

  static std::span<const OptionField<CudaOptions>> fields() {
    // clang-format off
    static const OptionField<CudaOptions> kRows[] = {
        {{"MINFER_DISABLE_CUDA", "1: run on the CPU only"}, &CudaOptions::disable_cuda},
        {{"MINFER_CUDA_DEVICE", "N: which CUDA device (0)"}, IntOption<CudaOptions>{&CudaOptions::cuda_device, 0, 1023}},
        {{"MINFER_NO_CUDA_GRAPH", "1: no CUDA graph replay"}, &CudaOptions::no_cuda_graph},
        {{"MINFER_GEMV_F32", "1: GPU decode GEMVs on f32 activations instead of int8"}, &CudaOptions::gemv_f32},
        {{"MINFER_NO_PDL", "1: no programmatic dependent launch"}, &CudaOptions::no_pdl},
        {{"MINFER_NO_SPLIT_KV", "1: GPU decode attention without the split-KV kernel"}, &CudaOptions::no_split_kv},
    };
    // clang-format on
    return kRows;
  }
};

}  // namespace minfer::cuda
