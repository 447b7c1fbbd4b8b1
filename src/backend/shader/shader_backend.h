// The backend of a command-buffer GPU (backend/backend.h over shader/device.h):
// one class for every GPU API whose device layer implements shader::Device
// (Vulkan now, Metal next). The API-specific part is only how the device is
// opened (vulkan/vulkan_backend.h); everything a backend does with it lives
// here and in shader_backend_impl.h, op_support.cpp and op_runners.cpp.
//
// Contract:
//   - create_shader_backend() uploads every weight of `weights` through a
//     WeightsRegistry (with a progress bar on a terminal for large models)
//     and logs one line with the bytes and the time. The backend is then
//     all-or-nothing (requires_all_weights(): the all-weights gate).
//   - supports_op() says yes only to nodes its kernels run on this device
//     (the weight type's variant exists, the shapes are whole blocks, the
//     cache types are readable, the output fits one binding);
//     execute_node() only records (through one shader::Recorder) and
//     synchronize() submits the split once and waits with the
//     MINFER_GPU_TIMEOUT deadline. An index a kernel found outside its table
//     (a token id, a cache row, a position) is reported by the error words
//     after that wait as an error naming what and the kernel trail.
//   - Buffers come from a shader::BufferPool (alloc_fresh space is held until
//     the split's wait), weights from the registry; read_host / write_host
//     first finish any recorded work.
// Threading: as backend::Backend (one driving thread).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/shader/device.h"
#include "base/options.h"
#include "base/status.h"
#include "model/weights.h"
#include "quant/tensor_type.h"

namespace minfer::shader {

// `name` is the backend's name in traces and errors ("Vulkan"). The device is
// shared with whoever opened it; `weights` must outlive the backend.
// `cache_policy`, when given, is the backend's default_cache_type() (a GPU
// API's measured preference, e.g. metal::default_cache_type).
using CacheTypePolicy = quant::TensorType (*)(int64_t n_layer, int64_t n_kv_embd);
Result<std::unique_ptr<backend::Backend>> create_shader_backend(
    std::string name, std::shared_ptr<Device> device, const model::Weights& weights,
    const Options& options, CacheTypePolicy cache_policy = nullptr);

}  // namespace minfer::shader
