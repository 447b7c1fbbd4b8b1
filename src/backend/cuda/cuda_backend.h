// The CUDA backend's public face: whether a device is usable, and a factory
// for the backend. Free of CUDA headers, so that any C++ file may include it;
// in a build without CUDA (MINFER_CUDA=OFF) the same functions exist and say
// that CUDA is not compiled in.
//
// Contract of the backend create_backend() returns (backend::Backend):
//   - Every tensor of `weights` is uploaded to device memory once, at
//     creation, and registered by name (the all-weights gate): if one cannot
//     be (a type without a device kernel, a row length that is not a multiple
//     of 32, out of device memory), creation fails with the reason and the
//     caller runs without CUDA. has_weight() is then true for every weight.
//   - supports_op() says yes to every op the model builders emit, with f32
//     activations between nodes, when the node's weights and shapes fit the
//     kernels; supports_fused() claims SwiGLU, GeGLU and the decode fusions
//     FusedQKV, FusedQkvNorm (one token), FusedFFN and MatMulAdd (batches
//     below the tensor-core size, or batch-invariant ones of any size).
//   - Batch-invariant nodes (graph::MatMulMeta::batch_invariant, ...) get
//     kernels whose per-token results do not depend on the batch, bit for
//     bit (docs/CUDA.md, "Batched decode and batch invariance").
//   - execute_node() only enqueues kernels on the backend's stream; errors
//     (missing weight, wrong metadata, a shape the kernels refuse) name the
//     node and the numbers. A split's launches are captured into a CUDA graph
//     on its second execution and replayed from the third (begin_split /
//     end_split; CudaOptions::no_cuda_graph turns it off). synchronize() waits
//     with a deadline (backend::GpuOptions::gpu_timeout_s, default 10 s) and, on timeout
//     or a device error, names the last 16 kernels launched.
//   - Buffers are cudaMalloc allocations; read_host/write_host copy
//     synchronously with respect to the host.
// Threading: as backend::Backend (one driving thread).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "base/options.h"
#include "base/status.h"
#include "model/weights.h"

namespace minfer::cuda {

// True when the build has CUDA and a device is usable (MINFER_DISABLE_CUDA is
// not set in process_section<CudaOptions>()). The first call initializes the device
// (MINFER_CUDA_DEVICE picks it) and logs it.
bool available();
// Why available() is false ("" when it is true).
std::string unavailable_reason();

// The backend over `weights` (which must outlive it), or why not. `options`
// picks its variants: gpu_timeout_s, no_cuda_graph, op_profile, gemv_f32,
// no_split_kv (their defaults are the fast paths).
Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options = {});

}  // namespace minfer::cuda
