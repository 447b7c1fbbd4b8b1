#include "serve/llama_api.h"

#include <algorithm>
#include <limits>

#include "base/utf8.h"
#include "runtime/chat_formatter.h"
#include "serve/json_reply.h"

namespace minfer::serve {

using nlohmann::json;

namespace {

Status wrong(const std::string& field, const std::string& want) {
  return Status::invalid_argument("'" + field + "' must be " + want);
}

Status refused(const std::string& field, const std::string& why) {
  return Status::invalid_argument("'" + field + "' is not supported: " + why);
}

bool is_id(const json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 &&
         v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
}

// One prompt given as a list: token ids, or ids and strings mixed.
Status read_prompt_list(const json& list, LlamaCompletion& out) {
  const std::string want = "a string, a list of token ids, or a list mixing token ids and strings";
  if (list.empty()) return wrong("prompt", want);
  const bool all_text =
      std::all_of(list.begin(), list.end(), [](const json& e) { return e.is_string(); });
  const bool nested = std::any_of(list.begin(), list.end(),
                                  [](const json& e) { return e.is_array() || e.is_object(); });
  if (nested || (all_text && list.size() > 1)) {
    return refused("prompt", "several prompts in one request (send one request each)");
  }
  std::vector<PromptPart> parts;
  bool text = false;
  for (const json& e : list) {
    if (e.is_string()) {
      text = true;
      parts.emplace_back(e.get<std::string>());
    } else if (is_id(e)) {
      parts.emplace_back(static_cast<int32_t>(e.get<int64_t>()));
    } else {
      return wrong("prompt", want);
    }
  }
  if (!text) {
    for (const PromptPart& p : parts) out.params.prompt_tokens.push_back(std::get<int32_t>(p));
  } else {
    out.mixed_prompt = std::move(parts);
  }
  return Status::ok();
}

Status read_prompt(const json& body, LlamaCompletion& out) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return wrong("prompt", "given");
  const json* p = &*it;
  // A list holding one prompt is that prompt (llama-server answers it with
  // one object, not a list).
  if (p->is_array() && p->size() == 1 && !(*p)[0].is_number()) p = &(*p)[0];
  if (p->is_string()) {
    out.params.prompt = p->get<std::string>();
    return Status::ok();
  }
  if (p->is_object()) {
    const auto media = p->find("multimodal_data");
    if (media != p->end() && !(media->is_array() && media->empty()) && !media->is_null()) {
      return refused("prompt.multimodal_data", "this server has no multimodal models");
    }
    const auto text = p->find("prompt_string");
    if (text == p->end() || !text->is_string()) return wrong("prompt.prompt_string", "a string");
    out.params.prompt = text->get<std::string>();
    return Status::ok();
  }
  if (!p->is_array()) return wrong("prompt", "a string or a list of token ids");
  return read_prompt_list(*p, out);
}

// Any number of stop strings (OpenAI's four is not llama-server's limit).
Status read_stops(const json& body, CompletionParams& p) {
  const auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return Status::ok();
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) p.stop.push_back(it->get<std::string>());
    return Status::ok();
  }
  if (!it->is_array()) return wrong("stop", "a list of strings");
  for (const json& s : *it) {
    if (!s.is_string()) return wrong("stop", "a list of strings");
    if (!s.get<std::string>().empty()) p.stop.push_back(s.get<std::string>());
  }
  return Status::ok();
}

Status refuse_unsupported(const json& body) {
  for (const char* f : {"return_tokens", "post_sampling_probs"}) {
    const auto it = body.find(f);
    if (it != body.end() && it->is_boolean() && it->get<bool>()) {
      return refused(f, std::string(f) == "return_tokens"
                            ? "generated token ids are not returned (use n_probs: each "
                              "entry has its id)"
                            : "probabilities are of the model's distribution, before sampling");
    }
  }
  const auto n = body.find("n_cmpl");
  if (n != body.end() && n->is_number() && n->get<double>() > 1) {
    return refused("n_cmpl", "one completion per request (/v1/completions takes n)");
  }
  return Status::ok();
}

// The body in OpenAI's spelling for parse_completion(): n_predict as
// max_tokens, a negative temperature as 0 (greedy either way), seed -1 as
// the server's seed; the fields read here are taken out.
Result<json> openai_spelling(const json& body) {
  json oa = body;  // safe to copy: parse_request_json() bounded its depth
  for (const char* f : {"prompt", "n_predict", "n_probs", "stop", "logprobs", "n", "seed",
                        "speculative.n_max", "speculative.n_min", "speculative.p_min"}) {
    oa.erase(f);
  }
  oa["prompt"] = "";
  const auto np = body.find("n_predict");
  const json* limit = np != body.end() && !np->is_null() ? &*np : nullptr;
  if (limit == nullptr && body.contains("max_tokens")) limit = &body["max_tokens"];
  oa.erase("max_tokens");
  if (limit != nullptr && !limit->is_null()) {
    if (!limit->is_number_integer() || limit->get<int64_t>() < -1) {
      return wrong("n_predict", "-1 (up to the context) or a positive integer");
    }
    if (limit->get<int64_t>() == 0) {
      return refused("n_predict", "0 (evaluating the prompt without generating)");
    }
    if (limit->get<int64_t>() > 0) oa["max_tokens"] = *limit;
  }
  if (const auto t = body.find("temperature"); t != body.end() && t->is_number()) {
    oa["temperature"] = std::max(t->get<double>(), 0.0);
  }
  const auto seed = body.find("seed");
  if (seed != body.end() && !(seed->is_number_integer() && seed->get<int64_t>() == -1)) {
    oa["seed"] = *seed;
  }
  return oa;
}

}  // namespace

namespace {

// llama-server's per-request speculative fields (flat keys with a dot).
Status read_speculative(const json& body, CompletionParams& p) {
  for (const char* f : {"speculative.n_max", "speculative.n_min"}) {
    const auto it = body.find(f);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > runtime::kMostDrafted) {
      return wrong(f, "an integer from 0 to " + std::to_string(runtime::kMostDrafted));
    }
    (std::string(f) == "speculative.n_max" ? p.spec_n_max : p.spec_n_min) =
        static_cast<int>(it->get<int64_t>());
  }
  if (const auto it = body.find("speculative.p_min"); it != body.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() >= 0.0 && it->get<double>() <= 1.0)) {
      return wrong("speculative.p_min", "a number from 0 to 1");
    }
    p.spec_p_min = static_cast<float>(it->get<double>());
  }
  return Status::ok();
}

}  // namespace

Result<LlamaCompletion> parse_llama_completion(const json& body,
                                               const runtime::SamplerParams& defaults) {
  if (!body.is_object()) return Status::invalid_argument("the body must be a JSON object");
  MINFER_RETURN_IF_ERROR(refuse_unsupported(body));
  MINFER_ASSIGN_OR_RETURN(json oa, openai_spelling(body));
  LlamaCompletion out;
  MINFER_ASSIGN_OR_RETURN(out.params, parse_completion(oa, false, defaults));
  out.params.prompt.clear();
  MINFER_RETURN_IF_ERROR(read_prompt(body, out));
  MINFER_RETURN_IF_ERROR(read_stops(body, out.params));
  if (const auto n = body.find("n_probs"); n != body.end() && !n->is_null()) {
    constexpr int kMax = runtime::Request::kMaxTopLogprobs;
    if (!n->is_number_integer() || n->get<int64_t>() < 0 || n->get<int64_t>() > kMax) {
      return wrong("n_probs", "an integer from 0 to " + std::to_string(kMax));
    }
    out.n_probs = static_cast<int>(n->get<int64_t>());
    out.params.top_logprobs = out.n_probs > 0 ? out.n_probs : -1;
  }
  if (const auto r = body.find("repeat_last_n"); r != body.end() && !r->is_null()) {
    if (!r->is_number_integer() || r->get<int64_t>() < -1 || r->get<int64_t>() > (1 << 24)) {
      return wrong("repeat_last_n", "an integer from -1 to 16777216");
    }
    out.params.sampling.repeat_last_n = static_cast<int>(r->get<int64_t>());
  }
  MINFER_RETURN_IF_ERROR(read_speculative(body, out.params));
  if (const auto e = body.find("ignore_eos"); e != body.end() && !e->is_null()) {
    if (!e->is_boolean()) return wrong("ignore_eos", "true or false");
    out.params.ignore_eos = e->get<bool>();
  }
  return out;
}

Result<std::vector<int32_t>> mixed_prompt_tokens(const std::vector<PromptPart>& parts,
                                                 const tokenizer::Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (const auto* id = std::get_if<int32_t>(&parts[i])) {
      ids.push_back(*id);
      continue;
    }
    const std::string& text = std::get<std::string>(parts[i]);
    MINFER_ASSIGN_OR_RETURN(
        std::vector<int32_t> part,
        i == 0 ? runtime::encode_prompt(tok, text) : tok.encode(text, /*add_special=*/false, true));
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

json timings_json(const CompletionTimings& t) {
  const auto per_token = [](double ms, int64_t n) {
    return n > 0 ? ms / static_cast<double>(n) : 0.0;
  };
  const auto per_second = [](double ms, int64_t n) {
    return ms > 0 ? 1e3 * static_cast<double>(n) / ms : 0.0;
  };
  json j = {{"prompt_n", t.prompt_n},
            {"prompt_ms", t.prompt_ms},
            {"prompt_per_token_ms", per_token(t.prompt_ms, t.prompt_n)},
            {"prompt_per_second", per_second(t.prompt_ms, t.prompt_n)},
            {"predicted_n", t.predicted_n},
            {"predicted_ms", t.predicted_ms},
            {"predicted_per_token_ms", per_token(t.predicted_ms, t.predicted_n)},
            {"predicted_per_second", per_second(t.predicted_ms, t.predicted_n)}};
  if (t.speculative) {  // as llama-server: only where the server drafts
    j["draft_n"] = t.draft_n;
    j["draft_n_accepted"] = t.draft_n_accepted;
  }
  return j;
}

json probabilities_json(const std::vector<TokenLogprob>& lps) {
  json out = json::array();
  for (const TokenLogprob& lp : lps) {
    json top = json::array();
    for (size_t k = 0; k < lp.top.size(); ++k) {
      top.push_back({{"id", k < lp.top_ids.size() ? lp.top_ids[k] : -1},
                     {"token", lp.top[k].first},
                     {"logprob", clamp_logprob(lp.top[k].second)},
                     {"bytes", bytes_of(lp.top[k].first)}});
    }
    out.push_back({{"id", lp.id},
                   {"token", lp.piece},
                   {"logprob", clamp_logprob(lp.logprob)},
                   {"bytes", bytes_of(lp.piece)},
                   {"top_logprobs", top}});
  }
  return out;
}

json piece_json(const std::string& piece) {
  return find_invalid_utf8(piece) == kUtf8Valid ? json(piece) : bytes_of(piece);
}

json token_pieces_json(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok) {
  json out = json::array();
  for (int32_t id : ids) out.push_back({{"id", id}, {"piece", piece_json(tok.token_to_piece(id))}});
  return out;
}

json exceed_context_body(const ContextOverflow& o) {
  const std::string n = (o.at_least ? "at least " : "") + std::to_string(o.n_prompt_tokens);
  return {{"error",
           {{"code", 400},
            {"message", "request (" + n + " tokens) exceeds the available context size (" +
                            std::to_string(o.n_ctx) + " tokens), try increasing it"},
            {"type", "exceed_context_size_error"},
            {"n_prompt_tokens", o.n_prompt_tokens},
            {"n_ctx", o.n_ctx}}}};
}

void send_start_error(HttpReply& reply, const Status& s, const ContextOverflow& overflow) {
  if (s.code() == StatusCode::kOutOfRange && overflow.n_ctx > 0) {
    return send_json(reply, 400, exceed_context_body(overflow));
  }
  send_error(reply, s);
}

json settings_json(const runtime::SamplerParams& s, int64_t n_ctx, const std::string& model,
                   int64_t n_predict) {
  return {{"n_ctx", n_ctx},
          {"model", model},
          {"n_predict", n_predict},
          {"seed", s.seed},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"repeat_last_n", s.repeat_last_n},
          {"repeat_penalty", s.repeat_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty}};
}

json props_json(const ServerProps& p) {
  json params = settings_json(p.sampling, p.n_ctx, p.model_id, p.n_predict);
  params.update({{"stop", json::array()},
                 {"ignore_eos", false},
                 {"stream", false},
                 {"n_probs", 0},
                 {"grammar", ""}});
  return {{"default_generation_settings",
           {{"id", 0},
            {"id_task", -1},
            {"n_ctx", p.n_ctx},
            {"is_processing", false},
            {"params", params}}},
          {"total_slots", p.total_slots},
          {"model_alias", p.model_id},
          {"model_path", p.model_path},
          {"chat_template", p.chat_template},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", kBuildInfo},
          {"is_sleeping", false}};
}

json slots_unsupported_json() {
  return {{"error",
           {{"code", 501},
            {"message",
             "minfer serve does not report per-slot state; GET /metrics has the running "
             "and waiting sequence counts"},
            {"type", "not_supported_error"}}}};
}

}  // namespace minfer::serve
