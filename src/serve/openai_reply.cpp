#include "serve/openai_reply.h"

#include <algorithm>
#include <ctime>
#include <vector>

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

void reply_whole(CompletionRun& run, const Header& h, bool want_logprobs, HttpReply& out) {
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
      choice["message"] = {{"role", "assistant"}, {"content", text[i]}};
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

// The SSE chunks of one poll: each choice's new text, its end, and at the
// very end the usage (when asked) and [DONE].
std::string stream_chunks(CompletionRun& run, const Header& h, bool want_logprobs,
                          bool include_usage) {
  std::string out;
  const auto deltas = run.poll(100);
  const bool failed = !run.status().is_ok();
  for (size_t i = 0; i < run.n(); ++i) {
    const ChoiceDelta& d = deltas[i];
    const bool end = d.ended && !failed;
    if (d.text.empty() && d.logprobs.empty() && !end) continue;
    json ch = {{"index", i}, {"finish_reason", end ? json(run.finish_reason(i)) : json(nullptr)}};
    if (h.chat) {
      ch["delta"] = d.text.empty() && end ? json::object() : json{{"content", d.text}};
    } else {
      ch["text"] = d.text;
    }
    if (want_logprobs && !d.logprobs.empty()) ch["logprobs"] = logprobs_json(d.logprobs, h.chat);
    out += sse(chunk_json(h, json::array({ch})));
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
                  HttpReply& out) {
  if (!out.begin_stream("text/event-stream")) return run.cancel();
  std::string first = h.chat ? role_chunks(run.n(), h) : "";
  for (;;) {
    const std::string chunks = first + stream_chunks(run, h, want_logprobs, include_usage);
    first.clear();
    if (!out.write(chunks)) return run.cancel();  // the client is gone
    if (run.finished()) break;
  }
  out.end();
}

}  // namespace

void complete_openai(const CompletionContext& ctx, const CompletionParams& params,
                     const std::string& id, HttpReply& reply) {
  ContextOverflow overflow;
  auto run = CompletionRun::start(ctx, params, &overflow);
  if (!run) return send_start_error(reply, run.status(), overflow);
  const Header h{id, ctx.model_id, static_cast<int64_t>(std::time(nullptr)), params.chat};
  const bool want_logprobs = params.top_logprobs >= 0;
  if (!params.stream) return reply_whole(**run, h, want_logprobs, reply);
  // A request the scheduler refused at once (busy, stopping) is an HTTP
  // error, not a stream that fails.
  if (const Status s = (*run)->status(); !s) {
    (*run)->record();
    return send_error(reply, s);
  }
  reply_stream(**run, h, want_logprobs, params.include_usage, reply);
}

}  // namespace minfer::serve
