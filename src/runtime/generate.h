// The decode loop of one sequence: prefill a prompt, then generate token by
// token, sampling each.
//
// Contract: stops after n_predict tokens, at an end-of-generation token (not
// emitted), when on_token returns false, or at the context limit (an error
// naming the limit). Timings cover prefill (up to the first sampled token's
// logits) and generation separately.
//   - The Session form prefills the prompt as one graph and samples with the
//     caller's Sampler.
//   - The Engine form adds the request to an engine with no other work and
//     steps it until the request ends: the tokens a server's sequence with
//     the same request gets (runtime/engine.h), sampled by the engine.
// Threading: uses the Session and Sampler (or the Engine) exclusively.
#pragma once

#include <functional>
#include <span>

#include "base/status.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace minfer::runtime {

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;  // the engine form: prompt tokens taken from cached pages
  int64_t generated = 0;
  double prompt_seconds = 0;
  double generation_seconds = 0;  // from the first sampled token to the last eval
  bool stopped_at_eog = false;
  // The engine form with Request::speculative: tokens drafted and kept, and
  // the steps that decoded the sequence (generated / decode_steps tokens
  // per step).
  int64_t drafted = 0, draft_accepted = 0, decode_steps = 0;
};

// Called with each generated token id; return false to stop.
using TokenSink = std::function<bool(int32_t)>;

Result<GenerationStats> generate(Session& session, Sampler& sampler,
                                 std::span<const int32_t> prompt, int64_t n_predict,
                                 const TokenSink& on_token);

// The engine must be idle; a request it refuses is that error.
Result<GenerationStats> generate(Engine& engine, Request request, const TokenSink& on_token);

}  // namespace minfer::runtime
