// The decode loop: prefill a prompt as one graph, then generate token by
// token (each step reuses the cached decode graph), sampling with a Sampler.
//
// Contract: stops after n_predict tokens, at an end-of-generation token (not
// emitted), when on_token returns false, or at the context limit (an error
// naming the limit). Timings cover prefill and generation separately.
// Threading: uses the Session and Sampler exclusively.
#pragma once

#include <functional>
#include <span>

#include "base/status.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace minfer::runtime {

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  double prompt_seconds = 0;
  double generation_seconds = 0;  // from the first sampled token to the last eval
  bool stopped_at_eog = false;
};

// Called with each generated token id; return false to stop.
using TokenSink = std::function<bool(int32_t)>;

Result<GenerationStats> generate(Session& session, Sampler& sampler,
                                 std::span<const int32_t> prompt, int64_t n_predict,
                                 const TokenSink& on_token);

}  // namespace minfer::runtime
