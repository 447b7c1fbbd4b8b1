// Engine: many sequences over one model, run together in batches
// (continuous batching), their keys and values in one paged KV pool with
// prefix reuse. What a server stands on (docs/ENGINE.md).
//
// Contract:
//   - add() queues a request (prompt tokens, sampling, a token budget) and
//     returns its id at once; it never runs the model. Bad requests (empty
//     prompt, token ids outside the vocabulary, a prompt that leaves no room
//     in the per-sequence context) are invalid-argument / out-of-range errors.
//   - step() runs one batch: one decode token for every running sequence,
//     then prefill chunks of admitted ones in arrival order, up to
//     max_batch tokens in all (chunked prefill: a long prompt never holds the
//     decoders up for more than one chunk). With decode_per_step = N > 0 a
//     step decodes at most N sequences, the running ones taking turns
//     (round robin), and prompt chunks go first: a step that carries P
//     prompt tokens decodes only N - P sequences (none when P >= N), except
//     right after a step that decoded none, which decodes N whatever the
//     prompts (they get max_batch - N tokens then). N is capped at max_batch. On a compute-bound
//     CPU that bounds a step's time, so a new request's first token waits for a short step, not for
//     every decoder. It returns what happened to each sequence that produced a token or ended. A
//     sequence is admitted when a slot is free and the pool can hold its whole budget (prompt + max
//     new tokens, at most the per-sequence context): admitted sequences never run out of cells, and
//     work that does not fit waits, never corrupting one that runs. A request no empty pool could
//     hold is refused at add().
//   - Every sequence's attention reads only its own cells. Prompts that
//     begin with whole pages another sequence computed (live, or finished and
//     still cached) reuse those cells instead of recomputing them.
//   - A sequence ends at an end-of-generation token (not emitted; reason
//     kStop), after max_tokens (kLength), at its context limit (kContext),
//     by cancel() (kCancelled), or when its own draw fails (kError, e.g. a
//     constraint that allows nothing); its cells go back to the pool, its
//     full pages stay cached for later prompts.
//   - A request with a prompt-logits sink gets the logits of its prompt's
//     positions as they are computed (Request::on_prompt_logits).
//   - A request's constraint masks the logits before each of its draws and
//     is told the token drawn; requests with a constraint or log-probs take
//     the logits back from the device (the others may take only argmaxes).
//   - With graph_buckets, each step's tokens are padded up to
//     graph_bucket(n) (and its output rows likewise): the padding tokens sit
//     in a slot of their own, in cells past the pool, and change nothing a
//     sequence gets.
//   - Greedy outputs do not depend on what else is batched: every token's
//     attention takes one kernel path whatever the batch, and the tests pin
//     a sequence's tokens alone and in company (docs/ENGINE.md says how far
//     this holds for the matmul kernels).
// Threading: one thread drives an Engine (add/step/cancel); a server puts
// its own queue in front.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/forward.h"
#include "runtime/kv_pages.h"
#include "runtime/logprobs.h"
#include "runtime/run_options.h"
#include "runtime/sampler.h"
#include "runtime/token_constraint.h"

namespace minfer::cpu {
class ThreadPool;
}

namespace minfer::runtime {

using SequenceId = int64_t;

// The shared run options (runtime/run_options.h: context per sequence,
// threads, max_batch tokens per step, cache types, gpu, the MINFER_*
// switches; their defaults are every path's) and what only an engine has.
struct EngineOptions : RunOptions {
  EngineOptions() = default;
  explicit EngineOptions(const RunOptions& run) : RunOptions(run) {}

  int64_t n_slots = 4;     // sequences running at once
  int64_t page_size = 16;  // cells per KV page
  int64_t n_pages = 0;     // pool size; 0: n_slots * n_ctx / page_size (no sharing needed)
  // Sequences decoded per step (see step()); 0: every running one. -1: 0
  // on a GPU, kCpuDecodePerStep on the CPU.
  int64_t decode_per_step = 0;
  static constexpr int64_t kCpuDecodePerStep = 8;
  // Step shapes rounded up to a few sizes (graph_bucket()), tokens and
  // output rows both, with padding tokens in a slot of their own whose
  // results are dropped: a few cached graphs (on a GPU, their captured
  // launches) serve every mix of decodes and prompt chunks. 1: on; 0: off;
  // -1: on when a GPU takes part. A step whose padding would pass the
  // padding slot's max_batch cells keeps its exact shape.
  int graph_buckets = -1;
  // A waiting prompt that shares whole pages with a prompt still being
  // computed waits for those pages instead of computing them again (every
  // sequence's prefill publishes its full pages as it goes). Off: each
  // computes what is not cached when it is admitted.
  bool await_shared_prefill = true;
};

struct Request {
  Request() = default;
  Request(std::vector<int32_t> prompt_, SamplerParams sampling_, int64_t max_tokens_)
      : prompt(std::move(prompt_)), sampling(sampling_), max_tokens(max_tokens_) {}

  std::vector<int32_t> prompt;
  SamplerParams sampling;
  int64_t max_tokens = 128;  // new tokens at most
  // Masks each draw (constrained decoding); the engine drives it. Optional.
  std::shared_ptr<TokenConstraint> constraint;
  // -1: no log-probabilities; 0..kMaxTopLogprobs: each event carries the
  // drawn token's log-probability and that many most likely alternatives.
  int top_logprobs = -1;
  static constexpr int kMaxTopLogprobs = 20;
  // Scoring a prompt (perplexity): with a sink, the logits of every prompt
  // position from prompt_logits_from on are handed to it during step(), in
  // position order, a step's rows at once: (first position, rows
  // [n][n_vocab]); row p predicts token p + 1. Those positions are computed
  // (no cached page covers them); an error from the sink ends the sequence
  // (kError). max_tokens 0 then scores the prompt only: the sequence ends
  // (kLength) when its prompt is computed, and may fill the whole context.
  using PromptLogitsSink = std::function<Status(int64_t, std::span<const float>)>;
  PromptLogitsSink on_prompt_logits;
  int64_t prompt_logits_from = 0;
  // Cached pages stand for at most this many prompt tokens (-1: as many as
  // match). A benchmark keeps its measured prompt from being reused.
  int64_t max_reused = -1;
  // End-of-generation tokens are emitted like any other and do not end the
  // sequence (a benchmark's fixed token count).
  bool ignore_eog = false;
};

// kError: this sequence's draw failed (its constraint allowed no token, or
// every logit was -inf); SequenceEvent::error says why. The others go on.
enum class FinishReason : uint8_t { kNone, kStop, kLength, kContext, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

// What one step did to one sequence: a new token, an end, or both.
struct SequenceEvent {
  SequenceId id = -1;
  bool has_token = false;
  int32_t token = -1;
  FinishReason finished = FinishReason::kNone;
  int64_t prompt_tokens = 0;  // the prompt's length
  int64_t reused_tokens = 0;  // prompt tokens taken from cached pages
  int64_t generated = 0;      // tokens emitted so far
  // With Request::top_logprobs >= 0 and a token: its log-probability and
  // the most likely tokens (runtime/logprobs.h).
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
  std::string error;  // with kError
};

struct EngineStats {
  int64_t waiting = 0, running = 0;
  int64_t steps = 0;
  int64_t prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  // Steps whose every wanted row was greedy took only the tokens back from
  // the device (GraphParams::argmax); the others took the logits.
  int64_t argmax_steps = 0;
  double forward_seconds = 0;  // in the forward passes (the rest of step() is host work)
  int64_t padding_tokens = 0;  // added to steps to reach their bucket (graph_buckets)
  PagePoolStats pool;
};

// The step size n tokens (or output rows) is rounded up to with
// graph_buckets: n itself up to 4, then the next of 6, 8, 12, 16, 24, 32,
// 48, ... (a power of two or 1.5 times one: at most half again as many).
int64_t graph_bucket(int64_t n);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const model::Model& model,
                                                const EngineOptions& options);
  ~Engine();

  Result<SequenceId> add(Request request);
  Result<std::vector<SequenceEvent>> step();
  // Ends a waiting or running sequence; its event comes with the next step.
  void cancel(SequenceId id);
  // Per-op times of every step so far (Options::op_profile; empty otherwise).
  const graph::OpProfile& op_profile() const;
  bool idle() const { return waiting_.empty() && running_.empty(); }
  EngineStats stats() const;
  const model::Model& model() const { return model_; }
  // As given to create(), decode_per_step and graph_buckets resolved.
  const EngineOptions& options() const { return options_; }
  const ForwardRunner& runner() const { return *runner_; }
  // The GPU's memory bandwidth (ForwardRunner::device_bandwidth_gbs).
  Result<std::optional<double>> device_bandwidth_gbs() { return runner_->device_bandwidth_gbs(); }

 private:
  struct Sequence;
  struct Batch;
  Engine(const model::Model& model, const EngineOptions& options);
  model::GraphParams graph_params(int64_t n_tokens, int64_t n_outputs) const;
  void admit();
  bool awaits_shared_prefill(const Sequence& s) const;
  Status build_batch(Batch& batch);
  // graph_buckets: padding tokens and output rows up to the step's bucket.
  void pad_to_bucket(Batch& batch);
  // The sequences past their prompt that this step decodes.
  std::vector<Sequence*> decoders(int64_t prompt_tokens);
  void deliver_prompt_logits(const Batch& batch, std::span<const float> logits,
                             std::vector<SequenceEvent>& events);
  Status sample(const Batch& batch, std::span<const float> logits, std::span<const int32_t> ids,
                std::vector<SequenceEvent>& events);
  // One row's token for `s` (its constraint and sampler), and its logprobs;
  // `scratch` holds a masked copy of the row. Safe to run for distinct
  // sequences at once.
  Result<int32_t> draw(Sequence& s, std::span<const float> row, SequenceEvent& e,
                       std::vector<float>& scratch) const;
  Result<int32_t> draw_token(Sequence& s, std::span<const float> row,
                             std::vector<float>& scratch) const;
  void finish(Sequence& s, FinishReason reason, std::vector<SequenceEvent>& events);
  int64_t pages_for(const Sequence& s) const;
  // Page-table rows: a slot's each, and the padding slot's when there is one.
  int64_t page_table_rows() const { return options_.n_slots + (pad_pages_ > 0 ? 1 : 0); }

  const model::Model& model_;
  EngineOptions options_;
  int64_t max_pages_ = 0;  // page-table row length (n_ctx / page_size, rounded up)
  std::unique_ptr<ForwardRunner> runner_;
  std::optional<PagePool> pool_;
  std::vector<std::unique_ptr<Sequence>> waiting_, running_;
  std::vector<bool> slot_used_;
  // [n_slots + 1 with a padding slot][max_pages]; the padding slot's row
  // names the pad_pages_ pages past the pool's.
  std::vector<int32_t> page_table_;
  int64_t pad_pages_ = 0;
  int64_t reserved_pages_ = 0;  // promised to admitted sequences, not yet allocated
  SequenceId next_id_ = 0;
  SequenceId last_decoded_ = -1;        // decode_per_step > 0: the turn goes on after it
  bool decoders_waited_ = false;        // the last step left every ready decoder waiting
  std::vector<SequenceEvent> pending_;  // ends decided outside step() (cancel)
  std::unique_ptr<cpu::ThreadPool> sampling_pool_;  // draws rows in parallel
  std::vector<std::vector<float>> scratch_;         // per pool thread: a masked row
  EngineStats totals_;
};

}  // namespace minfer::runtime
