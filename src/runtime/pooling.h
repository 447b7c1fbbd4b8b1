// Pooling: how one sequence's per-position hidden states (the final state
// after the output norm, Request::on_prompt_hidden) become its embedding,
// with llama.cpp's pooling types, and the normalizations llama-server
// applies to a pooled vector (its embd_normalize).
//
// Contract:
//   - Pooler takes a sequence's rows in position order, a step's worth at a
//     time (add()), as the engine's sink hands them; rows out of order or past
//     the sequence are an invalid-argument error. When every position has
//     come, result() gives one vector (mean, cls = position 0, last) or, for
//     kNone, one per position.
//   - The mean sums in double in position order: the same rows give the same
//     bits however the positions were split into steps.
//   - normalize_embedding(v, -1) leaves v; 0 scales the largest magnitude to
//     32760 (int16 range); 1 to unit taxicab norm; 2 to unit Euclidean norm;
//     p > 2 to unit p-norm. A zero vector stays zero.
// Threading: a Pooler is used by one thread at a time (the engine's, then
// the request's once the sequence has ended).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace minfer::runtime {

enum class Pooling : uint8_t { kNone, kMean, kCls, kLast };

const char* pooling_name(Pooling p);
// "none", "mean", "cls", "last"; anything else (llama.cpp's "rank" too) is an
// invalid-argument error naming it.
[[nodiscard]] Result<Pooling> parse_pooling(std::string_view name);
// A GGUF `<arch>.pooling_type` value (llama.cpp's numbering: 0 none, 1 mean,
// 2 cls, 3 last, 4 rank); rank and unknown values are unimplemented.
[[nodiscard]] Result<Pooling> pooling_from_gguf(uint32_t value);

class Pooler {
 public:
  Pooler(Pooling pooling, int64_t n_embd, int64_t n_positions);

  // rows: f32 [n][n_embd] for positions first.. first + n - 1.
  [[nodiscard]] Status add(int64_t first, std::span<const float> rows);
  bool complete() const { return seen_ == n_positions_; }
  // The embedding (kNone: one per position); empty until complete().
  std::vector<std::vector<float>> result() const;

 private:
  Pooling pooling_;
  int64_t n_embd_, n_positions_;
  int64_t seen_ = 0;
  std::vector<double> sum_;               // kMean
  std::vector<std::vector<float>> kept_;  // kNone: every row; kCls/kLast: one
};

void normalize_embedding(std::span<float> v, int norm);

}  // namespace minfer::runtime
