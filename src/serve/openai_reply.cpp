#include "serve/openai_reply.h"

#include <algorithm>
#include <ctime>
#include <vector>

#include "serve/chat_output.h"
#include "serve/json_reply.h"
#include "serve/llama_api.h"

namespace minfer::serve {

using nlohmann::json;

namespace {

std::string sse(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

// chat: a logprobs.content entry; completions: [token, logprob, {alternative: logprob}].
json logprob_json(const TokenLogprob& lp, bool chat) {
  if (!chat) {
    json top = json::object();
    for (const auto& [piece, logprob] : lp.top) top[piece] = clamp_logprob(logprob);
    return json::array({lp.piece, clamp_logprob(lp.logprob), top});
  }
  json top = json::array();
  for (const auto& [piece, logprob] : lp.top) {
    top.push_back(
        {{"token", piece}, {"logprob", clamp_logprob(logprob)}, {"bytes", bytes_of(piece)}});
  }
  return {{"token", lp.piece},
          {"logprob", clamp_logprob(lp.logprob)},
          {"bytes", bytes_of(lp.piece)},
          {"top_logprobs", top}};
}

json logprobs_json(const std::vector<TokenLogprob>& lps, bool chat) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& lp : lps) content.push_back(logprob_json(lp, true));
    return {{"content", content}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  int64_t offset = 0;
  for (const TokenLogprob& lp : lps) {
    const json row = logprob_json(lp, false);
    out["tokens"].push_back(row[0]);
    out["token_logprobs"].push_back(row[1]);
    out["top_logprobs"].push_back(row[2]);
    out["text_offset"].push_back(offset);
    offset += static_cast<int64_t>(lp.piece.size());
  }
  return out;
}

struct Header {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

json usage_json(const CompletionRun& run) {
  return {{"prompt_tokens", run.prompt_tokens()},
          {"completion_tokens", run.completion_tokens()},
          {"total_tokens", run.prompt_tokens() + run.completion_tokens()}};
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

// A chat choice's message: content (null when the turn is only calls),
// reasoning_content and tool_calls when there are any.
json message_json(const ChatDelta& d) {
  json msg = {{"role", "assistant"},
              {"content", d.content.empty() && !d.calls.empty() ? json(nullptr) : json(d.content)}};
  if (!d.reasoning.empty()) msg["reasoning_content"] = d.reasoning;
  if (!d.calls.empty()) msg["tool_calls"] = tool_calls_json(d.calls);
  return msg;
}

void reply_whole(CompletionRun& run, const Header& h, bool want_logprobs,
                 const ReplyReading& reading, HttpReply& out) {
  std::vector<std::string> text(run.n());
  std::vector<std::vector<TokenLogprob>> logprobs(run.n());
  while (!run.finished()) {
    if (out.client_gone()) run.cancel();  // nobody waits for the answer: free the slots
    auto deltas = run.poll(200);
    for (size_t i = 0; i < run.n(); ++i) {
      text[i] += deltas[i].text;
      for (TokenLogprob& e : deltas[i].logprobs) logprobs[i].push_back(std::move(e));
    }
  }
  run.record();
  if (const Status s = run.status(); !s) return send_error(out, s);
  json choices = json::array();
  for (size_t i = 0; i < run.n(); ++i) {
    json choice = {{"index", i}, {"finish_reason", run.finish_reason(i)}};
    if (h.chat) {
      ChatOutput reader(reading);
      ChatDelta d = reader.push(text[i]);
      ChatDelta rest = reader.finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
      d.calls = std::move(rest.calls);
      if (!d.calls.empty()) choice["finish_reason"] = "tool_calls";
      choice["message"] = message_json(d);
    } else {
      choice["text"] = text[i];
    }
    choice["logprobs"] = want_logprobs ? logprobs_json(logprobs[i], h.chat) : json(nullptr);
    choices.push_back(choice);
  }
  send_json(out, 200,
            {{"id", h.id},
             {"object", h.chat ? "chat.completion" : "text_completion"},
             {"created", h.created},
             {"model", h.model},
             {"system_fingerprint", kBuildInfo},
             {"choices", choices},
             {"usage", usage_json(run)},
             {"timings", timings_json(run.timings())}});  // llama-server adds them
}

json chunk_json(const Header& h, const json& choices) {
  return {{"id", h.id},
          {"object", h.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", choices}};
}

// A chat choice's stream deltas for one poll: reasoning, content, then the
// calls' pieces as OpenAI streams them (a call's index, id, type and name,
// then pieces of its arguments).
std::vector<json> chat_deltas(const ChatDelta& d) {
  std::vector<json> out;
  if (!d.reasoning.empty()) out.push_back({{"reasoning_content", d.reasoning}});
  if (!d.content.empty()) out.push_back({{"content", d.content}});
  for (const ToolCallDelta& c : d.call_deltas) {
    json call = {{"index", c.index}, {"function", {{"arguments", c.arguments}}}};
    if (!c.id.empty()) {
      call["id"] = c.id;
      call["type"] = "function";
      call["function"]["name"] = c.name;
    }
    out.push_back({{"tool_calls", json::array({call})}});
  }
  return out;
}

// One choice's chunks of one poll; the last carries the finish reason.
void choice_chunks(const Header& h, size_t i, std::vector<json> deltas, const char* finish,
                   const std::vector<TokenLogprob>& logprobs, bool want_logprobs,
                   std::string& out) {
  if (deltas.empty() && (finish != nullptr || !logprobs.empty())) {
    deltas.push_back(finish != nullptr ? json::object() : json{{"content", ""}});
  }
  for (size_t j = 0; j < deltas.size(); ++j) {
    const bool last = j + 1 == deltas.size();
    json ch = {{"index", i},
               {"finish_reason", last && finish != nullptr ? json(finish) : json(nullptr)}};
    ch[h.chat ? "delta" : "text"] = std::move(deltas[j]);
    if (want_logprobs && j == 0 && !logprobs.empty()) {
      ch["logprobs"] = logprobs_json(logprobs, h.chat);
    }
    out += sse(chunk_json(h, json::array({ch})));
  }
}

// The SSE chunks of one poll: each choice's new text, its end, and at the
// very end the usage (when asked) and [DONE].
std::string stream_chunks(CompletionRun& run, const Header& h, bool want_logprobs,
                          bool include_usage, std::vector<ChatOutput>& readers) {
  std::string out;
  const auto deltas = run.poll(100);
  const bool failed = !run.status().is_ok();
  for (size_t i = 0; i < run.n(); ++i) {
    const ChoiceDelta& d = deltas[i];
    const bool end = d.ended && !failed;
    const char* finish = end ? run.finish_reason(i) : nullptr;
    std::vector<json> parts;
    if (!h.chat) {
      if (!d.text.empty() || end || !d.logprobs.empty()) parts.push_back(d.text);
    } else {
      ChatDelta cd = readers[i].push(d.text);
      if (d.ended) {
        ChatDelta rest = readers[i].finish();
        cd.reasoning += rest.reasoning;
        cd.content += rest.content;
        cd.calls = std::move(rest.calls);
        for (ToolCallDelta& c : rest.call_deltas) cd.call_deltas.push_back(std::move(c));
        if (end && !cd.calls.empty()) finish = "tool_calls";
      }
      parts = chat_deltas(cd);
    }
    choice_chunks(h, i, std::move(parts), finish, d.logprobs, want_logprobs, out);
  }
  if (!run.finished()) return out;
  run.record();
  if (const Status s = run.status(); !s) {
    out += sse(error_body(s));
  } else if (include_usage) {
    json u = chunk_json(h, json::array());
    u["usage"] = usage_json(run);
    out += sse(u);
  }
  return out + "data: [DONE]\n\n";
}

// The role chunk OpenAI sends first in a chat stream, one per choice.
std::string role_chunks(size_t n, const Header& h) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += sse(chunk_json(h, json::array({{{"index", i},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"finish_reason", nullptr}}})));
  }
  return out;
}

void reply_stream(CompletionRun& run, const Header& h, bool want_logprobs, bool include_usage,
                  const ReplyReading& reading, HttpReply& out) {
  if (!out.begin_stream("text/event-stream")) return run.cancel();
  std::string first = h.chat ? role_chunks(run.n(), h) : "";
  std::vector<ChatOutput> readers(run.n(), ChatOutput(reading));
  for (;;) {
    const std::string chunks = first + stream_chunks(run, h, want_logprobs, include_usage, readers);
    first.clear();
    if (!out.write(chunks)) return run.cancel();  // the client is gone
    if (run.finished()) break;
  }
  out.end();
}

}  // namespace

void complete_openai(const CompletionContext& ctx, const CompletionParams& request,
                     const std::string& id, HttpReply& reply) {
  CompletionParams params = request;
  ReplyReading reading;
  if (params.chat) {
    auto planned = plan_chat(*ctx.formatter, ctx.chat, params);
    if (!planned) return send_error(reply, planned.status());
    reading = std::move(*planned);
  }
  ContextOverflow overflow;
  auto run = CompletionRun::start(ctx, params, &overflow);
  if (!run) return send_start_error(reply, run.status(), overflow);
  const Header h{id, ctx.model_id, static_cast<int64_t>(std::time(nullptr)), params.chat};
  const bool want_logprobs = params.top_logprobs >= 0;
  if (!params.stream) return reply_whole(**run, h, want_logprobs, reading, reply);
  // A request the scheduler refused at once (busy, stopping) is an HTTP
  // error, not a stream that fails.
  if (const Status s = (*run)->status(); !s) {
    (*run)->record();
    return send_error(reply, s);
  }
  reply_stream(**run, h, want_logprobs, params.include_usage, reading, reply);
}

}  // namespace minfer::serve
