// `minfer serve`: the OpenAI-compatible HTTP server (serve/server.h) with
// llama-server's flags. It listens first (so /health answers 503 while the
// model loads), then loads the model and the engine. SIGINT or SIGTERM stops
// it gracefully (new requests get 503, running ones may finish for
// --shutdown-timeout seconds); a second signal ends it at once.
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "serve/server.h"

namespace minfer::cli {
namespace {

Status run(const ArgParser& p) {
  serve::ServeOptions o;
  o.host = p.get_or("--host", "127.0.0.1");
  MINFER_ASSIGN_OR_RETURN(int64_t port, p.get_int("--port", 8080, 0, 65535));
  o.port = static_cast<int>(port);
  o.alias = p.get_or("--alias", "");
  o.api_key = p.get_or("--api-key", "");
  if (auto path = p.get("--chat-template-file")) {
    MINFER_ASSIGN_OR_RETURN(o.chat_template, read_text_file(*path, "chat template file"));
    if (o.chat_template.empty()) {
      return Status::invalid_argument("chat template file '" + *path + "' is empty");
    }
  }
  MINFER_ASSIGN_OR_RETURN(int64_t timeout, p.get_int("--timeout", 600, 1, 86400));
  o.timeout_s = static_cast<int>(timeout);
  MINFER_ASSIGN_OR_RETURN(int64_t read_timeout, p.get_int("--read-timeout", 30, 1, 86400));
  o.read_timeout_s = static_cast<int>(read_timeout);
  MINFER_ASSIGN_OR_RETURN(int64_t max_conn, p.get_int("--max-connections", 1024, 1, 1 << 20));
  o.max_connections = static_cast<int>(max_conn);
  MINFER_ASSIGN_OR_RETURN(int64_t per_client,
                          p.get_int("--max-connections-per-client", 256, 1, 1 << 20));
  o.max_connections_per_client = static_cast<int>(per_client);
  MINFER_ASSIGN_OR_RETURN(o.n_predict, p.get_int("--n-predict", -1, -1, kMaxContext));
  if (o.n_predict == 0) return Status::invalid_argument("--n-predict must be -1 or positive");
  MINFER_ASSIGN_OR_RETURN(o.sampling, sampler_params(p));
  MINFER_ASSIGN_OR_RETURN(int64_t slots, p.get_int("--parallel", 4, 1, 1024));
  MINFER_ASSIGN_OR_RETURN(int64_t decode_per_step, p.get_int("--decode-per-step", -1, -1, 1024));
  MINFER_ASSIGN_OR_RETURN(int64_t graph_buckets, p.get_int("--graph-buckets", -1, -1, 1));
  MINFER_ASSIGN_OR_RETURN(o.max_queue, p.get_int("--max-queue", 64 * slots, 0, 1 << 20));
  MINFER_ASSIGN_OR_RETURN(int64_t grace, p.get_int("--shutdown-timeout", 30, 0, 86400));
  o.shutdown_timeout_s = static_cast<int>(grace);
  o.cors_origin = p.get_or("--cors", "");
  MINFER_ASSIGN_OR_RETURN(int64_t threads, p.get_int("--threads-http", -1, -1, 4096));
  // Every slot and queued request holds a worker while it runs; tokenize
  // and detokenize the rest.
  o.http_threads =
      static_cast<int>(threads > 0 ? threads : std::min<int64_t>(slots + o.max_queue + 32, 1024));
  o.web_ui = !p.has("--no-webui");
  MINFER_ASSIGN_OR_RETURN(runtime::SessionOptions so, session_options(p, 4096 * slots));

  serve::Server server(o);
  MINFER_RETURN_IF_ERROR(server.bind());
  Interrupts interrupts(Interrupts::Signals::kIntAndTerm);
  Status served;
  std::thread http([&] { served = server.serve(); });
  std::fprintf(stderr, "minfer serve: listening on http://%s:%d\n", o.host.c_str(), server.port());
  std::fflush(stderr);
  auto started = [&]() -> Status {
    MINFER_ASSIGN_OR_RETURN(auto model, load_model(p, /*quiet=*/true));
    runtime::EngineOptions e;
    e.n_slots = slots;
    // llama-server's rule: -c is the whole context, split among the slots.
    e.n_ctx = std::min<int64_t>(so.n_ctx / slots, model->hparams().n_ctx_train);
    if (e.n_ctx < 8) {
      return Status::invalid_argument("-c " + std::to_string(so.n_ctx) + " over " +
                                      std::to_string(slots) +
                                      " slots leaves fewer than 8 tokens per sequence");
    }
    engine_settings(so, e);
    e.decode_per_step = decode_per_step;
    e.graph_buckets = static_cast<int>(graph_buckets);
    MINFER_ASSIGN_OR_RETURN(auto engine, runtime::Engine::create(*model, e));
    const int64_t per_step = engine->options().decode_per_step;
    const bool buckets = engine->options().graph_buckets == 1;
    MINFER_RETURN_IF_ERROR(server.set_ready(*model, std::move(engine), e.n_ctx));
    std::fprintf(stderr, "minfer serve: ready (%lld slots of %lld tokens; %s; %s)\n",
                 static_cast<long long>(slots), static_cast<long long>(e.n_ctx),
                 per_step > 0 ? ("at most " + std::to_string(per_step) + " decoded a step").c_str()
                              : "every slot decoded each step",
                 buckets ? "step shapes padded to buckets" : "exact step shapes");
    std::fflush(stderr);
    while (!interrupts.requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::fprintf(stderr, "minfer serve: shutting down (running requests may finish for %d s)\n",
                 o.shutdown_timeout_s);
    std::fflush(stderr);
    server.shutdown();
    return Status::ok();
  }();
  server.stop();
  http.join();
  MINFER_RETURN_IF_ERROR(started);
  return served;
}

}  // namespace

int run_serve(std::span<const std::string_view> args) {
  ArgParser p("serve", "-m MODEL.gguf [--host 127.0.0.1] [--port 8080] [options]");
  add_model_options(p);
  add_sampling_options(p);
  p.option("--host", "ADDR", "address to listen on (127.0.0.1)");
  p.option("--port", "N", "port to listen on, 0 for any free one (8080)");
  p.option("-np,--parallel", "N", "sequences served at once (4)");
  p.option("--decode-per-step", "N",
           "sequences decoded per step, taking turns, new prompts first; 0: all "
           "(-1: all on a GPU, 8 on the CPU)");
  p.option("--graph-buckets", "N",
           "1: pad each step to one of a few shapes, so that their graphs are reused; 0: exact "
           "shapes (-1: 1 on a GPU, 0 on the CPU)");
  p.option("-n,--n-predict", "N", "default max tokens of a completion, -1 up to the context (-1)");
  p.option("--api-key", "KEY", "require Authorization: Bearer KEY");
  p.option("-a,--alias", "NAME", "the model's id in responses (its file name)");
  p.option("--timeout", "S",
           "longest request, and longest write of one reply chunk, seconds (600)");
  p.option("--read-timeout", "S", "a whole request (headers and body) must arrive within S s (30)");
  p.option("--max-connections", "N", "open connections in all (1024)");
  p.option("--max-connections-per-client", "N", "open connections from one address (256)");
  p.option("--chat-template-file", "FILE", "a Jinja chat template instead of the model's");
  p.option("--max-queue", "N", "sequences that may wait for a slot; past it 503 (64 x -np)");
  p.option("--threads-http", "N",
           "threads for requests being completed or tokenized; past them 503 "
           "(slots + queue + 32, at most 1024)");
  p.option("--cors", "ORIGIN", "allow browser requests from ORIGIN (or *); off by default");
  p.option("--shutdown-timeout", "S", "on SIGTERM, seconds running requests may finish (30)");
  p.flag("--no-webui", "do not serve the web chat page at /");
  // llama-server flags that have no meaning here: accepted, so that its
  // scripts run unchanged.
  p.flag("--jinja", "accepted (the model's chat template is always used)");
  p.flag("--no-jinja", "accepted and ignored");
  p.flag("--metrics", "accepted and ignored");
  p.flag("--slots", "accepted and ignored");
  p.flag("--no-slots", "accepted and ignored");
  p.flag("-fa,--flash-attn", "accepted and ignored");
  return parse_and_run(p, "serve", args, run);
}

}  // namespace minfer::cli
