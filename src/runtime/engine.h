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
//   - An embedding request (Request::on_prompt_hidden) gets the final hidden
//     state of every prompt position instead, and generates nothing. Its
//     prompt chunks run in steps of their own (a graph outputs either logits
//     or hidden states): while both kinds have work, steps alternate.
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
//   - Speculative decoding (Request::speculative, runtime/speculative.h): a
//     decoding sequence may carry a draft (from EngineOptions::drafter, or
//     prompt lookup when none is given); it then computes its last token and
//     the k drafted ones as one chunk, draws a token from each of the k + 1
//     rows in order with its own sampler and keeps drafts while each draw
//     equals the drafted token. The rejected positions' cells are given back
//     (the sequence's pages truncated). With batch invariance on, every
//     token emitted is the one decoding one token per step emits, bit for
//     bit, greedy or sampled with the same seed; a step then reports several
//     token events for one sequence, in order. Drafts never exceed the step's
//     max_batch room, the token budget or the context.
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
#include "runtime/speculative.h"
#include "runtime/token_constraint.h"

namespace minfer {
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
  // Drafts for requests that speculate (Request::speculative); null: prompt
  // lookup (runtime/ngram_draft.h, its default sizes). Shared so that the
  // options stay copyable; the engine is its only caller.
  std::shared_ptr<Drafter> drafter;
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
  // Embedding: with a sink, every prompt position's final hidden state after
  // the output norm (before the output matrix) is handed to it during
  // step(), in position order, a step's rows at once: (first position, rows
  // [n][n_embd]). Every position is computed (no cached page stands for
  // one). The request generates nothing: max_tokens must be 0, and it ends
  // (kLength) when its prompt is computed; it may fill the whole context.
  // Exclusive with on_prompt_logits. An error from the sink ends it (kError).
  using PromptHiddenSink = std::function<Status(int64_t, std::span<const float>)>;
  PromptHiddenSink on_prompt_hidden;
  // Cached pages stand for at most this many prompt tokens (-1: as many as
  // match). A benchmark keeps its measured prompt from being reused.
  int64_t max_reused = -1;
  // End-of-generation tokens are emitted like any other and do not end the
  // sequence (a benchmark's fixed token count).
  bool ignore_eog = false;
  // Speculative decoding for this sequence (n_max > 0; see the contract).
  SpeculativeParams speculative;
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
  // Speculative decoding, so far for this sequence: tokens drafted, drafts
  // the target agreed with (kept), and the steps that decoded it.
  int64_t drafted = 0, draft_accepted = 0, decode_steps = 0;
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
  // Speculative decoding: draft tokens verified, and those kept (<= drafted).
  int64_t drafted_tokens = 0, accepted_tokens = 0;
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
  // Whether this step computes embedding prompts (see the contract).
  bool embedding_step();
  void admit();
  bool awaits_shared_prefill(const Sequence& s) const;
  Status build_batch(Batch& batch, bool embedding);
  // graph_buckets: padding tokens and output rows up to the step's bucket.
  void pad_to_bucket(Batch& batch);
  // The sequences past their prompt that this step decodes.
  std::vector<Sequence*> decoders(int64_t prompt_tokens);
  // The prompt rows of this step to their sinks: logits, or with
  // `hidden` the hidden states of embedding requests.
  void deliver_prompt_rows(const Batch& batch, std::span<const float> rows, bool hidden,
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
  // Records a drawn token (or its failed draw) for s: its event, sampler and
  // end. Returns whether s goes on.
  bool emit(Sequence& s, SequenceEvent e, Result<int32_t> next_or,
            std::vector<SequenceEvent>& events);
  // Speculative decoding (engine_speculative.cpp). The draft s carries into
  // this step, at most `room` tokens; none without Request::speculative.
  Status prepare_draft(Sequence& s, int64_t room);
  // The k + 1 output rows of s from first_row: draws in order while the
  // drafts hold, then gives back the rejected positions' cells.
  void verify(Sequence& s, size_t first_row, std::span<const float> logits,
              std::span<const int32_t> ids, std::vector<SequenceEvent>& events);
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
  SequenceId last_decoded_ = -1;               // decode_per_step > 0: the turn goes on after it
  bool decoders_waited_ = false;               // the last step left every ready decoder waiting
  bool last_step_embedded_ = false;            // the last step computed embedding prompts
  std::vector<SequenceEvent> pending_;         // ends decided outside step() (cancel)
  std::unique_ptr<ThreadPool> sampling_pool_;  // draws rows in parallel
  std::vector<std::vector<float>> scratch_;    // per pool thread: a masked row
  std::shared_ptr<Drafter> drafter_;           // options_.drafter, or prompt lookup
  EngineStats totals_;
};

}  // namespace minfer::runtime
