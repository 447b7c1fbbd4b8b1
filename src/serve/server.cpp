#include "serve/server.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include "serve/anthropic_reply.h"
#include "serve/chat_plan.h"
#include "serve/completion.h"
#include "serve/embeddings.h"
#include "serve/http_server.h"
#include "serve/json_format.h"
#include "serve/json_reply.h"
#include "serve/llama_api.h"
#include "serve/metrics.h"
#include "serve/openai.h"
#include "serve/openai_reply.h"
#include "serve/openapi.h"
#include "serve/request_json.h"
#include "serve/scheduler.h"
#include "serve/webui.h"
#include "tokenizer/tokenizer.h"

namespace minfer::serve {

using nlohmann::json;

struct Server::Impl {
  explicit Impl(ServeOptions o) : options(std::move(o)), http(limits_of(options)) {}
  static HttpLimits limits_of(const ServeOptions& o);

  ServeOptions options;
  HttpServer http;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};  // shutdown() began
  const model::Model* model = nullptr;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<runtime::ChatFormatter> formatter;
  std::string model_id;
  int64_t n_ctx = 0;
  int64_t n_slots = 0;
  std::atomic<uint64_t> next_id{1};
  Metrics metrics;
  ConstraintFactory constraints;
  runtime::Pooling pooling = runtime::Pooling::kNone;

  void routes();
  // What every front door's completions run with.
  CompletionContext context();
  bool authorized(const HttpRequest& req) const;
  bool filter(const HttpRequest& req, HttpReply& reply) const;
  void completion(const HttpRequest& req, HttpReply& reply, bool chat);
  void tokenize(const HttpRequest& req, HttpReply& reply);
  void detokenize(const HttpRequest& req, HttpReply& reply);
  // llama-server's native endpoints (serve/llama_api.h).
  void llama_routes();
  void embedding_routes();
  void apply_template(const HttpRequest& req, HttpReply& reply);
  ServerProps props() const;
};

HttpLimits Server::Impl::limits_of(const ServeOptions& o) {
  HttpLimits l;
  l.max_body_bytes = o.max_body_bytes;
  l.read_timeout_s = o.read_timeout_s;
  l.write_timeout_s = o.timeout_s;
  l.max_connections = o.max_connections;
  l.max_connections_per_client = o.max_connections_per_client;
  l.workers = std::max(1, o.http_threads);
  return l;
}

namespace {

// Compares in time that depends only on the lengths, not on where the
// strings differ (a key cannot be guessed byte by byte from response times).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool is_page(const std::string& path) {
  return path == "/" || path == "/index.html" || path == "/favicon.ico";
}

}  // namespace

bool Server::Impl::authorized(const HttpRequest& req) const {
  if (options.api_key.empty() || req.path == "/health") return true;
  // The web page carries no key: the user types it into the page.
  if (options.web_ui && (req.method == "GET" || req.method == "HEAD") && is_page(req.path)) {
    return true;
  }
  if (req.method == "OPTIONS" && !options.cors_origin.empty()) {
    return true;  // preflights carry no key
  }
  // Anthropic's clients send the key as x-api-key; both compared whole.
  const bool bearer = same_secret(req.header("Authorization"), "Bearer " + options.api_key);
  const bool x_api_key = same_secret(req.header("x-api-key"), options.api_key);
  return bearer || x_api_key;
}

// Before routing: the key, CORS, and 503 while loading or draining.
bool Server::Impl::filter(const HttpRequest& req, HttpReply& reply) const {
  if (!authorized(req)) {
    reply.send(401, "application/json",
               error_json(401,
                          "invalid or missing API key (Authorization: Bearer KEY or "
                          "x-api-key: KEY)"));
    return true;
  }
  if (!options.cors_origin.empty()) {
    reply.add_header("Access-Control-Allow-Origin", options.cors_origin);
    reply.add_header("Vary", "Origin");
    if (req.method == "OPTIONS") {  // a preflight
      reply.add_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      reply.add_header("Access-Control-Allow-Headers",
                       "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
      reply.add_header("Access-Control-Max-Age", "600");
      reply.send(204, "", "");
      return true;
    }
  }
  if (!ready) {
    send_error(reply, Status::unavailable("the model is loading"));
    return true;
  }
  if (draining) {
    send_error(reply, Status::unavailable("the server is shutting down"));
    return true;
  }
  return false;
}

void Server::Impl::routes() {
  using Runs = HttpServer::Runs;
  http.set_error_body(error_json);
  // Anthropic's Messages API (serve/anthropic_reply.h): on its paths the
  // filter's errors (key, loading, draining) come in Anthropic's shape too.
  http.set_filter([this](const HttpRequest& q, HttpReply& r) {
    if (!is_anthropic_path(q.path)) return filter(q, r);
    AnthropicErrorReply anthropic(r);
    return filter(q, anthropic);
  });
  http.route(
      "POST", "/v1/messages",
      [this](const HttpRequest& q, HttpReply& r) {
        answer_messages(context(), options.sampling, q, "msg_" + std::to_string(next_id++), r);
      },
      Runs::kOnWorker);
  http.route(
      "POST", "/v1/messages/count_tokens",
      [this](const HttpRequest& q, HttpReply& r) { answer_count_tokens(context(), q, r); },
      Runs::kOnWorker);
  // Reached only when ready and not draining (the filter answers otherwise).
  http.route(
      "GET", "/health",
      [](const HttpRequest&, HttpReply& r) {
        send_json(r, 200, {{"status", "ok"}});
      },
      Runs::kInline);
  if (options.web_ui) {
    for (const char* p : {"/", "/index.html"}) {
      http.route(
          "GET", p,
          [](const HttpRequest&, HttpReply& r) {
            r.add_header("Content-Security-Policy",
                         "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                         "script-src 'self' 'unsafe-inline'; connect-src 'self'");
            r.add_header("X-Content-Type-Options", "nosniff");
            r.send(200, "text/html; charset=utf-8", std::string(web_page()));
          },
          Runs::kInline);
    }
    // Browsers ask for it on their own: no icon, and no error in their console.
    http.route(
        "GET", "/favicon.ico", [](const HttpRequest&, HttpReply& r) { r.send(204, "", ""); },
        Runs::kInline);
  }
  const auto models = [this](const HttpRequest&, HttpReply& r) {
    send_json(r, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", model_id},
                                      {"object", "model"},
                                      {"created", static_cast<int64_t>(std::time(nullptr))},
                                      {"owned_by", "minfer"}}})}});
  };
  http.route(
      "GET", "/metrics",
      [this](const HttpRequest&, HttpReply& r) {
        r.send(200, "text/plain; version=0.0.4", metrics.text(scheduler->stats()));
      },
      Runs::kInline);
  http.route(
      "GET", "/openapi.json",
      [this](const HttpRequest&, HttpReply& r) {
        r.send(200, "application/json",
               openapi_document(!options.api_key.empty(), options.embeddings));
      },
      Runs::kInline);
  http.route("GET", "/v1/models", models, Runs::kInline);
  http.route("GET", "/models", models, Runs::kInline);
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) {
    http.route(
        "POST", p, [this](const HttpRequest& q, HttpReply& r) { completion(q, r, true); },
        Runs::kOnWorker);
  }
  for (const char* p : {"/v1/completions", "/completions"}) {
    http.route(
        "POST", p, [this](const HttpRequest& q, HttpReply& r) { completion(q, r, false); },
        Runs::kOnWorker);
  }
  http.route(
      "POST", "/tokenize", [this](const HttpRequest& q, HttpReply& r) { tokenize(q, r); },
      Runs::kOnWorker);
  http.route(
      "POST", "/detokenize", [this](const HttpRequest& q, HttpReply& r) { detokenize(q, r); },
      Runs::kOnWorker);
  llama_routes();
  embedding_routes();
}

void Server::Impl::embedding_routes() {
  const auto route = [this](const char* path, bool openai) {
    http.route(
        "POST", path,
        [this, openai](const HttpRequest& q, HttpReply& r) {
          EmbeddingContext ctx;
          ctx.enabled = options.embeddings;
          ctx.pooling = pooling;
          ctx.model = model;
          ctx.scheduler = scheduler.get();
          ctx.metrics = &metrics;
          ctx.formatter = formatter.get();
          ctx.model_id = model_id;
          ctx.n_ctx = n_ctx;
          ctx.n_slots = n_slots;
          ctx.timeout_s = options.timeout_s;
          answer_embeddings(ctx, q, openai, r);
        },
        HttpServer::Runs::kOnWorker);
  };
  route("/v1/embeddings", true);
  route("/embeddings", false);  // llama-server's native paths
  route("/embedding", false);
}

void Server::Impl::llama_routes() {
  using Runs = HttpServer::Runs;
  http.route(
      "POST", "/completion",
      [this](const HttpRequest& q, HttpReply& r) {
        complete_llama(context(), options.sampling, q, r);
      },
      Runs::kOnWorker);
  http.route(
      "POST", "/apply-template",
      [this](const HttpRequest& q, HttpReply& r) { apply_template(q, r); }, Runs::kOnWorker);
  http.route(
      "GET", "/props",
      [this](const HttpRequest&, HttpReply& r) { send_json(r, 200, props_json(props())); },
      Runs::kInline);
  http.route(
      "GET", "/slots",
      [](const HttpRequest&, HttpReply& r) { send_json(r, 501, slots_unsupported_json()); },
      Runs::kInline);
}

ServerProps Server::Impl::props() const {
  ServerProps p;
  p.model_id = model_id;
  p.model_path = model->path();
  if (!options.chat_template.empty()) {
    p.chat_template = options.chat_template;
  } else if (auto t = model->file().get_string("tokenizer.chat_template")) {
    p.chat_template = *t;
  }
  p.n_ctx = n_ctx;
  p.total_slots = n_slots;
  p.n_predict = options.n_predict;
  p.sampling = options.sampling;
  return p;
}

namespace {

// The body as a JSON object; a 400 naming what is wrong otherwise.
Result<json> body_of(const HttpRequest& req) {
  return parse_request_json(req.body);
}

}  // namespace

CompletionContext Server::Impl::context() {
  CompletionContext ctx;
  ctx.model = model;
  ctx.scheduler = scheduler.get();
  ctx.metrics = &metrics;
  ctx.formatter = formatter.get();
  ctx.constraints = constraints;
  ctx.model_id = model_id;
  ctx.n_ctx = n_ctx;
  ctx.n_predict = options.n_predict;
  ctx.speculative = options.speculative;
  ctx.timeout_s = options.timeout_s;
  ctx.chat = options.chat;
  return ctx;
}

void Server::Impl::completion(const HttpRequest& req, HttpReply& reply, bool chat) {
  auto body = body_of(req);
  if (!body) return send_error(reply, body.status());
  auto params = parse_completion(*body, chat, options.sampling);
  if (!params) return send_error(reply, params.status());
  if (params->format == CompletionParams::Format::kJsonSchema) {
    params->schema = ordered_schema(req.body);
  }
  order_tools(params->tools, req.body);
  complete_openai(context(), *params, (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++),
                  reply);
}

void Server::Impl::tokenize(const HttpRequest& req, HttpReply& reply) {
  auto body = body_of(req);
  if (!body) return send_error(reply, body.status());
  const auto it = body->find("content");
  if (it == body->end() || !it->is_string()) {
    return send_error(reply, Status::invalid_argument("'content' must be a string"));
  }
  const auto special = body->find("add_special");
  const bool add_special = special != body->end() && special->is_boolean() && special->get<bool>();
  auto ids = model->tokenizer().encode(it->get<std::string>(), add_special, true);
  if (!ids) return send_error(reply, ids.status());
  const auto pieces = body->find("with_pieces");
  if (pieces != body->end() && pieces->is_boolean() && pieces->get<bool>()) {
    return send_json(reply, 200, {{"tokens", token_pieces_json(*ids, model->tokenizer())}});
  }
  send_json(reply, 200, {{"tokens", *ids}});
}

// llama-server's /apply-template: the chat template's text for `messages`,
// exactly what a chat completion of them would tokenize.
void Server::Impl::apply_template(const HttpRequest& req, HttpReply& reply) {
  auto body = body_of(req);
  if (!body) return send_error(reply, body.status());
  auto params = parse_completion(*body, true, options.sampling);
  if (!params) return send_error(reply, params.status());
  order_tools(params->tools, req.body);
  auto planned = plan_chat(*formatter, options.chat, *params);  // tools and thinking too
  if (!planned) return send_error(reply, planned.status());
  send_json(reply, 200, {{"prompt", params->prompt}});
}

void Server::Impl::detokenize(const HttpRequest& req, HttpReply& reply) {
  auto body = body_of(req);
  if (!body) return send_error(reply, body.status());
  const auto it = body->find("tokens");
  if (it == body->end() || !it->is_array()) {
    return send_error(reply, Status::invalid_argument("'tokens' must be a list of token ids"));
  }
  const auto n_vocab = model->hparams().n_vocab;
  tokenizer::Detokenizer detok(model->tokenizer(), true);
  std::string text;
  for (const json& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      return send_error(reply, Status::invalid_argument("token ids must be integers in [0, " +
                                                        std::to_string(n_vocab) + ")"));
    }
    text += detok.push(static_cast<int32_t>(t.get<int64_t>()));
  }
  text += detok.flush();
  send_json(reply, 200, {{"content", text}});
}

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->routes();
}

Server::~Server() {
  stop();
}

Status Server::bind() {
  MINFER_RETURN_IF_ERROR(impl_->http.bind(impl_->options.host, impl_->options.port));
  port_ = impl_->http.port();
  return Status::ok();
}

Status Server::serve() {
  return impl_->http.serve();
}

void Server::shutdown() {
  impl_->draining = true;
  if (impl_->scheduler) {
    impl_->scheduler->drain();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(impl_->options.shutdown_timeout_s);
    while (!impl_->scheduler->idle() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  stop();
}

// The engine stops first: every open request ends (a stream with an error
// chunk and [DONE], a waiting reply with 503); the transport then gives
// their handlers a moment to write that before it closes the connections.
void Server::stop() {
  impl_->draining = true;
  if (impl_->scheduler) impl_->scheduler->stop();
  impl_->http.stop(std::chrono::milliseconds(3000));
}

namespace {

// --pooling, else the file's <arch>.pooling_type, else none: llama.cpp's
// default for a model without the key (every decoder-only LLM).
Result<runtime::Pooling> resolve_pooling(const model::Model& model,
                                         std::optional<runtime::Pooling> flag) {
  if (flag) return *flag;
  const std::string key = model.hparams().arch_name + ".pooling_type";
  auto value = model.file().get_u32(key);
  if (!value) return runtime::Pooling::kNone;
  auto p = runtime::pooling_from_gguf(*value);
  if (!p) return p.status().with_context(key + " (give --pooling)");
  return p;
}

}  // namespace

Status Server::set_ready(const model::Model& model, std::unique_ptr<runtime::Engine> engine,
                         int64_t n_ctx) {
  impl_->model = &model;
  impl_->n_ctx = n_ctx;
  if (impl_->options.chat_template.empty()) {
    impl_->formatter =
        std::make_unique<runtime::ChatFormatter>(runtime::ChatFormatter::for_model(model));
  } else {
    auto f = runtime::ChatFormatter::with_template(model, impl_->options.chat_template);
    if (!f) return f.status().with_context("chat template");
    impl_->formatter = std::make_unique<runtime::ChatFormatter>(std::move(*f));
  }
  impl_->model_id = !impl_->options.alias.empty()
                        ? impl_->options.alias
                        : std::filesystem::path(model.path()).filename().string();
  auto formats = json_formats(model.tokenizer());
  if (!formats) return formats.status().with_context("response_format vocabulary");
  impl_->constraints = std::move(*formats);
  impl_->n_slots = engine->options().n_slots;
  if (impl_->options.embeddings) {
    auto pooling = resolve_pooling(model, impl_->options.pooling);
    if (!pooling) return pooling.status();
    impl_->pooling = *pooling;
  }
  impl_->scheduler = std::make_unique<Scheduler>(std::move(engine), impl_->options.max_queue);
  impl_->ready = true;
  return Status::ok();
}

}  // namespace minfer::serve
