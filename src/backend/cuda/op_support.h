// The CUDA backend's capability predicates: for each op, whether its kernels
// can run a node (dtypes, metadata, weights on the device with a decoder,
// shapes the kernels take). The op table in cuda_backend.cu pairs each op with
// one of these; execute_node re-checks them and names what does not fit.
// Pure functions of (node, uploaded weights). Include only from .cu files.
#pragma once

#include "backend/cuda/weights.h"
#include "graph/ir.h"
#include "quant/tensor_type.h"

namespace minfer::cuda {

bool f32_out(const graph::Node& n, const DeviceWeights& w);
bool input_node(const graph::Node& n, const DeviceWeights& w);
bool matmul_ok(const graph::Node& n, const DeviceWeights& w);
// MatMulAdd: a matmul with a residual input, up to 4 tokens (the GEMV).
bool matmul_add_ok(const graph::Node& n, const DeviceWeights& w);
bool get_rows_ok(const graph::Node& n, const DeviceWeights& w);
bool rms_norm_ok(const graph::Node& n, const DeviceWeights& w);
bool rope_ok(const graph::Node& n, const DeviceWeights& w);
// The kernels read f32 or f16 caches, K and V of one type.
bool cache_types_ok(quant::TensorType k, quant::TensorType v);
bool kv_store_ok(const graph::Node& n, const DeviceWeights& w);
bool attention_ok(const graph::Node& n, const DeviceWeights& w);
// FusedQKV / FusedQkvNorm for one token.
bool fused_qkv_ok(const graph::Node& n, const DeviceWeights& w);
// FusedFFN up to 4 tokens, gate and up of one type.
bool fused_ffn_ok(const graph::Node& n, const DeviceWeights& w);

}  // namespace minfer::cuda
