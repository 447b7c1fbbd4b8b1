// Embeddings in `minfer serve`: OpenAI's POST /v1/embeddings and
// llama-server's native POST /embedding and /embeddings. Each input is one
// engine sequence (runtime::Request::on_prompt_hidden) whose final hidden
// states are pooled (runtime::Pooler) and normalized as llama-server does.
//
// Contract:
//   - parse_embedding_request() reads a body. `input` (or llama-server's
//     `content`, which makes the reply native on every path) is a string, a
//     list of token ids, or a list of up to kMaxInputs strings and lists of
//     token ids; strings are tokenized as prompts are (special tokens
//     parsed, BOS as the vocabulary says). `encoding_format` "float" or
//     "base64" (OpenAI only), `embd_normalize` an integer >= -1 (llama-
//     server's: -1 none, 0 int16 range, 1 taxicab, 2 Euclidean, the default,
//     p > 2 p-norm), `model` a string echoed back. Anything else is ignored.
//     An empty list, an empty input, ids outside the vocabulary or a wrong
//     type is an invalid_argument naming it.
//   - answer_embeddings() answers a request on one of the paths:
//       without --embedding: 501 not_supported_error (llama-server's words);
//       OpenAI with pooling none: 400 (llama-server's words);
//       an input longer than the per-sequence context: 400
//         exceed_context_size_error naming the input, its token count and the
//         context, before anything is queued;
//       OpenAI: {object: "list", data: [{object: "embedding", index,
//         embedding}], model, usage: {prompt_tokens, total_tokens}}, base64
//         being the little-endian f32 bytes;
//       native: [{index, embedding: [[...]]}], one vector per input, or with
//         pooling none one unnormalized vector per token (as llama-server).
//     At most 2 x slots inputs are queued at once, the rest as those end, so
//     a long list neither passes the server's queue bound nor holds every
//     slot. A busy queue is 503, a client gone cancels the rest, --timeout
//     is 503 naming it.
//   - An input's vector does not depend on what else the engine batches
//     (docs/ENGINE.md, "Batch invariance").
// Threading: answer_embeddings() runs on an HTTP worker; the engine is
// reached only through the Scheduler.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/chat_formatter.h"
#include "runtime/pooling.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace minfer::serve {

struct EmbeddingContext {
  bool enabled = false;  // --embedding
  runtime::Pooling pooling = runtime::Pooling::kNone;
  const model::Model* model = nullptr;
  Scheduler* scheduler = nullptr;
  Metrics* metrics = nullptr;
  const runtime::ChatFormatter* formatter = nullptr;  // min_tokens() before tokenizing
  std::string model_id;
  int64_t n_ctx = 0;    // per sequence
  int64_t n_slots = 1;  // sequences the engine runs at once
  int timeout_s = 600;
};

struct EmbeddingRequest {
  // One input: its text, or its token ids when `is_tokens`.
  struct Input {
    std::string text;
    std::vector<int32_t> tokens;
    bool is_tokens = false;
  };
  std::vector<Input> inputs;
  bool native = false;  // `content` given: llama-server's reply shape
  bool base64 = false;
  int normalize = 2;
  std::string model;  // "" : the server's model id
  // OpenAI caps a request at 2048 inputs; so do we.
  static constexpr size_t kMaxInputs = 2048;
};

[[nodiscard]] Result<EmbeddingRequest> parse_embedding_request(const nlohmann::json& body,
                                                               int64_t n_vocab);

// `openai`: the /v1/embeddings path (its reply shape unless the body gives
// `content`); else /embedding or /embeddings (native).
void answer_embeddings(const EmbeddingContext& ctx, const HttpRequest& req, bool openai,
                       HttpReply& reply);

}  // namespace minfer::serve
