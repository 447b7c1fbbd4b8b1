// llama-server's native API (llama.cpp's tools/server/README.md) on the
// completion core (serve/completion.h), so that tools written for
// llama-server run unchanged: POST /completion, POST /apply-template,
// GET /props, GET /slots, /tokenize's with_pieces, llama-server's timings,
// and its error for a prompt past the context.
//
// Contract:
//   - parse_llama_completion() reads a /completion body; the fields both APIs
//     share go through parse_completion() (serve/openai.h), so a wrong type
//     or range is the same 400 naming the field:
//       prompt: a string, token ids, a list mixing ids and strings (one
//         prompt: each string tokenized, BOS before a leading string as the
//         vocabulary says, as llama-server does), a one-element list of
//         those, or {"prompt_string": s}. Several prompts and
//         multimodal_data are refused (400 naming them).
//       n_predict (or max_tokens): -1 or absent: up to the context (or the
//         server's -n); >= 1 a limit; 0 (evaluate the prompt only) refused.
//       n_probs 0..20: completion_probabilities with that many candidates.
//       stop: any number of strings. temperature < 0: greedy. seed -1: the
//         server's seed. ignore_eos: end-of-generation tokens do not end it.
//       top_k, top_p, min_p, repeat_penalty, repeat_last_n,
//         presence_penalty, frequency_penalty, logit_bias, json_schema,
//         response_format, grammar (GBNF), stream: as parse_completion()
//         reads them.
//       Refused (400): return_tokens, post_sampling_probs,
//         n_cmpl > 1. Other fields are ignored, as llama-server ignores
//         fields it does not know: cache_prompt (the engine always reuses
//         cached prefixes), n_keep, t_max_predict_ms, id_slot, samplers...
//   - complete_llama() answers it. Whole: {index, content, tokens: [],
//     id_slot: -1, stop: true, model, tokens_predicted, tokens_evaluated,
//     generation_settings, prompt, has_new_line, truncated, stop_type
//     ("eos" | "limit" | "word"), stopping_word, timings} and with n_probs
//     completion_probabilities [{id, token, logprob, bytes, top_logprobs:
//     [{id, token, logprob, bytes}]}] (a probability of 0 is -9999, as the
//     OpenAI door writes it). Streamed: SSE "data: {index, content, tokens,
//     stop: false, id_slot, tokens_predicted, tokens_evaluated
//     [, completion_probabilities]}" as text comes, then the whole reply's
//     object with content "" and stop: true. No "data: [DONE]": llama-server
//     sends none on this endpoint. A failure once streaming began is
//     "data: {"error": {...}}"; one before is an HTTP error.
//   - send_start_error(): a prompt past the context is llama-server's 400
//     {"error": {code, message, type: "exceed_context_size_error",
//     n_prompt_tokens, n_ctx}}; any other error is send_error()'s.
//   - token_pieces_json(): /tokenize's with_pieces list [{id, piece}], a
//     piece that is not valid UTF-8 written as its list of bytes.
//   - props_json(): GET /props. slots_unsupported_json(): GET /slots's 501
//     (the scheduler knows how many sequences run, not which slot holds
//     which: /metrics has the counts).
// Threading: pure functions; complete_llama() on an HTTP worker.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "runtime/sampler.h"
#include "serve/completion.h"
#include "serve/http.h"
#include "serve/openai.h"
#include "tokenizer/tokenizer.h"

namespace minfer::serve {

// What /props and /openai's system_fingerprint report as the build.
inline constexpr const char* kBuildInfo = "minfer-0.1.0";

using PromptPart = std::variant<int32_t, std::string>;

struct LlamaCompletion {
  CompletionParams params;
  // A prompt that mixes token ids and texts; empty otherwise (the prompt is
  // then params.prompt or params.prompt_tokens).
  std::vector<PromptPart> mixed_prompt;
  int n_probs = 0;
};

[[nodiscard]] Result<LlamaCompletion> parse_llama_completion(
    const nlohmann::json& body, const runtime::SamplerParams& defaults);

// A mixed prompt's token ids: each text tokenized with its special tokens
// parsed, BOS (as the vocabulary says) only before a leading text.
[[nodiscard]] Result<std::vector<int32_t>> mixed_prompt_tokens(const std::vector<PromptPart>& parts,
                                                               const tokenizer::Tokenizer& tok);

void complete_llama(const CompletionContext& ctx, const runtime::SamplerParams& defaults,
                    const HttpRequest& req, HttpReply& reply);

void send_start_error(HttpReply& reply, const Status& s, const ContextOverflow& overflow);
nlohmann::json exceed_context_body(const ContextOverflow& overflow);

nlohmann::json timings_json(const CompletionTimings& t);
nlohmann::json probabilities_json(const std::vector<TokenLogprob>& lps);
// A piece as a string when it is valid UTF-8, else its bytes.
nlohmann::json piece_json(const std::string& piece);
nlohmann::json token_pieces_json(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok);

struct ServerProps {
  std::string model_id, model_path, chat_template;
  int64_t n_ctx = 0;  // per sequence
  int64_t total_slots = 0;
  int64_t n_predict = -1;
  runtime::SamplerParams sampling;
};
nlohmann::json props_json(const ServerProps& p);
// llama-server's generation settings: the context, the model and the samplers.
nlohmann::json settings_json(const runtime::SamplerParams& s, int64_t n_ctx,
                             const std::string& model, int64_t n_predict);
nlohmann::json slots_unsupported_json();

}  // namespace minfer::serve
