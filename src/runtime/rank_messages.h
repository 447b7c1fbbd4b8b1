// What rank 0 of a process-per-rank tensor-parallel group sends the other
// ranks (docs/PARALLEL.md, "One rank per process"): once, the setup every
// rank's runner must share (cache rows and types, graph cache size, the
// decode graph's params); then each forward's params and inputs; finally an
// empty message that ends the group.
//
// Contract: encode_* produce bytes that decode_* of the same build read back
// exactly. decode_* refuse bytes of another kind, version or length with an
// error naming what was wrong (never read past the end). Pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "graph/executor.h"
#include "model/graph_params.h"
#include "quant/tensor_type.h"

namespace minfer::runtime {

struct RankSetup {
  int64_t kv_rows = 0;
  quant::TensorType k_type = quant::TensorType::F16;
  quant::TensorType v_type = quant::TensorType::F16;
  int64_t cache_size = 1;
  model::GraphParams decode_params;
};

// One forward: the params and copies of the input arrays.
struct RankForward {
  model::GraphParams params;
  std::vector<int32_t> tokens, positions, cells, seq_slots, page_table, output_rows;

  graph::ForwardInputs inputs() const {
    return {tokens, positions, cells, seq_slots, page_table, output_rows};
  }
};

std::vector<std::byte> encode_setup(const RankSetup& setup);
Result<RankSetup> decode_setup(std::span<const std::byte> bytes);

std::vector<std::byte> encode_forward(const model::GraphParams& params,
                                      const graph::ForwardInputs& inputs);
Result<RankForward> decode_forward(std::span<const std::byte> bytes);

}  // namespace minfer::runtime
