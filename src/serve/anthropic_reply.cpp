#include "serve/anthropic_reply.h"

#include <utility>
#include <vector>

#include "serve/anthropic.h"
#include "serve/anthropic_content.h"
#include "serve/chat_output.h"
#include "serve/chat_plan.h"
#include "serve/json_reply.h"
#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using nlohmann::json;

// The conversation planned as a chat (tools, thinking, a forced call's
// constraint, a prefill: serve/chat_plan.h) and tokenized here, as both
// endpoints count it. A text that cannot fit the context is refused before
// it is tokenized when it is to be generated from (the completion core's
// rule: a huge prompt would cost seconds of tokenizing for the same 400);
// counting counts whatever it gets.
Result<ReplyReading> plan_tokens(const CompletionContext& ctx, CompletionParams& p, bool generate) {
  MINFER_ASSIGN_OR_RETURN(ReplyReading reading, plan_chat(*ctx.formatter, ctx.chat, p));
  if (const int64_t least = ctx.formatter->min_tokens(p.prompt); generate && least >= ctx.n_ctx) {
    return Status::out_of_range("the prompt has at least " + std::to_string(least) +
                                " tokens and the context is " + std::to_string(ctx.n_ctx));
  }
  MINFER_ASSIGN_OR_RETURN(p.prompt_tokens,
                          runtime::encode_prompt(ctx.model->tokenizer(), p.prompt));
  // The core takes the tokens as they are: rendered and counted once, here.
  p.chat = false;
  p.messages.clear();
  p.prompt.clear();
  return reading;
}

// The calls as tool_use blocks name them.
void name_calls(std::vector<ToolCall>& calls) {
  for (ToolCall& c : calls) c.id = new_tool_use_id();
}

// The end of a finished run into the reply: why it stopped and its tokens.
void conclude(const CompletionRun& run, MessageReply& m) {
  m.stop_sequence = run.stop_word(0);
  m.stop_reason = stop_reason(run.finish_reason(0), m.stop_sequence, !m.calls.empty());
  m.output_tokens = run.completion_tokens();
}

void reply_whole(CompletionRun& run, MessageReply m, const ReplyReading& reading, HttpReply& out) {
  std::string text;
  while (!run.finished()) {
    if (out.client_gone()) run.cancel();  // nobody waits for the answer: free the slot
    text += run.poll(200)[0].text;
  }
  run.record();
  if (const Status s = run.status(); !s) return send_anthropic_error(out, s);
  ChatOutput reader(reading);
  ChatDelta d = reader.push(text);
  ChatDelta rest = reader.finish();
  m.thinking = d.reasoning + rest.reasoning;
  m.text = d.content + rest.content;
  m.calls = std::move(rest.calls);
  name_calls(m.calls);
  conclude(run, m);
  send_json(out, 200, message_json(m));
}

// The events of one poll; at the end the rest of the reply, the calls and
// the closing events (or the error).
std::string stream_events(CompletionRun& run, MessageReply& m, ChatOutput& reader,
                          ContentBlockEvents& blocks) {
  std::string events = blocks.push(reader.push(run.poll(100)[0].text));
  if (!run.finished()) return events;
  run.record();
  if (const Status s = run.status(); !s) return events + error_event(s);
  ChatDelta rest = reader.finish();
  events += blocks.push(rest);
  m.calls = std::move(rest.calls);
  name_calls(m.calls);
  events += blocks.finish(m.calls);
  conclude(run, m);
  return events + stream_closing(m);
}

void reply_stream(CompletionRun& run, MessageReply m, const ReplyReading& reading, HttpReply& out) {
  if (!out.begin_stream("text/event-stream")) return run.cancel();
  ChatOutput reader(reading);
  ContentBlockEvents blocks;
  std::string events = stream_opening(m);
  for (;;) {
    events += stream_events(run, m, reader, blocks);
    const bool finished = run.finished();
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
  CompletionParams& p = request->params;
  order_message_tools(p.tools, req.body);
  auto reading = plan_tokens(ctx, p, true);
  if (!reading) return send_anthropic_error(reply, reading.status());
  MessageReply m;
  m.id = id;
  m.model = request->model.empty() ? ctx.model_id : request->model;
  m.input_tokens = static_cast<int64_t>(p.prompt_tokens.size());
  auto run = CompletionRun::start(ctx, p);
  if (!run) return send_anthropic_error(reply, run.status());
  if (!p.stream) return reply_whole(**run, std::move(m), *reading, reply);
  // Refused at once (busy, stopping): an HTTP error, not a stream that fails.
  if (const Status s = (*run)->status(); !s) {
    (*run)->record();
    return send_anthropic_error(reply, s);
  }
  reply_stream(**run, std::move(m), *reading, reply);
}

void answer_count_tokens(const CompletionContext& ctx, const HttpRequest& req, HttpReply& reply) {
  auto body = parse_request_json(req.body);
  if (!body) return send_anthropic_error(reply, body.status());
  auto request = parse_messages(*body, {}, true);
  if (!request) return send_anthropic_error(reply, request.status());
  CompletionParams& p = request->params;
  order_message_tools(p.tools, req.body);
  auto reading = plan_tokens(ctx, p, false);
  if (!reading) return send_anthropic_error(reply, reading.status());
  send_json(reply, 200, {{"input_tokens", p.prompt_tokens.size()}});
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
