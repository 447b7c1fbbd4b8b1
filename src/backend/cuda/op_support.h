// The CUDA backend's capability predicates: for each op, whether its kernels
// can run a node (dtypes, metadata, weights on the device with a decoder,
// shapes the kernels take). The op table in cuda_backend.cu pairs each op with
// one of these (or, where the node's own well-formedness is all there is to
// check, one of backend/node_checks.h); execute_node re-checks them and names
// what does not fit.
// Pure functions of (node, uploaded weights). Include only from .cu files.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/weights.h"
#include "graph/ir.h"
#include "quant/tensor_type.h"

namespace minfer::cuda {

bool matmul_ok(const graph::Node& n, const DeviceWeights& w);
// MatMulAdd: a matmul with a residual input, for the GEMVs' batches (below
// kMmaMinTokens tokens, or any batch-invariant one).
bool matmul_add_ok(const graph::Node& n, const DeviceWeights& w);
bool get_rows_ok(const graph::Node& n, const DeviceWeights& w);
bool rms_norm_ok(const graph::Node& n, const DeviceWeights& w);
bool rope_ok(const graph::Node& n, const DeviceWeights& w);
// The kernels read and write K and V cache rows of F32, F16 or Q8_0 each, in
// any combination; Q8_0 needs head_dim % 32 == 0. cache_types_problem says
// what does not fit (naming the types or the numbers), "" when all does.
std::string cache_types_problem(quant::TensorType k, quant::TensorType v, int64_t head_dim);
bool cache_types_ok(quant::TensorType k, quant::TensorType v, int64_t head_dim);
bool kv_store_ok(const graph::Node& n, const DeviceWeights& w);
// Attention over such a cache; a node with sinks needs its sink weight as
// f32 [n_head] on the device.
bool attention_ok(const graph::Node& n, const DeviceWeights& w);
// FusedQKV / FusedQkvNorm for one token, or (paged) for any number; the
// backend takes more than one only where its projections run on the int8
// tensor cores, and a batch-invariant one only there (CudaBackend::supports_op).
bool fused_qkv_ok(const graph::Node& n, const DeviceWeights& w);
// FusedFFN for the GEMVs' batches, gate and up of one type.
bool fused_ffn_ok(const graph::Node& n, const DeviceWeights& w);
// The mixture-of-experts ops (moe.cu): up to kMoeMaxExperts experts, up to
// kMoeMaxUsed a token; the expert matmul over a 3-D weight with a decoder
// whose rows are the experts' matrices one after another.
// MoeTopK and MoeWeights share moe_route_ok; MoeSum and gpt-oss's clamped
// GLU need only a well-formed node (backend/node_checks.h).
bool moe_route_ok(const graph::Node& n, const DeviceWeights& w);
bool matmul_id_ok(const graph::Node& n, const DeviceWeights& w);

}  // namespace minfer::cuda
