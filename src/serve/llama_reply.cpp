// POST /completion answered as llama-server answers it (serve/llama_api.h):
// the whole reply, or its stream of partial objects and the final one.
#include <string>
#include <vector>

#include "serve/json_reply.h"
#include "serve/llama_api.h"
#include "serve/request_json.h"

namespace minfer::serve {

using nlohmann::json;

namespace {

std::string sse(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

// What every object of one reply repeats.
struct ReplyInfo {
  std::string model, prompt;
  int64_t n_ctx = 0;
  int n_probs = 0;
  json settings;
};

const char* stop_type(const CompletionRun& run) {
  if (!run.stop_word(0).empty()) return "word";
  return std::string(run.finish_reason(0)) == "stop" ? "eos" : "limit";
}

// The last object: whole (content = all the text) or streamed (content "").
json final_json(const CompletionRun& run, const ReplyInfo& info, const std::string& content,
                bool has_new_line) {
  const int64_t predicted = run.completion_tokens();
  const int64_t evaluated = run.prompt_tokens();
  return {{"index", 0},
          {"content", content},
          {"tokens", json::array()},
          {"id_slot", -1},
          {"stop", true},
          {"model", info.model},
          {"tokens_predicted", predicted},
          {"tokens_evaluated", evaluated},
          {"generation_settings", info.settings},
          {"prompt", info.prompt},
          {"has_new_line", has_new_line},
          // The context ran out before an end-of-generation token or stop.
          {"truncated", evaluated + predicted >= info.n_ctx},
          {"stop_type", stop_type(run)},
          {"stopping_word", run.stop_word(0)},
          {"timings", timings_json(run.timings())}};
}

json partial_json(const CompletionRun& run, const ReplyInfo& info, const ChoiceDelta& d) {
  json j = {{"index", 0},
            {"content", d.text},
            {"tokens", json::array()},
            {"stop", false},
            {"id_slot", -1},
            {"tokens_predicted", run.completion_tokens()},
            {"tokens_evaluated", run.prompt_tokens()}};
  if (info.n_probs > 0) j["completion_probabilities"] = probabilities_json(d.logprobs);
  return j;
}

void reply_whole(CompletionRun& run, const ReplyInfo& info, HttpReply& out) {
  std::string text;
  std::vector<TokenLogprob> probs;
  while (!run.finished()) {
    if (out.client_gone()) run.cancel();  // nobody waits for the answer: free the slot
    auto deltas = run.poll(200);
    text += deltas[0].text;
    for (TokenLogprob& e : deltas[0].logprobs) probs.push_back(std::move(e));
  }
  run.record();
  if (const Status s = run.status(); !s) return send_error(out, s);
  json j = final_json(run, info, text, text.find('\n') != std::string::npos);
  if (info.n_probs > 0) j["completion_probabilities"] = probabilities_json(probs);
  send_json(out, 200, j);
}

void reply_stream(CompletionRun& run, const ReplyInfo& info, HttpReply& out) {
  if (!out.begin_stream("text/event-stream")) return run.cancel();
  bool new_line = false;
  for (;;) {
    std::string chunk;
    const auto deltas = run.poll(100);
    const ChoiceDelta& d = deltas[0];
    new_line = new_line || d.text.find('\n') != std::string::npos;
    if (!d.text.empty() || !d.logprobs.empty()) chunk += sse(partial_json(run, info, d));
    if (run.finished()) {
      run.record();
      const Status s = run.status();
      chunk += sse(s ? final_json(run, info, "", new_line) : error_body(s));
    }
    if (!out.write(chunk)) return run.cancel();  // the client is gone
    if (run.finished()) break;
  }
  out.end();
}

// The prompt as the reply's "prompt" shows it: its text, or its tokens'.
std::string prompt_text(const CompletionParams& p, const tokenizer::Tokenizer& tok) {
  if (p.prompt_tokens.empty()) return p.prompt;
  tokenizer::Detokenizer detok(tok, true);
  std::string text;
  for (int32_t id : p.prompt_tokens) text += detok.push(id);
  return text + detok.flush();
}

json settings_of(const CompletionContext& ctx, const LlamaCompletion& lc) {
  json s = settings_json(lc.params.sampling, ctx.n_ctx, ctx.model_id,
                         lc.params.max_tokens > 0 ? lc.params.max_tokens : ctx.n_predict);
  s.update({{"stop", lc.params.stop},
            {"ignore_eos", lc.params.ignore_eos},
            {"stream", lc.params.stream},
            {"n_probs", lc.n_probs}});
  return s;
}

}  // namespace

void complete_llama(const CompletionContext& ctx, const runtime::SamplerParams& defaults,
                    const HttpRequest& req, HttpReply& reply) {
  auto body = parse_request_json(req.body);
  if (!body) return send_error(reply, body.status());
  auto lc = parse_llama_completion(*body, defaults);
  if (!lc) return send_error(reply, lc.status());
  const tokenizer::Tokenizer& tok = ctx.model->tokenizer();
  if (!lc->mixed_prompt.empty()) {
    auto ids = mixed_prompt_tokens(lc->mixed_prompt, tok);
    if (!ids) return send_error(reply, ids.status());
    lc->params.prompt_tokens = std::move(*ids);
  }
  if (lc->params.format == CompletionParams::Format::kJsonSchema) {
    lc->params.schema = ordered_schema(req.body);
  }
  ContextOverflow overflow;
  auto run = CompletionRun::start(ctx, lc->params, &overflow);
  if (!run) return send_start_error(reply, run.status(), overflow);
  const ReplyInfo info{ctx.model_id, prompt_text(lc->params, tok), ctx.n_ctx, lc->n_probs,
                       settings_of(ctx, *lc)};
  if (!lc->params.stream) return reply_whole(**run, info, reply);
  // A request the scheduler refused at once (busy, stopping) is an HTTP
  // error, not a stream that fails.
  if (const Status s = (*run)->status(); !s) {
    (*run)->record();
    return send_error(reply, s);
  }
  reply_stream(**run, info, reply);
}

}  // namespace minfer::serve
