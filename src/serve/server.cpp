#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

#include "serve/completion.h"
#include "serve/json_format.h"
#include "serve/metrics.h"
#include "serve/openai.h"
#include "serve/openapi.h"
#include "serve/scheduler.h"
#include "serve/webui.h"
#include "tokenizer/tokenizer.h"

namespace minfer::serve {

using nlohmann::json;

struct Server::Impl {
  ServeOptions options;
  httplib::Server http;
  int listen_socket = -1;  // the socket httplib last configured: the bound one
  std::atomic<bool> ready{false};
  std::atomic<bool> serving{false};         // in serve()
  std::atomic<bool> stop_requested{false};  // stop() was called
  std::atomic<bool> draining{false};        // shutdown() began
  const model::Model* model = nullptr;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<runtime::ChatFormatter> formatter;
  std::string model_id;
  int64_t n_ctx = 0;
  std::atomic<uint64_t> next_id{1};
  Metrics metrics;
  ConstraintFactory constraints;

  void routes();
  bool authorized(const httplib::Request& req) const;
  void completion(const httplib::Request& req, httplib::Response& res, bool chat);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
};

namespace {

void send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const Status& s) {
  send(res, http_status(s), error_body(s));
  if (http_status(s) == 503) res.set_header("Retry-After", "1");
}

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

// The body as a JSON object; a 400 naming what is wrong otherwise.
Result<json> body_of(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return Status::invalid_argument("the body is not valid JSON (or not valid UTF-8)");
  }
  if (!body.is_object()) return Status::invalid_argument("the body must be a JSON object");
  return body;
}

}  // namespace

bool Server::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty() || req.path == "/health") return true;
  // The web page carries no key: the user types it into the page.
  if (options.web_ui && req.method == "GET" &&
      (req.path == "/" || req.path == "/index.html" || req.path == "/favicon.ico"))
    return true;
  if (req.method == "OPTIONS" && !options.cors_origin.empty())
    return true;  // preflights carry no key
  return same_secret(req.get_header_value("Authorization"), "Bearer " + options.api_key);
}

void Server::Impl::routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) {
      send(res, 401,
           {{"error",
             {{"message", "invalid or missing API key (Authorization: Bearer KEY)"},
              {"type", "authentication_error"},
              {"code", 401}}}});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!options.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", options.cors_origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {  // a preflight
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!ready && req.path != "/health") {
      send_error(res, Status::unavailable("the model is loading"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // A bug must not reach the client as httplib's bare 500: the error object.
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, Status::internal("the request failed inside the server: " + what));
      });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      json body = error_body(Status::invalid_argument("the body is too large"));
      body["error"]["code"] = 413;
      send(res, 413, body);
      return;
    }
    const int status = res.status;
    send_error(res, Status::not_found("no endpoint " + req.method + " " + req.path));
    if (status != 404) res.status = status;
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready) {
      send_error(res, Status::unavailable("the model is loading"));
      return;
    }
    if (draining) {
      send_error(res, Status::unavailable("the server is shutting down"));
      return;
    }
    send(res, 200, {{"status", "ok"}});
  });
  if (options.web_ui) {
    for (const char* p : {"/", "/index.html"}) {
      http.Get(p, [](const httplib::Request&, httplib::Response& res) {
        res.set_header("Content-Security-Policy",
                       "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                       "script-src 'self' 'unsafe-inline'; connect-src 'self'");
        res.set_header("X-Content-Type-Options", "nosniff");
        const std::string_view page = web_page();
        res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
      });
    }
    // Browsers ask for it on their own: no icon, and no error in their console.
    http.Get("/favicon.ico",
             [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  }
  const auto models = [this](const httplib::Request&, httplib::Response& res) {
    send(res, 200,
         {{"object", "list"},
          {"data", json::array({{{"id", model_id},
                                 {"object", "model"},
                                 {"created", static_cast<int64_t>(std::time(nullptr))},
                                 {"owned_by", "minfer"}}})}});
  };
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.text(scheduler->stats()), "text/plain; version=0.0.4");
  });
  http.Get("/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(openapi_document(!options.api_key.empty()), "application/json");
  });
  http.Get("/v1/models", models);
  http.Get("/models", models);
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) {
    http.Post(p,
              [this](const httplib::Request& q, httplib::Response& r) { completion(q, r, true); });
  }
  for (const char* p : {"/v1/completions", "/completions"}) {
    http.Post(p,
              [this](const httplib::Request& q, httplib::Response& r) { completion(q, r, false); });
  }
  http.Post("/tokenize",
            [this](const httplib::Request& q, httplib::Response& r) { tokenize(q, r); });
  http.Post("/detokenize",
            [this](const httplib::Request& q, httplib::Response& r) { detokenize(q, r); });
}

void Server::Impl::completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto body = body_of(req);
  if (!body) return send_error(res, body.status());
  auto params = parse_completion(*body, chat, options.sampling);
  if (!params) return send_error(res, params.status());
  if (params->format == CompletionParams::Format::kJsonSchema) {
    params->schema = ordered_schema(req.body);
  }
  CompletionContext ctx;
  ctx.model = model;
  ctx.scheduler = scheduler.get();
  ctx.metrics = &metrics;
  ctx.formatter = formatter.get();
  ctx.constraints = constraints;
  ctx.model_id = model_id;
  ctx.n_ctx = n_ctx;
  ctx.n_predict = options.n_predict;
  ctx.timeout_s = options.timeout_s;
  complete(ctx, std::move(*params), (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++),
           res);
}

void Server::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
  auto body = body_of(req);
  if (!body) return send_error(res, body.status());
  const auto it = body->find("content");
  if (it == body->end() || !it->is_string()) {
    return send_error(res, Status::invalid_argument("'content' must be a string"));
  }
  const auto special = body->find("add_special");
  const bool add_special = special != body->end() && special->is_boolean() && special->get<bool>();
  auto ids = model->tokenizer().encode(it->get<std::string>(), add_special, true);
  if (!ids) return send_error(res, ids.status());
  send(res, 200, {{"tokens", *ids}});
}

void Server::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
  auto body = body_of(req);
  if (!body) return send_error(res, body.status());
  const auto it = body->find("tokens");
  if (it == body->end() || !it->is_array()) {
    return send_error(res, Status::invalid_argument("'tokens' must be a list of token ids"));
  }
  const auto n_vocab = model->hparams().n_vocab;
  tokenizer::Detokenizer detok(model->tokenizer(), true);
  std::string text;
  for (const json& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      return send_error(res, Status::invalid_argument("token ids must be integers in [0, " +
                                                      std::to_string(n_vocab) + ")"));
    }
    text += detok.push(static_cast<int32_t>(t.get<int64_t>()));
  }
  text += detok.flush();
  send(res, 200, {{"content", text}});
}

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->routes();
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a
  // second server binds a port already in use instead of failing.
  impl_->http.set_socket_options([impl = impl_.get()](socket_t sock) {
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    impl->listen_socket = sock;
  });
  const auto threads = static_cast<size_t>(std::max(4, impl_->options.http_threads));
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->http.set_read_timeout(impl_->options.timeout_s, 0);
  // An idle keep-alive connection holds a worker: it closes after --timeout,
  // and at most after 5 s (httplib's default).
  impl_->http.set_keep_alive_timeout(std::min(impl_->options.timeout_s, 5));
  impl_->http.set_write_timeout(impl_->options.timeout_s, 0);
}

Server::~Server() {
  stop();
}

Status Server::bind() {
  const ServeOptions& o = impl_->options;
  if (o.port == 0) {
    port_ = impl_->http.bind_to_any_port(o.host);
  } else if (impl_->http.bind_to_port(o.host, o.port)) {
    port_ = o.port;
  }
  if (port_ <= 0) {
    return Status::unavailable("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                               " (in use, or not an address of this machine)");
  }
  // httplib listens with a backlog of 5: a burst of clients connecting at
  // once overflows it, and the kernel drops their handshakes (they retry
  // after 1, 3, 7... s, and on a busy machine some give up). Listening again
  // on the bound socket raises the backlog to the system's limit.
  if (::listen(impl_->listen_socket, SOMAXCONN) != 0) {
    return Status::unavailable("cannot listen on " + o.host + ":" + std::to_string(port_) + ": " +
                               std::strerror(errno));
  }
  return Status::ok();
}

Status Server::serve() {
  impl_->serving = true;
  if (impl_->stop_requested) {  // stopped before it began
    impl_->serving = false;
    return Status::ok();
  }
  const bool ok = impl_->http.listen_after_bind();
  impl_->serving = false;
  if (!ok) return Status::internal("the HTTP server stopped");
  return Status::ok();
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
    // The streams' last chunks go out before the connections close.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop();
}

void Server::stop() {
  impl_->stop_requested = true;
  // httplib's stop() does nothing before its loop runs: wait for it (a stop
  // right after serve() began would otherwise be lost).
  for (int i = 0; i < 2000 && impl_->serving && !impl_->http.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http.stop();
  if (impl_->scheduler) impl_->scheduler->stop();
}

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
  impl_->scheduler = std::make_unique<Scheduler>(std::move(engine), impl_->options.max_queue);
  impl_->ready = true;
  return Status::ok();
}

}  // namespace minfer::serve
