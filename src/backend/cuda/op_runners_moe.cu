// The CUDA backend's runners of the mixture-of-experts ops (kernels in
// moe.cu and mmq_id.cu; which nodes they take in op_support.cu). The
// expert matmul takes the int8 tensor cores for every batch size where its
// type has them (one arithmetic whatever the batch), else, and under
// MINFER_GEMV_F32, the f32 GEMV.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/weights.h"

namespace minfer::cuda::detail {

namespace {

Status need_inputs(const Call& c, size_t n) {
  if (c.n_in != n) return node_error(c.node, "takes " + std::to_string(n) + " inputs");
  for (size_t i = 0; i < n; ++i) {
    if (c.in[i] == nullptr) return node_error(c.node, "missing input " + std::to_string(i));
  }
  return Status::ok();
}

}  // namespace

Status CudaBackend::run_moe_topk(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeRouteMeta* m, node_meta<graph::MoeRouteMeta>(c.node));
  MINFER_RETURN_IF_ERROR(need_inputs(c, 1));
  return launched(
      c.node, "moe_topk",
      launch_moe_topk(c.f32_in(0), c.node.shape.ne[1], static_cast<int>(m->n_expert),
                      static_cast<int>(m->n_used), static_cast<int>(m->gating),
                      static_cast<int32_t*>(c.out), static_cast<int*>(err_.data()), stream_.get()));
}

Status CudaBackend::run_moe_weights(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeRouteMeta* m, node_meta<graph::MoeRouteMeta>(c.node));
  MINFER_RETURN_IF_ERROR(need_inputs(c, 2));
  return launched(c.node, "moe_weights",
                  launch_moe_weights(c.f32_in(0), c.i32_in(1), c.node.shape.ne[1],
                                     static_cast<int>(m->n_expert), static_cast<int>(m->n_used),
                                     static_cast<int>(m->gating), c.f32_out(),
                                     static_cast<int*>(err_.data()), stream_.get()));
}

Status CudaBackend::run_matmul_id(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulIdMeta* m, node_meta<graph::MatMulIdMeta>(c.node));
  MINFER_RETURN_IF_ERROR(need_inputs(c, 2));
  const DeviceWeight* w = weights_->find(m->weight);
  if (w == nullptr) return node_error(c.node, "weight '" + m->weight + "' not on the GPU");
  if (w->rows != m->out_dim * m->n_expert || w->row_len != m->in_dim) {
    return node_error(c.node, "weight '" + m->weight + "' is [" + std::to_string(w->rows) + " x " +
                                  std::to_string(w->row_len) + "], not " +
                                  std::to_string(m->n_expert) + " experts of [" +
                                  std::to_string(m->out_dim) + " x " + std::to_string(m->in_dim) +
                                  "]");
  }
  const float* bias = nullptr;
  if (!m->bias.empty()) {
    const DeviceWeight* b = weights_->find(m->bias);
    if (b == nullptr) return node_error(c.node, "bias '" + m->bias + "' not on the GPU");
    bias = reinterpret_cast<const float*>(b->data);
  }
  const int64_t rows_out = c.node.shape.ne[1];
  if (rows_out % m->n_used != 0) {
    return node_error(c.node, std::to_string(rows_out) + " output rows for " +
                                  std::to_string(m->n_used) + " experts a token");
  }
  MatMulIdArgs a{w->type,
                 w->data,
                 w->row_bytes,
                 w->row_bytes * static_cast<size_t>(m->out_dim),
                 m->out_dim,
                 m->in_dim,
                 m->n_expert,
                 c.f32_in(0),
                 m->per_row_input,
                 c.i32_in(1),
                 rows_out / m->n_used,
                 static_cast<int>(m->n_used),
                 bias,
                 c.f32_out(),
                 static_cast<int*>(err_.data())};
  const int64_t n_act = m->per_row_input ? rows_out : rows_out / m->n_used;
  if (q8_gemv_ && has_mmq_id(w->type, m->in_dim) && quantize_q8_takes(m->in_dim, n_act)) {
    return run_mmq_id(c, a, n_act);
  }
  return launched(c.node, "matmul_id", launch_matmul_id(a, stream_.get()));
}

Status CudaBackend::run_mmq_id(const Call& c, const MatMulIdArgs& args, int64_t n_act) {
  Q8Input in;
  in.x = args.x;
  in.in_dim = args.in_dim;
  in.n_tokens = n_act;
  in.scale_per_256 = quant::type_traits(args.type).block_size == 256;
  const size_t q_bytes = quantized_bytes(in.in_dim, in.n_tokens);
  const size_t work =
      mmq_id_work_bytes(args.n_tokens * args.n_used, static_cast<int>(args.n_expert));
  MINFER_ASSIGN_OR_RETURN(float* s, scratch(c.node, q_bytes + work));
  auto* quantized = reinterpret_cast<int8_t*>(s);
  MINFER_RETURN_IF_ERROR(quantize_for_mmq(c, in, quantized, {}));
  // Kept for the next node (the up projection after the gate) unless this
  // one's output overwrites its input.
  quantized_.valid = c.out != c.in[0];
  return launched(c.node, "mmq_id",
                  launch_mmq_id(MmqIdArgs{args, quantized, quantized + q_bytes}, stream_.get()));
}

Status CudaBackend::run_moe_sum(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MoeSumMeta* m, node_meta<graph::MoeSumMeta>(c.node));
  MINFER_RETURN_IF_ERROR(need_inputs(c, 2));
  return launched(
      c.node, "moe_sum",
      launch_moe_sum(c.f32_in(0), c.f32_in(1), c.node.shape.ne[1], static_cast<int>(m->n_used),
                     c.node.shape.ne[0], c.f32_out(), stream_.get()));
}

}  // namespace minfer::cuda::detail
