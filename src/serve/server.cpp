#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

#include "serve/metrics.h"
#include "serve/openai.h"
#include "serve/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::serve {

using nlohmann::json;

struct Server::Impl {
  ServeOptions options;
  httplib::Server http;
  std::atomic<bool> ready{false};
  std::atomic<bool> serving{false};         // in serve()
  std::atomic<bool> stop_requested{false};  // stop() was called
  const model::Model* model = nullptr;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<runtime::ChatFormatter> formatter;
  std::string model_id;
  int64_t n_ctx = 0;
  std::atomic<uint64_t> next_id{1};
  Metrics metrics;

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

const char* finish_name(runtime::FinishReason r, bool stopped) {
  if (stopped || r == runtime::FinishReason::kStop) return "stop";
  return "length";  // max tokens, or the context
}

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The state of one completion while it runs: tokens in, text out, and its
// timings for the metrics.
struct Run {
  Run(std::shared_ptr<Channel> ch, tokenizer::Detokenizer d, StopText t, Metrics* m)
      : channel(std::move(ch)), detok(std::move(d)), text(std::move(t)), metrics(m) {}

  std::shared_ptr<Channel> channel;
  tokenizer::Detokenizer detok;
  StopText text;
  Metrics* metrics;
  Clock::time_point start = Clock::now(), first_token, last_token;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  runtime::FinishReason reason = runtime::FinishReason::kNone;
  bool finished = false;
  bool recorded = false;

  // Once, at the end: the request's counts and latencies.
  void record() {
    if (recorded) return;
    recorded = true;
    const bool ok = channel->status().is_ok();
    metrics->request(ok);
    if (!ok) return;
    const double ttft = completion_tokens > 0 ? seconds(start, first_token) : -1;
    const double itl = completion_tokens > 1 ? seconds(first_token, last_token) /
                                                   static_cast<double>(completion_tokens - 1)
                                             : -1;
    metrics->completion(prompt_tokens, completion_tokens, ttft, itl, seconds(start, Clock::now()));
  }

  // Waits for what came; returns the new text (finished set at the end).
  std::string poll(int timeout_ms) {
    std::vector<Channel::Item> items;
    std::string out;
    channel->wait(items, timeout_ms);
    for (const Channel::Item& it : items) {
      prompt_tokens = it.prompt_tokens;
      if (it.has_token && !text.stopped()) {
        last_token = Clock::now();
        if (completion_tokens == 0) first_token = last_token;
        ++completion_tokens;
        out += text.push(detok.push(it.token));
      }
      if (it.finished != runtime::FinishReason::kNone) reason = it.finished;
    }
    if (text.stopped() && reason == runtime::FinishReason::kNone) {
      channel->cancel();  // the stop string ended it: free the sequence
      reason = runtime::FinishReason::kStop;
      finished = true;
    }
    if (channel->done() || reason != runtime::FinishReason::kNone) {
      if (!text.stopped()) out += text.push(detok.flush()) + text.finish();
      finished = true;
    }
    return out;
  }
};

json usage(const Run& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

std::string sse(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace

bool Server::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty() || req.path == "/health") return true;
  return req.get_header_value("Authorization") == "Bearer " + options.api_key;
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
      send_error(res, Status::invalid_argument("the body is too large"));
      res.status = 413;
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
    send(res, 200, {{"status", "ok"}});
  });
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
  std::vector<int32_t> prompt = params->prompt_tokens;
  if (prompt.empty()) {
    Result<std::string> text = params->prompt;
    if (chat) text = formatter->render(params->messages);
    if (!text) return send_error(res, text.status());
    auto ids = runtime::encode_prompt(model->tokenizer(), *text);
    if (!ids) return send_error(res, ids.status());
    prompt = std::move(*ids);
  }
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= n_ctx) {
    return send_error(
        res, Status::out_of_range("the prompt has " + std::to_string(n_prompt) +
                                  " tokens and the context is " + std::to_string(n_ctx) +
                                  " (prompt_tokens " + std::to_string(n_prompt) + ", n_ctx " +
                                  std::to_string(n_ctx) + ")"));
  }
  runtime::Request r;
  r.prompt = std::move(prompt);
  r.sampling = params->sampling;
  const int64_t room = n_ctx - n_prompt;
  const int64_t dflt = options.n_predict > 0 ? options.n_predict : room;
  r.max_tokens = std::min(params->max_tokens > 0 ? params->max_tokens : dflt, room);
  auto run = std::make_shared<Run>(scheduler->submit(std::move(r)),
                                   tokenizer::Detokenizer(model->tokenizer(), false),
                                   StopText(params->stop), &metrics);
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  const auto created = static_cast<int64_t>(std::time(nullptr));
  const char* object = chat ? "chat.completion" : "text_completion";
  if (!params->stream) {
    std::string text;
    while (!run->finished) text += run->poll(1000);
    run->record();
    if (const Status s = run->channel->status(); !s) return send_error(res, s);
    json choice = {{"index", 0}, {"finish_reason", finish_name(run->reason, run->text.stopped())}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    }
    return send(res, 200,
                {{"id", id},
                 {"object", object},
                 {"created", created},
                 {"model", model_id},
                 {"choices", json::array({choice})},
                 {"usage", usage(*run)}});
  }
  const bool include_usage = params->include_usage;
  const std::string model_name = model_id;
  auto chunk = [=](const json& choices) {
    return json{{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model_name},
                {"choices", choices}};
  };
  auto first = std::make_shared<bool>(true);
  res.set_chunked_content_provider(
      "text/event-stream",
      [=](size_t, httplib::DataSink& sink) {
        if (*first && chat) {
          *first = false;
          const json c = json::array({{{"index", 0},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"finish_reason", nullptr}}});
          if (!sink.write(sse(chunk(c)).data(), sse(chunk(c)).size())) return false;
        }
        const std::string text = run->poll(100);
        std::string out;
        if (!text.empty()) {
          const json c =
              json::array({{{"index", 0},
                            {chat ? "delta" : "text", chat ? json{{"content", text}} : json(text)},
                            {"finish_reason", nullptr}}});
          out += sse(chunk(c));
        }
        if (run->finished) {
          run->record();
          if (const Status s = run->channel->status(); !s) {
            out += sse(error_body(s));
          } else {
            const json c =
                json::array({{{"index", 0},
                              {chat ? "delta" : "text", chat ? json::object() : json("")},
                              {"finish_reason", finish_name(run->reason, run->text.stopped())}}});
            out += sse(chunk(c));
            if (include_usage) {
              json u = chunk(json::array());
              u["usage"] = usage(*run);
              out += sse(u);
            }
          }
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          run->channel->cancel();  // the client is gone
          return false;
        }
        if (run->finished) sink.done();
        return true;
      },
      [run](bool success) {
        if (!success) run->channel->cancel();
      });
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
  impl_->http.set_socket_options([](socket_t sock) {
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->http.set_read_timeout(impl_->options.timeout_s, 0);
  impl_->http.set_write_timeout(impl_->options.timeout_s, 0);
}

Server::~Server() {
  stop();
}

Status Server::bind() {
  const ServeOptions& o = impl_->options;
  if (o.port == 0) {
    port_ = impl_->http.bind_to_any_port(o.host);
    if (port_ > 0) return Status::ok();
  } else if (impl_->http.bind_to_port(o.host, o.port)) {
    port_ = o.port;
    return Status::ok();
  }
  return Status::unavailable("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (in use, or not an address of this machine)");
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
  impl_->scheduler = std::make_unique<Scheduler>(std::move(engine));
  impl_->ready = true;
  return Status::ok();
}

}  // namespace minfer::serve
