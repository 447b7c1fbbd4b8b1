#include "serve/completion.h"

#include <algorithm>
#include <chrono>

#include "tokenizer/tokenizer.h"

namespace minfer::serve {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One choice while it runs: tokens in, text and logprobs out.
struct Choice {
  Choice(const tokenizer::Tokenizer& tok, std::vector<std::string> stops)
      : detok(tok, false), text(std::move(stops)) {}
  tokenizer::Detokenizer detok;
  StopText text;
  int64_t tokens = 0;
  int64_t drafted = 0, draft_accepted = 0;
  runtime::FinishReason reason = runtime::FinishReason::kNone;
  bool finished = false;
  Clock::time_point first_token, last_token;
};

// The prompt's tokens: the chat template's text, the prompt, or its ids.
Result<std::vector<int32_t>> prompt_of(const CompletionContext& ctx, const CompletionParams& p,
                                       ContextOverflow& overflow) {
  if (!p.prompt_tokens.empty()) return p.prompt_tokens;
  Result<std::string> text = p.prompt;
  if (p.chat && !p.chat_prompt_rendered) text = ctx.formatter->render(p.messages);
  if (!text) return text.status();
  // A text that cannot fit is refused before it is tokenized (a huge
  // prompt would cost seconds of tokenizing for the same 400).
  if (const int64_t least = ctx.formatter->min_tokens(*text); least >= ctx.n_ctx) {
    overflow = {least, ctx.n_ctx, true};
    return Status::out_of_range("the prompt has at least " + std::to_string(least) +
                                " tokens and the context is " + std::to_string(ctx.n_ctx) +
                                " (n_ctx " + std::to_string(ctx.n_ctx) + ")");
  }
  return runtime::encode_prompt(ctx.model->tokenizer(), *text);
}

// The server's speculative settings, with the request's fields over them.
runtime::SpeculativeParams speculative_of(const CompletionContext& ctx, const CompletionParams& p) {
  runtime::SpeculativeParams s = ctx.speculative;
  if (s.n_max <= 0) return s;  // no drafter: nothing to ask for
  if (p.spec_n_max >= 0) s.n_max = p.spec_n_max;
  if (p.spec_n_min >= 0) s.n_min = p.spec_n_min;
  if (p.spec_p_min >= 0) s.p_min = p.spec_p_min;
  return s;
}

Result<std::vector<runtime::Request>> requests_of(const CompletionContext& ctx,
                                                  const CompletionParams& p,
                                                  std::vector<int32_t> prompt,
                                                  ContextOverflow& overflow) {
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= ctx.n_ctx) {
    overflow = {n_prompt, ctx.n_ctx, false};
    return Status::out_of_range("the prompt has " + std::to_string(n_prompt) +
                                " tokens and the context is " + std::to_string(ctx.n_ctx) +
                                " (prompt_tokens " + std::to_string(n_prompt) + ", n_ctx " +
                                std::to_string(ctx.n_ctx) + ")");
  }
  const int64_t room = ctx.n_ctx - n_prompt;
  const int64_t dflt = ctx.n_predict > 0 ? ctx.n_predict : room;
  std::vector<runtime::Request> out;
  for (int i = 0; i < p.n; ++i) {
    runtime::SamplerParams s = p.sampling;
    s.seed += static_cast<uint64_t>(i);
    runtime::Request r(prompt, s, std::min(p.max_tokens > 0 ? p.max_tokens : dflt, room));
    r.top_logprobs = p.top_logprobs;
    r.ignore_eog = p.ignore_eos;
    r.speculative = speculative_of(ctx, p);
    if (p.format != CompletionParams::Format::kText) {
      if (!ctx.constraints) {
        return Status::unimplemented("response_format json_object / json_schema and grammar");
      }
      MINFER_ASSIGN_OR_RETURN(r.constraint, ctx.constraints(p));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

// The request's sequences, their channel, and the bookkeeping of the reply.
struct CompletionRun::State {
  State(const CompletionContext& ctx, const CompletionParams& p, std::shared_ptr<Channel> ch)
      : tok(ctx.model->tokenizer()),
        metrics(ctx.metrics),
        channel(std::move(ch)),
        top_logprobs(p.top_logprobs),
        deadline(start + std::chrono::seconds(ctx.timeout_s)),
        timeout_s(ctx.timeout_s),
        speculative(ctx.speculative.n_max > 0) {
    for (int i = 0; i < p.n; ++i) choices.emplace_back(tok, p.stop);
  }
  void take(const Channel::Item& it, std::vector<ChoiceDelta>& out);
  TokenLogprob logprob_of(const Channel::Item& it) const;

  const tokenizer::Tokenizer& tok;
  Metrics* metrics;
  std::shared_ptr<Channel> channel;
  int top_logprobs;
  Clock::time_point start = Clock::now();
  Clock::time_point deadline;
  int timeout_s;
  bool timed_out = false;
  bool recorded = false;
  int64_t prompt_tokens = 0;
  bool speculative;  // the server drafts (the timings report it)
  std::vector<Choice> choices;
};

TokenLogprob CompletionRun::State::logprob_of(const Channel::Item& it) const {
  TokenLogprob lp{tok.token_to_piece(it.token, false), it.logprob, {}, it.token, {}};
  for (const auto& t : it.top_logprobs) {
    lp.top.emplace_back(tok.token_to_piece(t.id, false), t.logprob);
    lp.top_ids.push_back(t.id);
  }
  return lp;
}

void CompletionRun::State::take(const Channel::Item& it, std::vector<ChoiceDelta>& out) {
  if (it.choice < 0 || static_cast<size_t>(it.choice) >= choices.size()) return;
  Choice& c = choices[static_cast<size_t>(it.choice)];
  ChoiceDelta& d = out[static_cast<size_t>(it.choice)];
  prompt_tokens = it.prompt_tokens;
  c.drafted = std::max(c.drafted, it.drafted);
  c.draft_accepted = std::max(c.draft_accepted, it.draft_accepted);
  if (it.has_token && !c.text.stopped()) {
    c.last_token = Clock::now();
    if (c.tokens == 0) c.first_token = c.last_token;
    ++c.tokens;
    d.text += c.text.push(c.detok.push(it.token));
    if (top_logprobs >= 0) d.logprobs.push_back(logprob_of(it));
  }
  if (it.finished != runtime::FinishReason::kNone) c.reason = it.finished;
}

Result<std::unique_ptr<CompletionRun>> CompletionRun::start(const CompletionContext& ctx,
                                                            const CompletionParams& p,
                                                            ContextOverflow* overflow) {
  ContextOverflow unused;
  ContextOverflow& too_long = overflow != nullptr ? *overflow : unused;
  MINFER_RETURN_IF_ERROR(check_token_ids(p, ctx.model->hparams().n_vocab));
  MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, prompt_of(ctx, p, too_long));
  MINFER_ASSIGN_OR_RETURN(std::vector<runtime::Request> requests,
                          requests_of(ctx, p, std::move(prompt), too_long));
  auto state = std::make_unique<State>(ctx, p, ctx.scheduler->submit(std::move(requests)));
  return std::unique_ptr<CompletionRun>(new CompletionRun(std::move(state)));
}

CompletionRun::CompletionRun(std::unique_ptr<State> s) : s_(std::move(s)) {}

CompletionRun::~CompletionRun() {
  if (!finished()) cancel();
}

std::vector<ChoiceDelta> CompletionRun::poll(int timeout_ms) {
  State& s = *s_;
  std::vector<Channel::Item> items;
  std::vector<ChoiceDelta> out(s.choices.size());
  s.channel->wait(items, timeout_ms);
  for (const Channel::Item& it : items) s.take(it, out);
  if (!s.timed_out && Clock::now() > s.deadline && !finished()) {
    s.timed_out = true;
    s.channel->cancel();
  }
  const bool ended = s.channel->done() || s.timed_out;
  for (size_t i = 0; i < s.choices.size(); ++i) {
    Choice& c = s.choices[i];
    if (c.finished) continue;
    if (c.text.stopped() && c.reason == runtime::FinishReason::kNone) {
      s.channel->cancel(static_cast<int>(i));  // its stop string ended it: free the sequence
      c.reason = runtime::FinishReason::kStop;
    }
    if (ended || c.reason != runtime::FinishReason::kNone) {
      if (!c.text.stopped()) out[i].text += c.text.push(c.detok.flush()) + c.text.finish();
      c.finished = true;
      out[i].ended = true;
    }
  }
  return out;
}

bool CompletionRun::finished() const {
  return s_->timed_out || std::all_of(s_->choices.begin(), s_->choices.end(),
                                      [](const Choice& c) { return c.finished; });
}

Status CompletionRun::status() const {
  if (Status st = s_->channel->status(); !st) return st;
  if (s_->timed_out) {
    return Status::unavailable("the request ran past the server's timeout of " +
                               std::to_string(s_->timeout_s) + " s (--timeout)");
  }
  return Status::ok();
}

void CompletionRun::cancel() {
  s_->channel->cancel();
}

size_t CompletionRun::n() const {
  return s_->choices.size();
}

const char* CompletionRun::finish_reason(size_t i) const {
  const Choice& c = s_->choices[i];
  return c.text.stopped() || c.reason == runtime::FinishReason::kStop ? "stop" : "length";
}

int64_t CompletionRun::prompt_tokens() const {
  return s_->prompt_tokens;
}

int64_t CompletionRun::completion_tokens() const {
  int64_t n = 0;
  for (const Choice& c : s_->choices) n += c.tokens;
  return n;
}

const std::string& CompletionRun::stop_word(size_t i) const {
  return s_->choices[i].text.stop_word();
}

CompletionTimings CompletionRun::timings() const {
  const State& s = *s_;
  const Choice& c = s.choices.front();
  const auto ms = [](Clock::time_point a, Clock::time_point b) { return 1e3 * seconds(a, b); };
  CompletionTimings t;
  t.prompt_n = s.prompt_tokens;
  t.predicted_n = c.tokens;
  t.prompt_ms = c.tokens > 0 ? ms(s.start, c.first_token) : ms(s.start, Clock::now());
  t.predicted_ms = c.tokens > 0 ? ms(c.first_token, c.last_token) : 0;
  t.speculative = s.speculative;
  t.draft_n = c.drafted;
  t.draft_n_accepted = c.draft_accepted;
  return t;
}

// Inter-token latency from the first choice.
void CompletionRun::record() {
  State& s = *s_;
  if (s.recorded) return;
  s.recorded = true;
  const bool ok = status().is_ok();
  s.metrics->request(ok);
  if (!ok) return;
  const Choice& c = s.choices.front();
  const double ttft = c.tokens > 0 ? seconds(s.start, c.first_token) : -1;
  const double itl =
      c.tokens > 1 ? seconds(c.first_token, c.last_token) / static_cast<double>(c.tokens - 1) : -1;
  s.metrics->completion(s.prompt_tokens, completion_tokens(), ttft, itl,
                        seconds(s.start, Clock::now()));
}

}  // namespace minfer::serve
