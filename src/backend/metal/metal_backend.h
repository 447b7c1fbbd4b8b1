// The Metal backend kind of the registry (backend/registry.h): the device
// the process shares and the GPU backend over it (shader/shader_backend.h), the
// same backend class the Vulkan kind makes.
//
// Contract:
//   - unavailable_reason(options) is "" when a Metal device can run here,
//     else why not (metal_device.h: disabled, no device, no unified memory).
//   - device_status(options): ok, unavailable, or the error opening the
//     device met (a kernel that does not compile): then create_backend()
//     returns that error instead of the runner quietly using another kind.
//   - The device is opened once per process and shared by every backend
//     made from it; it stays open until the process ends.
//   - create_backend() makes the GPU backend "Metal", its weights read in
//     place from the mapped model file unless MINFER_WEIGHT_COPY=1.
//   - default_cache_type(n_layer, n_kv_embd): the KV cache type the Metal
//     backend runs best where the user set none: f16 from n_layer *
//     n_kv_embd >= 8192 (the 7B class, where attention reads the whole cache
//     each step), f32 below (latency-bound small models, where converting
//     costs more than the bandwidth saves).
// Built only with MINFER_METAL except default_cache_type (metal_policy.cpp).
// Threading: unavailable_reason and create_backend may be called from any
// thread; the device cache is locked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "base/options.h"
#include "base/status.h"
#include "model/weights.h"
#include "quant/tensor_type.h"

namespace minfer::metal {

std::string unavailable_reason(const Options& options);
Status device_status(const Options& options);
Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options);

quant::TensorType default_cache_type(int64_t n_layer, int64_t n_kv_embd);

}  // namespace minfer::metal
