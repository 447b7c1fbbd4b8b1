#include "serve/anthropic_reply.h"

#include <utility>
#include <vector>

#include "serve/anthropic.h"
#include "serve/json_reply.h"
#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

// The conversation's prompt tokens, as both endpoints count them. A text
// that cannot fit the context is refused before it is tokenized when it is
// to be generated from (the completion core's rule: a huge prompt would cost
// seconds of tokenizing for the same 400); counting counts whatever it gets.
Result<std::vector<int32_t>> prompt_tokens(const CompletionContext& ctx,
                                           const std::vector<runtime::ChatMessage>& messages,
                                           bool generate) {
  MINFER_ASSIGN_OR_RETURN(std::string text, messages_prompt(*ctx.formatter, messages));
  if (const int64_t least = ctx.formatter->min_tokens(text); generate && least >= ctx.n_ctx) {
    return Status::out_of_range("the prompt has at least " + std::to_string(least) +
                                " tokens and the context is " + std::to_string(ctx.n_ctx));
  }
  return runtime::encode_prompt(ctx.model->tokenizer(), text);
}

// The end of a finished run into the reply: why it stopped and its tokens.
void conclude(const CompletionRun& run, MessageReply& m) {
  m.stop_sequence = run.stop_word(0);
  m.stop_reason = stop_reason(run.finish_reason(0), m.stop_sequence);
  m.output_tokens = run.completion_tokens();
}

void reply_whole(CompletionRun& run, MessageReply m, HttpReply& out) {
  while (!run.finished()) {
    if (out.client_gone()) run.cancel();  // nobody waits for the answer: free the slot
    m.text += run.poll(200)[0].text;
  }
  run.record();
  if (const Status s = run.status(); !s) return send_anthropic_error(out, s);
  conclude(run, m);
  send_json(out, 200, message_json(m));
}

void reply_stream(CompletionRun& run, MessageReply m, HttpReply& out) {
  if (!out.begin_stream("text/event-stream")) return run.cancel();
  std::string events = stream_opening(m);
  for (;;) {
    const std::string text = std::move(run.poll(100)[0].text);
    if (!text.empty()) events += text_delta_event(text);
    const bool finished = run.finished();
    if (finished) {
      run.record();
      if (const Status s = run.status(); !s) {
        events += error_event(s);
      } else {
        conclude(run, m);
        events += stream_closing(m);
      }
    }
    const bool sent = events.empty() ? !out.client_gone() : out.write(events);
    if (!sent) return run.cancel();  // the client is gone
    events.clear();
    if (finished) break;
  }
  out.end();
}

}  // namespace

bool is_anthropic_path(std::string_view path) {
  constexpr std::string_view kMessages = "/v1/messages";
  return path.substr(0, kMessages.size()) == kMessages &&
         (path.size() == kMessages.size() || path[kMessages.size()] == '/');
}

void send_anthropic_error(HttpReply& reply, const Status& s) {
  const int status = http_status(s);
  if (status == 503) reply.add_header("Retry-After", "1");
  send_json(reply, status, anthropic_error_json(status, s.message()));
}

void answer_messages(const CompletionContext& ctx, const runtime::SamplerParams& defaults,
                     const HttpRequest& req, const std::string& id, HttpReply& reply) {
  auto body = parse_request_json(req.body);
  if (!body) return send_anthropic_error(reply, body.status());
  auto request = parse_messages(*body, defaults, false);
  if (!request) return send_anthropic_error(reply, request.status());
  auto prompt = prompt_tokens(ctx, request->params.messages, true);
  if (!prompt) return send_anthropic_error(reply, prompt.status());
  // The core takes the tokens as they are: rendered and counted once, here.
  CompletionParams p = std::move(request->params);
  p.chat = false;
  p.messages.clear();
  p.prompt_tokens = std::move(*prompt);
  MessageReply m;
  m.id = id;
  m.model = request->model.empty() ? ctx.model_id : request->model;
  m.input_tokens = static_cast<int64_t>(p.prompt_tokens.size());
  auto run = CompletionRun::start(ctx, p);
  if (!run) return send_anthropic_error(reply, run.status());
  if (!p.stream) return reply_whole(**run, std::move(m), reply);
  // Refused at once (busy, stopping): an HTTP error, not a stream that fails.
  if (const Status s = (*run)->status(); !s) {
    (*run)->record();
    return send_anthropic_error(reply, s);
  }
  reply_stream(**run, std::move(m), reply);
}

void answer_count_tokens(const CompletionContext& ctx, const HttpRequest& req, HttpReply& reply) {
  auto body = parse_request_json(req.body);
  if (!body) return send_anthropic_error(reply, body.status());
  auto request = parse_messages(*body, {}, true);
  if (!request) return send_anthropic_error(reply, request.status());
  auto prompt = prompt_tokens(ctx, request->params.messages, false);
  if (!prompt) return send_anthropic_error(reply, prompt.status());
  send_json(reply, 200, {{"input_tokens", prompt->size()}});
}

void AnthropicErrorReply::add_header(std::string name, std::string value) {
  inner_.add_header(std::move(name), std::move(value));
}

void AnthropicErrorReply::send(int status, std::string_view content_type, std::string body) {
  if (status < 400) return inner_.send(status, content_type, std::move(body));
  std::string message = body;
  if (auto j = parse_request_json(body); j && j->contains("error") && (*j)["error"].is_object()) {
    const json& e = (*j)["error"];
    if (e.contains("message") && e["message"].is_string()) message = e["message"];
  }
  inner_.send(status, "application/json", dump_json(anthropic_error_json(status, message)));
}

bool AnthropicErrorReply::begin_stream(std::string_view content_type) {
  return inner_.begin_stream(content_type);
}

bool AnthropicErrorReply::write(std::string_view chunk) {
  return inner_.write(chunk);
}

void AnthropicErrorReply::end() {
  inner_.end();
}

bool AnthropicErrorReply::client_gone() const {
  return inner_.client_gone();
}

bool AnthropicErrorReply::answered() const {
  return inner_.answered();
}

}  // namespace minfer::serve
