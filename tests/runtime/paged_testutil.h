// A paged forward pass driven by hand (runtime::ForwardRunner with
// GraphParams::page_size): sequences' tokens at their positions through a
// page table, for the batch-invariance checks of the engine tests (CPU and
// CUDA): one sequence's logits rows alone and beside another sequence's
// prompt chunk and decode token, compared bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/forward.h"
#include "runtime/runtime_testutil.h"

namespace minfer::runtime::testing {

// One paged forward pass: sequences' tokens at their positions, through a
// page table of n_slots rows of kMaxPages pages of kPageSize cells.
constexpr int64_t kPageSize = 8, kMaxPages = 32, kSlots = 4;

struct Part {  // some tokens of one sequence
  int32_t slot;
  int32_t first_page;  // the sequence's pages are first_page, first_page + 1, ...
  std::vector<int32_t> tokens;
  int32_t position;  // of the first token
};

class PagedRunner {
 public:
  PagedRunner(const model::Model& m, bool invariant, bool gpu, const Options& options = {})
      : m_(m) {
    ForwardConfig c;
    c.gpu = gpu;
    c.options = options;
    c.n_threads = 2;
    c.options.batch_invariant = invariant;
    c.kv_rows = kSlots * kMaxPages * kPageSize;
    c.k_type = c.v_type = quant::TensorType::F16;
    c.cache_size = 8;
    params_.k_type = params_.v_type = quant::TensorType::F16;
    params_.page_size = kPageSize;
    params_.n_slots = kSlots;
    params_.max_pages = kMaxPages;
    params_.batch_invariant = invariant;
    auto r = ForwardRunner::create(m, c, params_);
    EXPECT_TRUE(r.is_ok()) << r.message();
    if (r) runner_ = std::move(*r);
    table_.assign(kSlots * kMaxPages, 0);
  }
  bool gpu() const { return runner_ != nullptr && runner_->gpu(); }

  // Runs the parts as one batch; returns the logits of each part's last token.
  std::vector<std::vector<float>> run(const std::vector<Part>& parts) {
    std::vector<int32_t> tokens, positions, cells, slots, outputs;
    for (const Part& p : parts) {
      for (int32_t i = 0; i < kMaxPages; ++i) table_[p.slot * kMaxPages + i] = p.first_page + i;
      for (size_t i = 0; i < p.tokens.size(); ++i) {
        const int32_t pos = p.position + static_cast<int32_t>(i);
        tokens.push_back(p.tokens[i]);
        positions.push_back(pos);
        cells.push_back(table_[p.slot * kMaxPages + pos / kPageSize] * kPageSize + pos % kPageSize);
        slots.push_back(p.slot);
      }
      outputs.push_back(static_cast<int32_t>(tokens.size()) - 1);
    }
    graph::ForwardInputs in{tokens, positions, cells, slots, table_, outputs};
    model::GraphParams p = params_;
    p.n_tokens = static_cast<int64_t>(tokens.size());
    p.n_outputs = static_cast<int64_t>(outputs.size());
    auto logits = runner_->run(p, in);
    EXPECT_TRUE(logits.is_ok()) << logits.message();
    std::vector<std::vector<float>> rows;
    const auto n_vocab = static_cast<size_t>(m_.hparams().n_vocab);
    for (size_t r = 0; logits && r < outputs.size(); ++r) {
      rows.emplace_back(logits->begin() + r * n_vocab, logits->begin() + (r + 1) * n_vocab);
    }
    return rows;
  }

 private:
  const model::Model& m_;
  model::GraphParams params_;
  std::unique_ptr<ForwardRunner> runner_;
  std::vector<int32_t> table_;
};

// Whether a's logits rows equal b's bit for bit, counting the rows that differ.
inline int differing_rows(const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    n += a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4) != 0;
  }
  return n + static_cast<int>(a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

// A's prefill (6 tokens) and next decode step, alone and beside B (a
// 150-token prompt chunk, then B's decode token); A's pages differ too. The
// prompts come from `seed`. Returns the rows of A that differ (-1: no run).
inline int differences(const model::Model& m, bool invariant, bool gpu, int32_t seed = 1,
                       const Options& options = {}) {
  const auto a_prompt = prompt_tokens(6, seed), b_prompt = prompt_tokens(150, seed + 1);
  PagedRunner alone(m, invariant, gpu, options);
  const auto a1 = alone.run({{0, 0, a_prompt, 0}});
  const auto a2 = alone.run({{0, 0, {17}, 6}});
  PagedRunner both(m, invariant, gpu, options);
  const auto b1 = both.run({{1, 40, b_prompt, 0}, {0, 5, a_prompt, 0}});
  const auto b2 = both.run({{1, 40, {23}, 150}, {0, 5, {17}, 6}});
  if (b1.size() != 2 || b2.size() != 2) return -1;
  return differing_rows(a1, {b1[1]}) + differing_rows(a2, {b2[1]});
}

}  // namespace minfer::runtime::testing
