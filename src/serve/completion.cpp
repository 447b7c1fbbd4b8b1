#include "serve/completion.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "serve/json_reply.h"
#include "tokenizer/tokenizer.h"

namespace minfer::serve {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string sse(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

// OpenAI reports -9999 where a probability is 0 (JSON has no -inf).
double clamp_logprob(float lp) {
  return std::max(static_cast<double>(lp), -9999.0);
}

json bytes_of(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

// One choice while it runs: tokens in, text and logprobs out.
struct Choice {
  Choice(const tokenizer::Tokenizer& tok, std::vector<std::string> stops)
      : detok(tok, false), text(std::move(stops)) {}
  tokenizer::Detokenizer detok;
  StopText text;
  int64_t tokens = 0;
  runtime::FinishReason reason = runtime::FinishReason::kNone;
  bool finished = false;
  Clock::time_point first_token, last_token;
};

// What one poll brought for one choice.
struct Delta {
  std::string text;
  json logprobs = json::array();  // chat: content entries; completions: per-token rows
};

// The request's sequences, their channel, and the bookkeeping of the reply.
class Completion {
 public:
  Completion(const CompletionContext& ctx, const CompletionParams& p,
             std::shared_ptr<Channel> channel)
      : tok_(ctx.model->tokenizer()),
        metrics_(ctx.metrics),
        channel_(std::move(channel)),
        chat_(p.chat),
        top_logprobs_(p.top_logprobs),
        deadline_(start_ + std::chrono::seconds(ctx.timeout_s)),
        timeout_s_(ctx.timeout_s) {
    for (int i = 0; i < p.n; ++i) choices_.emplace_back(tok_, p.stop);
  }

  // Waits up to `timeout_ms` for tokens; returns each choice's new text.
  std::vector<Delta> poll(int timeout_ms);
  bool finished() const;
  Status status() const;  // why the request failed (ok otherwise)
  void cancel() { channel_->cancel(); }
  void record();
  const Choice& choice(size_t i) const { return choices_[i]; }
  size_t n() const { return choices_.size(); }
  json usage() const;
  const char* finish_reason(size_t i) const {
    const Choice& c = choices_[i];
    return c.text.stopped() || c.reason == runtime::FinishReason::kStop ? "stop" : "length";
  }

 private:
  void take(const Channel::Item& it, std::vector<Delta>& out);
  json logprob_entry(const Channel::Item& it) const;

  const tokenizer::Tokenizer& tok_;
  Metrics* metrics_;
  std::shared_ptr<Channel> channel_;
  bool chat_;
  int top_logprobs_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point deadline_;
  int timeout_s_;
  bool timed_out_ = false;
  bool recorded_ = false;
  int64_t prompt_tokens_ = 0;
  std::vector<Choice> choices_;
};

json Completion::logprob_entry(const Channel::Item& it) const {
  const std::string piece = tok_.token_to_piece(it.token, false);
  if (!chat_) {  // completions: [token, logprob, {alternative: logprob}]
    json top = json::object();
    for (const auto& t : it.top_logprobs) {
      top[tok_.token_to_piece(t.id, false)] = clamp_logprob(t.logprob);
    }
    return json::array({piece, clamp_logprob(it.logprob), top});
  }
  json top = json::array();
  for (const auto& t : it.top_logprobs) {
    const std::string p = tok_.token_to_piece(t.id, false);
    top.push_back({{"token", p}, {"logprob", clamp_logprob(t.logprob)}, {"bytes", bytes_of(p)}});
  }
  return {{"token", piece},
          {"logprob", clamp_logprob(it.logprob)},
          {"bytes", bytes_of(piece)},
          {"top_logprobs", top}};
}

void Completion::take(const Channel::Item& it, std::vector<Delta>& out) {
  if (it.choice < 0 || static_cast<size_t>(it.choice) >= choices_.size()) return;
  Choice& c = choices_[static_cast<size_t>(it.choice)];
  Delta& d = out[static_cast<size_t>(it.choice)];
  prompt_tokens_ = it.prompt_tokens;
  if (it.has_token && !c.text.stopped()) {
    c.last_token = Clock::now();
    if (c.tokens == 0) c.first_token = c.last_token;
    ++c.tokens;
    d.text += c.text.push(c.detok.push(it.token));
    if (top_logprobs_ >= 0) d.logprobs.push_back(logprob_entry(it));
  }
  if (it.finished != runtime::FinishReason::kNone) c.reason = it.finished;
}

std::vector<Delta> Completion::poll(int timeout_ms) {
  std::vector<Channel::Item> items;
  std::vector<Delta> out(choices_.size());
  channel_->wait(items, timeout_ms);
  for (const Channel::Item& it : items) take(it, out);
  if (!timed_out_ && Clock::now() > deadline_ && !finished()) {
    timed_out_ = true;
    channel_->cancel();
  }
  const bool ended = channel_->done() || timed_out_;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    if (c.finished) continue;
    if (c.text.stopped() && c.reason == runtime::FinishReason::kNone) {
      channel_->cancel(static_cast<int>(i));  // its stop string ended it: free the sequence
      c.reason = runtime::FinishReason::kStop;
    }
    if (ended || c.reason != runtime::FinishReason::kNone) {
      if (!c.text.stopped()) out[i].text += c.text.push(c.detok.flush()) + c.text.finish();
      c.finished = true;
    }
  }
  return out;
}

bool Completion::finished() const {
  return timed_out_ ||
         std::all_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.finished; });
}

Status Completion::status() const {
  if (Status s = channel_->status(); !s) return s;
  if (timed_out_) {
    return Status::unavailable("the request ran past the server's timeout of " +
                               std::to_string(timeout_s_) + " s (--timeout)");
  }
  return Status::ok();
}

json Completion::usage() const {
  int64_t completion = 0;
  for (const Choice& c : choices_) completion += c.tokens;
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens_ + completion}};
}

// Once, at the end: the request's counts and latencies (inter-token latency
// from the first choice).
void Completion::record() {
  if (recorded_) return;
  recorded_ = true;
  const bool ok = status().is_ok();
  metrics_->request(ok);
  if (!ok) return;
  const Choice& c = choices_.front();
  int64_t completion = 0;
  for (const Choice& x : choices_) completion += x.tokens;
  const double ttft = c.tokens > 0 ? seconds(start_, c.first_token) : -1;
  const double itl =
      c.tokens > 1 ? seconds(c.first_token, c.last_token) / static_cast<double>(c.tokens - 1) : -1;
  metrics_->completion(prompt_tokens_, completion, ttft, itl, seconds(start_, Clock::now()));
}

// The prompt's tokens: the chat template's text, the prompt, or its ids.
Result<std::vector<int32_t>> prompt_of(const CompletionContext& ctx, const CompletionParams& p) {
  if (!p.prompt_tokens.empty()) return p.prompt_tokens;
  Result<std::string> text = p.prompt;
  if (p.chat) text = ctx.formatter->render(p.messages);
  if (!text) return text.status();
  // A text that cannot fit is refused before it is tokenized (a huge
  // prompt would cost seconds of tokenizing for the same 400).
  if (const int64_t least = ctx.formatter->min_tokens(*text); least >= ctx.n_ctx) {
    return Status::out_of_range("the prompt has at least " + std::to_string(least) +
                                " tokens and the context is " + std::to_string(ctx.n_ctx) +
                                " (n_ctx " + std::to_string(ctx.n_ctx) + ")");
  }
  return runtime::encode_prompt(ctx.model->tokenizer(), *text);
}

Result<std::vector<runtime::Request>> requests_of(const CompletionContext& ctx,
                                                  const CompletionParams& p,
                                                  std::vector<int32_t> prompt) {
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= ctx.n_ctx) {
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
    if (p.format != CompletionParams::Format::kText) {
      if (!ctx.constraints) {
        return Status::unimplemented("response_format json_object / json_schema");
      }
      MINFER_ASSIGN_OR_RETURN(r.constraint, ctx.constraints(p));
    }
    out.push_back(std::move(r));
  }
  return out;
}

struct Header {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

json choice_json(const Completion& c, size_t i, const std::string& text, const json& logprobs,
                 bool chat, bool want_logprobs) {
  json choice = {{"index", i}, {"finish_reason", c.finish_reason(i)}};
  json lp = nullptr;
  if (want_logprobs && chat) lp = {{"content", logprobs}};
  if (want_logprobs && !chat) {
    lp = {{"tokens", json::array()},
          {"token_logprobs", json::array()},
          {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
    int64_t offset = 0;
    for (const json& row : logprobs) {
      lp["tokens"].push_back(row[0]);
      lp["token_logprobs"].push_back(row[1]);
      lp["top_logprobs"].push_back(row[2]);
      lp["text_offset"].push_back(offset);
      offset += static_cast<int64_t>(row[0].get<std::string>().size());
    }
  }
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = lp;
  return choice;
}

void reply(Completion& c, const Header& h, bool want_logprobs, HttpReply& out) {
  std::vector<std::string> text(c.n());
  std::vector<json> logprobs(c.n(), json::array());
  while (!c.finished()) {
    if (out.client_gone()) c.cancel();  // nobody waits for the answer: free the slots
    auto deltas = c.poll(200);
    for (size_t i = 0; i < c.n(); ++i) {
      text[i] += deltas[i].text;
      for (json& e : deltas[i].logprobs) logprobs[i].push_back(std::move(e));
    }
  }
  c.record();
  if (const Status s = c.status(); !s) return send_error(out, s);
  json choices = json::array();
  for (size_t i = 0; i < c.n(); ++i) {
    choices.push_back(choice_json(c, i, text[i], logprobs[i], h.chat, want_logprobs));
  }
  send_json(out, 200,
            {{"id", h.id},
             {"object", h.chat ? "chat.completion" : "text_completion"},
             {"created", h.created},
             {"model", h.model},
             {"choices", choices},
             {"usage", c.usage()}});
}

// The SSE chunks of one poll: each choice's new text, its end, and at the
// very end the usage (when asked) and [DONE].
std::string stream_chunks(Completion& c, const Header& h, bool want_logprobs, bool include_usage,
                          std::vector<bool>& ended) {
  const auto chunk = [&](const json& choices) {
    return json{{"id", h.id},
                {"object", h.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", h.created},
                {"model", h.model},
                {"choices", choices}};
  };
  std::string out;
  auto deltas = c.poll(100);
  for (size_t i = 0; i < c.n(); ++i) {
    const Delta& d = deltas[i];
    const bool end = c.choice(i).finished && !ended[i] && c.status().is_ok();
    if (d.text.empty() && d.logprobs.empty() && !end) continue;
    json ch = {{"index", i}, {"finish_reason", end ? json(c.finish_reason(i)) : json(nullptr)}};
    if (h.chat) {
      ch["delta"] = d.text.empty() && end ? json::object() : json{{"content", d.text}};
    } else {
      ch["text"] = d.text;
    }
    if (want_logprobs && !d.logprobs.empty()) {
      ch["logprobs"] = choice_json(c, i, "", d.logprobs, h.chat, true)["logprobs"];
    }
    out += sse(chunk(json::array({ch})));
    if (end) ended[i] = true;
  }
  if (!c.finished()) return out;
  c.record();
  if (const Status s = c.status(); !s) {
    out += sse(error_body(s));
  } else if (include_usage) {
    json u = chunk(json::array());
    u["usage"] = c.usage();
    out += sse(u);
  }
  return out + "data: [DONE]\n\n";
}

// The role chunk OpenAI sends first in a chat stream, one per choice.
std::string role_chunks(const Completion& c, const Header& h) {
  std::string out;
  for (size_t i = 0; i < c.n(); ++i) {
    out += sse({{"id", h.id},
                {"object", "chat.completion.chunk"},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array({{{"index", i},
                                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                                          {"finish_reason", nullptr}}})}});
  }
  return out;
}

void stream(Completion& c, const Header& h, bool want_logprobs, bool include_usage,
            HttpReply& out) {
  if (!out.begin_stream("text/event-stream")) return c.cancel();
  std::vector<bool> ended(c.n(), false);
  std::string first = h.chat ? role_chunks(c, h) : "";
  for (;;) {
    const std::string chunks = first + stream_chunks(c, h, want_logprobs, include_usage, ended);
    first.clear();
    if (!out.write(chunks)) return c.cancel();  // the client is gone
    if (c.finished()) break;
  }
  out.end();
}

}  // namespace

void complete(const CompletionContext& ctx, CompletionParams params, const std::string& id,
              HttpReply& out) {
  if (Status s = check_token_ids(params, ctx.model->hparams().n_vocab); !s) {
    return send_error(out, s);
  }
  auto prompt = prompt_of(ctx, params);
  if (!prompt) return send_error(out, prompt.status());
  auto requests = requests_of(ctx, params, std::move(*prompt));
  if (!requests) return send_error(out, requests.status());
  Completion c(ctx, params, ctx.scheduler->submit(std::move(*requests)));
  const Header h{id, ctx.model_id, static_cast<int64_t>(std::time(nullptr)), params.chat};
  const bool want_logprobs = params.top_logprobs >= 0;
  if (!params.stream) return reply(c, h, want_logprobs, out);
  // A request the scheduler refused at once (busy, stopping) is an HTTP
  // error, not a stream that fails.
  if (const Status s = c.status(); !s) {
    c.record();
    return send_error(out, s);
  }
  stream(c, h, want_logprobs, params.include_usage, out);
}

}  // namespace minfer::serve
