#include "runtime/engine.h"
#include "runtime/engine_sequence.h"

#include "base/thread_pool.h"
#include "runtime/ngram_draft.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

namespace minfer::runtime {

// One step's tokens, and which of them need logits (and for whom).
struct Engine::Batch {
  // Consecutive output rows of one sequence's prompt positions, for its
  // prompt-logits sink.
  struct PromptRows {
    Sequence* seq;
    size_t first_row;
    int64_t first_position, n;
  };
  std::vector<int32_t> tokens, positions, cells, slots, output_rows;
  std::vector<Sequence*> owner;   // per token
  std::vector<Sequence*> output;  // per output row
  std::vector<bool> sampled;      // per output row: a token is drawn from it
  std::vector<PromptRows> prompt_rows;
  int64_t prompt_tokens = 0;  // tokens of prompt chunks
};

const char* finish_reason_name(FinishReason r) {
  static constexpr const char* kNames[] = {"none",    "stop",      "length",
                                           "context", "cancelled", "error"};
  const auto i = static_cast<size_t>(r);
  return i < std::size(kNames) ? kNames[i] : "?";
}

int64_t graph_bucket(int64_t n) {
  if (n <= 4) return n;
  for (int64_t p = 4;; p *= 2) {
    if (p * 3 / 2 >= n) return p * 3 / 2;
    if (2 * p >= n) return 2 * p;
  }
}

namespace {

// Pages the padding slot needs: the most padding any step of at most
// max_batch tokens takes, within a page-table row.
int64_t padding_pages(const EngineOptions& o, int64_t max_pages) {
  if (o.graph_buckets == 0) return 0;
  int64_t most = 0;
  for (int64_t n = 1; n <= o.max_batch; ++n) most = std::max(most, graph_bucket(n) - n);
  return std::min(max_pages, (most + o.page_size - 1) / o.page_size);
}

}  // namespace

Engine::Engine(const model::Model& model, const EngineOptions& options)
    : model_(model), options_(options) {}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const model::Model& model, const EngineOptions& o) {
  if (o.n_slots < 1 || o.n_slots > 1024 || o.n_ctx < 1 || o.page_size < 1 || o.max_batch < 1 ||
      o.n_pages < 0) {
    return Status::invalid_argument("engine: slots " + std::to_string(o.n_slots) +
                                    " (1 to 1024), context " + std::to_string(o.n_ctx) +
                                    ", page size " + std::to_string(o.page_size) + ", batch " +
                                    std::to_string(o.max_batch) + " and pages " +
                                    std::to_string(o.n_pages) + " must be positive");
  }
  if (o.decode_per_step < -1) {
    return Status::invalid_argument("engine: decode per step " + std::to_string(o.decode_per_step) +
                                    " must be -1 or more");
  }
  if (o.graph_buckets < -1 || o.graph_buckets > 1) {
    return Status::invalid_argument("engine: graph buckets " + std::to_string(o.graph_buckets) +
                                    " must be -1 (auto), 0 or 1");
  }
  std::unique_ptr<Engine> e(new Engine(model, o));
  e->max_pages_ = (o.n_ctx + o.page_size - 1) / o.page_size;
  const int64_t n_pages = o.n_pages > 0 ? o.n_pages : o.n_slots * e->max_pages_;
  MINFER_ASSIGN_OR_RETURN(PagePool pool, PagePool::create(n_pages, o.page_size));
  e->pool_.emplace(std::move(pool));
  e->pad_pages_ = padding_pages(o, e->max_pages_);
  ForwardConfig config(o);  // the run options, without the engine's own
  config.kv_rows = (n_pages + e->pad_pages_) * o.page_size;
  config.cache_size = 8;  // batch shapes recur: decode-only steps of each size, prefill chunks
  MINFER_ASSIGN_OR_RETURN(e->runner_, ForwardRunner::create(model, config, e->graph_params(1, 1)));
  if (o.decode_per_step < 0) {
    e->options_.decode_per_step = e->runner_->gpu() ? 0 : EngineOptions::kCpuDecodePerStep;
  }
  // A step never holds more than max_batch tokens (build_batch).
  e->options_.decode_per_step = std::min(e->options_.decode_per_step, o.max_batch);
  if (o.graph_buckets < 0) e->options_.graph_buckets = e->runner_->gpu() ? 1 : 0;
  if (e->pad_pages_ == 0) e->options_.graph_buckets = 0;  // steps of at most 4 tokens
  // Bucketed shapes recur: keep each one's graph (and its buffers) around.
  if (e->options_.graph_buckets == 1) e->runner_->set_cache_size(16);
  e->options_.k_type = e->runner_->kv().k_type();
  e->options_.v_type = e->runner_->kv().v_type();
  e->drafter_ = o.drafter ? o.drafter : std::make_shared<NgramDrafter>();
  e->sampling_pool_ = std::make_unique<ThreadPool>(o.n_threads > 0 ? o.n_threads : 0);
  e->slot_used_.assign(static_cast<size_t>(o.n_slots), false);
  e->page_table_.assign(static_cast<size_t>(e->page_table_rows() * e->max_pages_), 0);
  for (int64_t i = 0; i < e->pad_pages_; ++i) {
    e->page_table_[static_cast<size_t>(o.n_slots * e->max_pages_ + i)] =
        static_cast<int32_t>(n_pages + i);
  }
  return e;
}

model::GraphParams Engine::graph_params(int64_t n_tokens, int64_t n_outputs) const {
  model::GraphParams p;
  p.n_tokens = n_tokens;
  p.n_outputs = n_outputs;
  p.k_type = options_.k_type;
  p.v_type = options_.v_type;
  p.page_size = options_.page_size;
  p.n_slots = page_table_rows();
  p.max_pages = max_pages_;
  p.batch_invariant = options_.options.batch_invariant;
  p.one_sequence = options_.n_slots == 1;
  // (Known once the runner exists: the graph built to create it goes without.)
  p.paged_batch_kv = p.one_sequence && !p.batch_invariant && runner_ != nullptr && !runner_->gpu();
  return p;
}

// While embedding prompts and other work both wait, every other step is
// theirs: neither kind can hold the other up for more than one step.
bool Engine::embedding_step() {
  bool embeds = false, others = false;
  for (const auto& s : running_) (s->embeds() ? embeds : others) = true;
  last_step_embedded_ = embeds && (!others || !last_step_embedded_);
  return last_step_embedded_;
}

int64_t Engine::pages_for(const Sequence& s) const {
  const int64_t positions = std::min(options_.n_ctx, s.prompt_size() + s.request.max_tokens);
  return (positions + options_.page_size - 1) / options_.page_size;
}

Result<SequenceId> Engine::add(Request request) {
  const auto n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) return Status::invalid_argument("the prompt has no tokens");
  const bool embeds = static_cast<bool>(request.on_prompt_hidden);
  if (embeds && (request.max_tokens != 0 || request.on_prompt_logits)) {
    return Status::invalid_argument(
        "an embedding request generates nothing: max_tokens must be 0, with no prompt-logits "
        "sink");
  }
  const bool score_only = (request.on_prompt_logits || embeds) && request.max_tokens == 0;
  if (request.max_tokens < 1 && !score_only) {
    return Status::invalid_argument("max_tokens " + std::to_string(request.max_tokens) +
                                    " must be positive (0 only with a prompt-logits sink)");
  }
  if (request.prompt_logits_from < 0) {
    return Status::invalid_argument("prompt_logits_from " +
                                    std::to_string(request.prompt_logits_from) +
                                    " must not be negative");
  }
  if (score_only ? n > options_.n_ctx : n >= options_.n_ctx) {
    return Status::out_of_range("the prompt has " + std::to_string(n) +
                                " tokens, the context of a sequence " +
                                std::to_string(options_.n_ctx) + " (no room to generate)");
  }
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= n_vocab) {
      return Status::invalid_argument("token id " + std::to_string(t) +
                                      " is outside the vocabulary [0, " + std::to_string(n_vocab) +
                                      ")");
    }
  }
  if (request.top_logprobs < -1 || request.top_logprobs > Request::kMaxTopLogprobs) {
    return Status::invalid_argument("top_logprobs " + std::to_string(request.top_logprobs) +
                                    " must be -1 (off) or 0 to " +
                                    std::to_string(Request::kMaxTopLogprobs));
  }
  MINFER_RETURN_IF_ERROR(check(request.speculative));
  MINFER_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(request.sampling));
  auto s = std::make_unique<Sequence>(
      Sequence{next_id_++, std::move(request), {}, {}, std::move(sampler)});
  if (pages_for(*s) > pool_->n_pages()) {
    return Status::resource_exhausted("the request needs " + std::to_string(pages_for(*s)) +
                                      " KV pages, the pool has " +
                                      std::to_string(pool_->n_pages()));
  }
  s->tokens = s->request.prompt;
  for (int32_t t : s->tokens) s->sampler.accept(t);
  waiting_.push_back(std::move(s));
  return waiting_.back()->id;
}

// Whether a running sequence's prefill will publish more whole pages of s's
// prompt than s found cached (s then waits for them: awaits_shared_prefill).
bool Engine::awaits_shared_prefill(const Sequence& s) const {
  const int64_t ps = options_.page_size;
  const std::vector<int32_t>& p = s.request.prompt;
  const int64_t limit = s.reuse_limit();
  if (limit <= 0) return false;
  for (const auto& r : running_) {
    if (!r->prefilling()) continue;  // its prompt's pages are published already
    const std::vector<int32_t>& q = r->request.prompt;
    const auto n = static_cast<size_t>(std::min(limit, static_cast<int64_t>(q.size())));
    const auto common =
        static_cast<int64_t>(std::mismatch(p.begin(), p.begin() + n, q.begin()).first - p.begin());
    if (common / ps * ps > s.reused) return true;
  }
  return false;
}

// Admits waiting sequences in arrival order while a slot is free and the
// pool can hold each one's whole budget beside what is promised already.
void Engine::admit() {
  while (!waiting_.empty()) {
    Sequence& s = *waiting_.front();
    auto free_slot = std::find(slot_used_.begin(), slot_used_.end(), false);
    if (free_slot == slot_used_.end()) return;
    s.reused = s.pages.adopt_prefix(*pool_, s.request.prompt, s.reuse_limit());
    const int64_t need = pages_for(s) - s.pages.n_pages();
    if ((options_.await_shared_prefill && awaits_shared_prefill(s)) ||
        need > pool_->available() - reserved_pages_) {
      s.pages.release(*pool_);
      s.reused = 0;
      return;  // first come, first served: later requests wait behind this one
    }
    reserved_pages_ += need;
    s.computed = s.reused;
    s.slot = free_slot - slot_used_.begin();
    *free_slot = true;
    totals_.reused_tokens += s.reused;
    running_.push_back(std::move(waiting_.front()));
    waiting_.erase(waiting_.begin());
  }
}

// Decode tokens first (one per running sequence past its prompt), then
// prompt chunks in admission order while the step has room. An embedding
// step carries only embedding prompts, every position an output row; the
// others none of them.
Status Engine::build_batch(Batch& b, bool embedding) {
  const int64_t ps = options_.page_size;
  // n tokens of s (past s.tokens: its draft's); output rows for the prompt
  // positions from `scored` on (its sink's), for the last token when
  // `sample_last`, and for every drafted token and the one before it.
  auto add_tokens = [&](Sequence& s, int64_t n, int64_t scored, bool sample_last) -> Status {
    const int64_t before = s.pages.n_pages();
    MINFER_RETURN_IF_ERROR(s.pages.extend(*pool_, s.computed + n - s.pages.size()));
    reserved_pages_ -= s.pages.n_pages() - before;  // promised at admission, now held
    const int64_t first_scored = std::max(scored, s.computed);
    if (first_scored < s.computed + n) {
      b.prompt_rows.push_back({&s, b.output.size(), first_scored, s.computed + n - first_scored});
    }
    const auto known = static_cast<int64_t>(s.tokens.size());
    const auto first_verified = s.computed + n - 1 - static_cast<int64_t>(s.draft.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = s.computed + i;
      b.tokens.push_back(pos < known ? s.tokens[static_cast<size_t>(pos)]
                                     : s.draft[static_cast<size_t>(pos - known)]);
      b.positions.push_back(static_cast<int32_t>(pos));
      b.cells.push_back(s.pages.cell(pos, ps));
      b.slots.push_back(static_cast<int32_t>(s.slot));
      b.owner.push_back(&s);
      const bool drawn = sample_last && (i + 1 == n || pos >= first_verified);
      if (pos >= first_scored || drawn) {
        b.output_rows.push_back(static_cast<int32_t>(b.tokens.size() - 1));
        b.output.push_back(&s);
        b.sampled.push_back(drawn);
      }
    }
    return Status::ok();
  };
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();  // no prompt rows
  auto add_prompt_chunks = [&](int64_t limit) -> Status {
    for (auto& s : running_) {
      const auto room = limit - static_cast<int64_t>(b.tokens.size());
      if (!s->prefilling() || room <= 0 || s->embeds() != embedding) continue;
      const int64_t chunk = std::min(room, s->prompt_size() - s->computed);
      b.prompt_tokens += chunk;
      const bool completes = s->computed + chunk == s->prompt_size();
      const int64_t scored = embedding            ? 0
                             : s->scores_prompt() ? s->request.prompt_logits_from
                                                  : kNone;
      MINFER_RETURN_IF_ERROR(add_tokens(*s, chunk, scored, completes && s->request.max_tokens > 0));
    }
    return Status::ok();
  };
  // Each decoder's token and its draft, if any: drafts take what room the
  // step has left after one token for every decoder still to come.
  auto add_decoders = [&](std::span<Sequence* const> ds) -> Status {
    for (size_t i = 0; i < ds.size(); ++i) {
      const auto room = options_.max_batch - static_cast<int64_t>(b.tokens.size() + ds.size() - i);
      MINFER_RETURN_IF_ERROR(prepare_draft(*ds[i], room));
      MINFER_RETURN_IF_ERROR(
          add_tokens(*ds[i], 1 + static_cast<int64_t>(ds[i]->draft.size()), kNone, true));
    }
    return Status::ok();
  };
  if (embedding) {
    MINFER_RETURN_IF_ERROR(add_prompt_chunks(options_.max_batch));
  } else if (options_.decode_per_step <= 0) {
    std::vector<Sequence*> ds;
    for (auto& s : running_) {
      if (!s->prefilling()) ds.push_back(s.get());
    }
    MINFER_RETURN_IF_ERROR(add_decoders(ds));
    MINFER_RETURN_IF_ERROR(add_prompt_chunks(options_.max_batch));
  } else {
    // Decoders that waited a step keep their room: prompts get the rest.
    const int64_t reserved = decoders_waited_ ? options_.decode_per_step : 0;
    MINFER_RETURN_IF_ERROR(add_prompt_chunks(options_.max_batch - reserved));
    MINFER_RETURN_IF_ERROR(add_decoders(decoders(b.prompt_tokens)));
  }
  // Page tables of every slot (a free slot's row is never read).
  for (auto& s : running_) {
    const auto table = s->pages.table();
    std::copy(table.begin(), table.end(), page_table_.begin() + s->slot * max_pages_);
  }
  return Status::ok();
}

// Padding tokens (token 0 at positions 0, 1, ... of the padding slot, in
// the cells past the pool) and repeats of the last output row, up to the
// step's buckets. No sequence owns them; their rows are never sampled.
void Engine::pad_to_bucket(Batch& b) {
  const auto n = static_cast<int64_t>(b.tokens.size());
  const int64_t pad = graph_bucket(n) - n;
  if (pad > pad_pages_ * options_.page_size) return;  // the exact shape, then
  const int64_t first_cell = pool_->n_pages() * options_.page_size;
  for (int64_t i = 0; i < pad; ++i) {
    b.tokens.push_back(0);
    b.positions.push_back(static_cast<int32_t>(i));
    b.cells.push_back(static_cast<int32_t>(first_cell + i));
    b.slots.push_back(static_cast<int32_t>(options_.n_slots));
  }
  totals_.padding_tokens += pad;
  const auto rows = static_cast<int64_t>(b.output_rows.size());
  b.output_rows.resize(static_cast<size_t>(graph_bucket(rows)), b.output_rows.back());
}

// decode_per_step = N > 0: the next N sequences past their prompt after
// the last one decoded (running_ is in admission order, ids ascending),
// fewer by the step's prompt tokens unless the last step decoded none.
std::vector<Engine::Sequence*> Engine::decoders(int64_t prompt_tokens) {
  std::vector<Sequence*> ready;
  for (auto& s : running_) {
    if (!s->prefilling()) ready.push_back(s.get());
  }
  const int64_t n = options_.decode_per_step;
  const auto take = static_cast<size_t>(
      std::min<int64_t>(decoders_waited_ ? n : std::max<int64_t>(0, n - prompt_tokens),
                        static_cast<int64_t>(ready.size())));
  decoders_waited_ = take == 0 && !ready.empty();
  if (take == ready.size()) return ready;
  const auto next = std::find_if(ready.begin(), ready.end(),
                                 [&](const Sequence* s) { return s->id > last_decoded_; });
  std::rotate(ready.begin(), next, ready.end());
  ready.resize(take);
  if (!ready.empty()) last_decoded_ = ready.back()->id;
  return ready;
}

Result<std::vector<SequenceEvent>> Engine::step() {
  std::vector<SequenceEvent> events = std::move(pending_);
  pending_.clear();
  admit();
  Batch b;
  const bool embedding = embedding_step();
  MINFER_RETURN_IF_ERROR(build_batch(b, embedding));
  if (b.tokens.empty()) return events;
  // A graph has at least one output row; with none wanted, row 0's is dropped.
  const bool no_output = b.output_rows.empty();
  if (no_output) b.output_rows.push_back(0);
  if (options_.graph_buckets == 1) pad_to_bucket(b);
  graph::ForwardInputs in;
  in.tokens = b.tokens;
  in.positions = b.positions;
  in.cells = b.cells;
  in.seq_slots = b.slots;
  in.page_table = page_table_;
  in.output_rows = b.output_rows;
  const auto n_tokens = static_cast<int64_t>(b.tokens.size());
  model::GraphParams p = graph_params(n_tokens, static_cast<int64_t>(b.output_rows.size()));
  p.hidden_output = embedding;
  // Every wanted row greedy: only the tokens come back from the device.
  const bool argmax =
      b.prompt_rows.empty() && std::all_of(b.output.begin(), b.output.end(), [](const Sequence* s) {
        return s->sampler.is_argmax() && !s->request.constraint && s->request.top_logprobs < 0;
      });
  std::span<const float> logits;
  std::span<const int32_t> ids;
  const auto t0 = std::chrono::steady_clock::now();
  if (argmax) {
    MINFER_ASSIGN_OR_RETURN(ids, runner_->run_argmax(p, in));
  } else {
    MINFER_ASSIGN_OR_RETURN(logits, runner_->run(p, in));
  }
  totals_.forward_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++totals_.steps;
  totals_.argmax_steps += argmax;
  for (Sequence* s : b.owner) ++s->computed;
  for (auto& s : running_) {  // prompt pages filled so far can serve waiting prompts
    if (s->prefilling()) {
      s->pages.publish_full(*pool_, std::span(s->tokens).first(static_cast<size_t>(s->computed)));
    }
  }
  totals_.prompt_tokens += b.prompt_tokens;
  deliver_prompt_rows(b, logits, embedding, events);
  if (!no_output && !embedding) MINFER_RETURN_IF_ERROR(sample(b, logits, ids, events));
  for (auto& s : running_) {  // scored and embedded prompts without a budget to generate end here
    if (s->finished == FinishReason::kNone && !s->prefilling() && s->request.max_tokens == 0) {
      finish(*s, FinishReason::kLength, events);
    }
  }
  std::erase_if(running_, [](const auto& s) { return s->finished != FinishReason::kNone; });
  return events;
}

// Hands each scoring or embedding sequence its rows of this step; a sink's
// error ends that sequence alone.
void Engine::deliver_prompt_rows(const Batch& b, std::span<const float> rows, bool hidden,
                                 std::vector<SequenceEvent>& events) {
  const auto width =
      static_cast<size_t>(hidden ? model_.hparams().n_embd : model_.hparams().n_vocab);
  for (const Batch::PromptRows& r : b.prompt_rows) {
    Sequence& s = *r.seq;
    if (s.finished != FinishReason::kNone) continue;
    const auto& sink = hidden ? s.request.on_prompt_hidden : s.request.on_prompt_logits;
    const Status st =
        sink(r.first_position, rows.subspan(r.first_row * width, static_cast<size_t>(r.n) * width));
    if (!st) {
      finish(s, FinishReason::kError, events);
      events.back().error = "sequence " + std::to_string(s.id) + ": " + st.message();
    }
  }
}

// Draws each output row's token: ids[r] when the step computed the greedy
// tokens on the device, else from the logits.
Status Engine::sample(const Batch& b, std::span<const float> logits, std::span<const int32_t> ids,
                      std::vector<SequenceEvent>& events) {
  const auto n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  const size_t rows = b.output.size();
  // The draws first, in parallel over rows (each sequence has its own
  // sampler and constraint, each costly on a large vocabulary); the
  // bookkeeping after, in row order.
  std::vector<SequenceEvent> drawn_events;
  std::vector<Result<int32_t>> drawn;
  if (ids.empty()) {  // (argmax steps bring their tokens: nothing to draw)
    drawn_events.resize(rows);
    drawn.assign(rows, Result<int32_t>(-1));
    scratch_.resize(static_cast<size_t>(sampling_pool_->num_threads()));
    sampling_pool_->parallel_for(static_cast<int64_t>(rows), [&](int64_t lo, int64_t hi, int t) {
      for (auto r = static_cast<size_t>(lo); r < static_cast<size_t>(hi); ++r) {
        Sequence& s = *b.output[r];
        // (A draft's rows are drawn in order by verify(): each draw depends on the last.)
        if (!b.sampled[r] || s.finished != FinishReason::kNone || !s.draft.empty()) continue;
        drawn_events[r] = s.event(FinishReason::kNone);
        drawn[r] = draw(s, logits.subspan(r * n_vocab, n_vocab), drawn_events[r],
                        scratch_[static_cast<size_t>(t)]);
      }
    });
  }
  for (size_t r = 0; r < rows; ++r) {
    Sequence& s = *b.output[r];
    if (!b.sampled[r] || s.finished != FinishReason::kNone) continue;
    if (!s.draft.empty()) {  // rows r .. r + k are the draft's
      const size_t k = s.draft.size();
      verify(s, r, logits, ids, events);
      r += k;
      continue;
    }
    ++s.decode_steps;
    s.pages.publish_full(*pool_, s.tokens);  // whole pages now computed can serve later prompts
    (void)emit(s, ids.empty() ? std::move(drawn_events[r]) : s.event(FinishReason::kNone),
               ids.empty() ? std::move(drawn[r]) : Result<int32_t>(ids[r]), events);
  }
  return Status::ok();
}

bool Engine::emit(Sequence& s, SequenceEvent e, Result<int32_t> next_or,
                  std::vector<SequenceEvent>& events) {
  const auto n_vocab = static_cast<int32_t>(model_.hparams().n_vocab);
  e.has_token = true;
  if (next_or && (*next_or < 0 || *next_or >= n_vocab)) {
    next_or = Status::internal("every logit is -inf or NaN");
  }
  if (!next_or) {  // this sequence's draw failed; the others go on
    finish(s, FinishReason::kError, events);
    events.back().error = "sequence " + std::to_string(s.id) + ": " + next_or.message();
    return false;
  }
  const int32_t next = *next_or;
  s.sampler.accept(next);
  if (model_.tokenizer().is_eog(next) && !s.request.ignore_eog) {
    finish(s, FinishReason::kStop, events);
    return false;
  }
  s.tokens.push_back(next);
  ++s.generated;
  ++totals_.generated_tokens;
  e.token = next;
  e.generated = s.generated;
  e.drafted = s.drafted;
  e.draft_accepted = s.draft_accepted;
  e.decode_steps = s.decode_steps;
  if (s.generated >= s.request.max_tokens) {
    e.finished = FinishReason::kLength;
  } else if (s.computed + 1 > options_.n_ctx) {
    e.finished = FinishReason::kContext;  // no cell left for the token just sampled
  }
  events.push_back(e);
  if (e.finished != FinishReason::kNone) finish(s, e.finished, events);
  return e.finished == FinishReason::kNone;
}

Result<int32_t> Engine::draw(Sequence& s, std::span<const float> row, SequenceEvent& e,
                             std::vector<float>& scratch) const {
  if (s.request.top_logprobs >= 0) {
    MINFER_ASSIGN_OR_RETURN(const LogSoftmax l, LogSoftmax::of(row));
    e.top_logprobs = l.top(s.request.top_logprobs);
    MINFER_ASSIGN_OR_RETURN(const int32_t t, draw_token(s, row, scratch));
    e.logprob = l.logprob(t);
    return t;
  }
  return draw_token(s, row, scratch);
}

Result<int32_t> Engine::draw_token(Sequence& s, std::span<const float> row,
                                   std::vector<float>& scratch) const {
  TokenConstraint* c = s.request.constraint.get();
  if (c == nullptr) return s.sampler.sample(row);
  scratch.assign(row.begin(), row.end());
  MINFER_RETURN_IF_ERROR(c->mask(scratch));
  MINFER_ASSIGN_OR_RETURN(const int32_t t, s.sampler.sample(scratch));
  if (!model_.tokenizer().is_eog(t)) MINFER_RETURN_IF_ERROR(c->accept(t));
  return t;
}

// Gives the sequence's cells back (its full pages stay cached) and, unless
// the caller already reported the end with the last token, reports it.
void Engine::finish(Sequence& s, FinishReason reason, std::vector<SequenceEvent>& events) {
  const bool reported =
      !events.empty() && events.back().id == s.id && events.back().finished == reason;
  if (!reported) {
    events.push_back(s.event(reason));
  }
  if (s.request.speculative.n_max > 0) drafter_->release(s.id);
  if (s.slot >= 0) {
    s.pages.publish_full(*pool_, std::span(s.tokens).first(static_cast<size_t>(s.computed)));
    reserved_pages_ -= pages_for(s) - s.pages.n_pages();
    s.pages.release(*pool_);
    slot_used_[static_cast<size_t>(s.slot)] = false;
    s.slot = -1;
  }
  s.finished = reason;
}

void Engine::cancel(SequenceId id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id != id) continue;
    finish(**it, FinishReason::kCancelled, pending_);
    waiting_.erase(it);
    return;
  }
  for (auto& s : running_) {
    if (s->id == id && s->finished == FinishReason::kNone) {
      finish(*s, FinishReason::kCancelled, pending_);
    }
  }
  std::erase_if(running_, [](const auto& s) { return s->finished != FinishReason::kNone; });
}

const graph::OpProfile& Engine::op_profile() const {
  return runner_->op_profile();
}

EngineStats Engine::stats() const {
  EngineStats st = totals_;
  st.waiting = static_cast<int64_t>(waiting_.size());
  st.running = static_cast<int64_t>(running_.size());
  st.pool = pool_->stats();
  return st;
}

}  // namespace minfer::runtime
