// `minfer serve`: an OpenAI-compatible HTTP server over one runtime::Engine
// (serve/scheduler.h), on the event-driven transport of serve/http_server.h.
//
// Contract:
//   - listen() binds host:port (an error names them) and serves on its own
//     threads until stop(); before set_ready() every endpoint but /health
//     answers 503 and /health says the model is loading.
//   - Endpoints: GET /health, GET /metrics (Prometheus text: serve/metrics.h),
//     GET /v1/models, POST /v1/chat/completions and
//     /v1/completions (one JSON body, or with "stream": true SSE chunks
//     "data: {...}" ending with "data: [DONE]"; stream_options.include_usage
//     adds a last chunk with the usage), POST /tokenize, POST /detokenize,
//     and llama-server's POST /completion, POST /apply-template, GET /props
//     and GET /slots (serve/llama_api.h); the /v1 prefix is optional. Bodies are parsed by
//     nlohmann-json behind one depth bound (serve/request_json.h); every client error is a 4xx with
//     the OpenAI error object (its code the HTTP status), malformed JSON, invalid UTF-8 and errors
//     of the HTTP framing included, and a prompt past the context is 400 naming its token count and
//     the context (llama-server's exceed_context_size_error). The transport's limits (sizes,
//     deadlines, connections) are http_server.h's, set from ServeOptions.
//   - With an API key every endpoint but /health and the web page (GET and
//     HEAD /) wants "Authorization: Bearer KEY", byte for byte (401
//     otherwise).
//   - A client that goes away, streamed or not, cancels its sequences. Past
//     max_queue waiting sequences a request is 503 with Retry-After.
//   - While draining (shutdown()) every endpoint answers 503 with
//     Retry-After, /health included; streams cut when the grace ends get
//     an error chunk and [DONE].
//   - --cors ORIGIN adds Access-Control-Allow-* headers and answers
//     preflight OPTIONS requests; without it there are none.
//   - GET /openapi.json describes the endpoints (OpenAPI 3.0).
//   - POST /v1/embeddings, /embedding and /embeddings (serve/embeddings.h):
//     with ServeOptions::embeddings, the pooled final hidden states of each
//     input; without, 501 as llama-server answers. Completions are served
//     either way.
// Threading: quick endpoints on the transport's I/O thread, completions and
// (de)tokenization on its workers; the engine on the scheduler's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "model/model.h"
#include "runtime/chat_formatter.h"
#include "runtime/engine.h"
#include "runtime/pooling.h"
#include "runtime/sampler.h"
#include "serve/chat_plan.h"

namespace minfer::serve {

class Scheduler;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string alias;          // the model's id in responses ("" : the file's name)
  std::string api_key;        // "" : none needed
  std::string chat_template;  // "" : the model's own (or its built-in format)
  int timeout_s = 600;        // longest request; longest write of one response chunk
  int read_timeout_s = 30;    // a whole request (headers and body) must arrive in this
  int64_t n_predict = -1;     // default max tokens (-1: up to the context)
  // Speculative decoding's defaults (n_max 0: off; the engine holds the drafter).
  runtime::SpeculativeParams speculative;
  size_t max_body_bytes = 8 << 20;
  // HTTP worker threads: each request being completed or tokenized holds
  // one (reading requests and quick endpoints hold none), so enough for
  // every slot and the queue.
  int http_threads = 64;
  int max_connections = 1024;
  int max_connections_per_client = 256;
  int64_t max_queue = 256;          // sequences waiting for a slot; past it 503 + Retry-After
  std::string cors_origin;          // "" : no CORS headers; "*" or an origin
  int shutdown_timeout_s = 30;      // shutdown(): how long running requests may finish
  bool web_ui = true;               // GET / : the chat page (serve/webui.h), open without a key
  runtime::SamplerParams sampling;  // defaults of every request
  ChatOptions chat;                 // --reasoning-format, --reasoning-budget
  bool embeddings = false;          // --embedding: the embeddings endpoints answer
  // --pooling; unset: the model's <arch>.pooling_type, none without one (llama.cpp's default).
  std::optional<runtime::Pooling> pooling;
};

class Server {
 public:
  explicit Server(ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds; then serve() blocks until stop().
  Status bind();
  Status serve();
  // Graceful: refuses new requests (503) and lets running ones finish for up
  // to shutdown_timeout_s, then stops (the rest end with an error).
  void shutdown();
  void stop();
  int port() const { return port_; }
  // The model is loaded: requests go to this engine from now on.
  // An error when ServeOptions::chat_template does not parse.
  Status set_ready(const model::Model& model, std::unique_ptr<runtime::Engine> engine,
                   int64_t n_ctx);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace minfer::serve
