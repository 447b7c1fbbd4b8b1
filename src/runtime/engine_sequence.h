// Engine::Sequence: one request's state inside the engine, shared by the
// engine's source files (engine.cpp, engine_speculative.cpp); nothing
// outside the engine includes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/engine.h"

namespace minfer::runtime {

struct Engine::Sequence {
  SequenceId id = -1;
  Request request;
  std::vector<int32_t> tokens;  // the prompt, then every sampled token
  SequencePages pages;
  Sampler sampler;
  int64_t slot = -1;
  int64_t computed = 0;  // positions whose keys and values are in the pool
  int64_t reused = 0;    // prompt tokens taken from cached pages
  int64_t generated = 0;
  FinishReason finished = FinishReason::kNone;
  // Speculative decoding: this step's draft (tokens after tokens.back()),
  // and the counts SequenceEvent reports.
  std::vector<int32_t> draft = {};
  int64_t drafted = 0, draft_accepted = 0, decode_steps = 0;

  int64_t prompt_size() const { return static_cast<int64_t>(request.prompt.size()); }
  bool prefilling() const { return computed < prompt_size(); }
  bool scores_prompt() const { return static_cast<bool>(request.on_prompt_logits); }
  bool embeds() const { return static_cast<bool>(request.on_prompt_hidden); }
  // How many prompt tokens cached pages may stand for: not the last (a
  // step computes at least one), none from the first position whose logits
  // the request wants (an embedding wants them all), at most max_reused.
  int64_t reuse_limit() const {
    if (embeds()) return 0;
    int64_t n = prompt_size() - 1;
    if (scores_prompt()) n = std::min(n, request.prompt_logits_from);
    if (request.max_reused >= 0) n = std::min(n, request.max_reused);
    return n;
  }
  SequenceEvent event(FinishReason reason) const {
    SequenceEvent e;
    e.id = id;
    e.finished = reason;
    e.prompt_tokens = prompt_size();
    e.reused_tokens = reused;
    e.generated = generated;
    e.drafted = drafted;
    e.draft_accepted = draft_accepted;
    e.decode_steps = decode_steps;
    return e;
  }
};

}  // namespace minfer::runtime
