// `minfer serve`: the OpenAI-compatible HTTP server (serve/server.h) with
// llama-server's flags. It listens first (so /health answers 503 while the
// model loads), then loads the model and the engine. SIGINT or SIGTERM stops
// it gracefully (new requests get 503, running ones may finish for
// --shutdown-timeout seconds); a second signal ends it at once.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/speculative_options.h"
#include "serve/server.h"

namespace minfer::cli {
namespace {

// llama-server's flags beyond the ones minfer shares with it (llama.cpp's
// tools/server/README.md), so that its command lines run unchanged.
struct ForeignFlag {
  const char* names;
  const char* value;  // "" for a flag without one
  const char* what;   // refused: the feature minfer lacks; accepted: why it changes nothing
};

// Features minfer does not have: refused by name, never ignored, so that a
// command line that needs one fails at once instead of serving without it.
constexpr ForeignFlag kRefusedFlags[] = {
    {"--lora", "FILE", "LoRA adapters"},
    {"--lora-scaled", "FILE:SCALE", "LoRA adapters"},
    {"--control-vector", "FILE", "control vectors"},
    {"-mm,--mmproj", "FILE", "multimodal projectors"},
    {"-mmu,--mmproj-url", "URL", "multimodal projectors"},
    {"--rerank,--reranking", "", "reranking"},
    {"--grammar", "GBNF", "server-wide grammars (a request may give grammar or json_schema)"},
    {"--grammar-file", "FILE", "server-wide grammars (a request may give grammar or json_schema)"},
    {"-j,--json-schema", "SCHEMA", "a server-wide JSON schema (a request may give json_schema)"},
    {"-hf,-hfr,--hf-repo", "REPO", "downloading models (give -m FILE)"},
    {"-mu,--model-url", "URL", "downloading models (give -m FILE)"},
    {"--ssl-key-file", "FILE", "TLS (put a TLS proxy in front)"},
    {"--ssl-cert-file", "FILE", "TLS (put a TLS proxy in front)"},
    {"--api-key-file", "FILE", "API key files (give --api-key KEY)"},
    {"--api-prefix", "PREFIX", "a path prefix for the endpoints"},
    {"--path", "DIR", "serving static files"},
    {"--slot-save-path", "DIR", "saving and restoring slots"},
    {"--context-shift", "", "context shifting (a sequence ends at its context)"},
    {"--props", "", "changing properties through POST /props"},
    {"--tools", "TOOLS", "built-in tools"},
};

// Flags that cannot change anything here: accepted and ignored.
constexpr ForeignFlag kIgnoredFlags[] = {
    {"-ngl,--gpu-layers,--n-gpu-layers", "N", "every layer runs on the one backend"},
    {"-sm,--split-mode", "MODE", "one device"},
    {"-ts,--tensor-split", "LIST", "one device"},
    {"-mg,--main-gpu", "N", "one device"},
    {"-cb,--cont-batching", "", "batching is always continuous"},
    {"-nocb,--no-cont-batching", "", "batching is always continuous"},
    {"--cache-prompt", "", "cached prompt prefixes are always reused"},
    {"--no-cache-prompt", "", "cached prompt prefixes are always reused"},
    {"--cache-reuse", "N", "cached prompt prefixes are always reused"},
    {"--no-context-shift", "", "a sequence always ends at its context"},
    {"--keep", "N", "no context shifting"},
    {"-ub,--ubatch-size", "N", "-b sets the tokens per step"},
    {"-tb,--threads-batch", "N", "-t sets every thread count"},
    {"-kvu,--kv-unified", "", "the KV pool is always shared"},
    {"--warmup", "", "no warm-up run"},
    {"--no-warmup", "", "no warm-up run"},
    {"--mlock", "", "the model file is memory-mapped"},
    {"--no-mmap", "", "the model file is memory-mapped"},
    {"--numa", "TYPE", "no NUMA placement"},
    {"--offline", "", "nothing is downloaded"},
    {"--log-disable", "", "the server logs only its start and stop"},
    {"-sps,--slot-prompt-similarity", "X", "the engine picks cached prefixes itself"},
    {"--sleep-idle-seconds", "S", "the model stays loaded"},
};

// Declared so that they parse (with their value, if they take one) and show
// in --help with what becomes of them.
void add_foreign_flags(ArgParser& p) {
  const auto add = [&p](const ForeignFlag& f, const std::string& help) {
    if (*f.value != 0) {
      p.option(f.names, f.value, help);
    } else {
      p.flag(f.names, help);
    }
  };
  for (const ForeignFlag& f : kIgnoredFlags) add(f, std::string("accepted and ignored: ") + f.what);
  for (const ForeignFlag& f : kRefusedFlags)
    add(f, std::string("refused: minfer has no ") + f.what);
}

// llama-server's -fa takes on|off|auto now (it was a bare flag before); both
// forms mean nothing here, so the value is dropped before parsing.
std::vector<std::string_view> without_flash_attn_values(std::span<const std::string_view> args) {
  std::vector<std::string_view> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    kept.push_back(args[i]);
    const bool fa = args[i] == "-fa" || args[i] == "--flash-attn";
    if (fa && i + 1 < args.size() &&
        (args[i + 1] == "on" || args[i + 1] == "off" || args[i + 1] == "auto")) {
      ++i;
    }
  }
  return kept;
}

Status refuse_foreign_flags(const ArgParser& p) {
  for (const ForeignFlag& f : kRefusedFlags) {
    std::string names = f.names;
    const std::string first = names.substr(0, names.find(','));
    if (!p.has(first)) continue;
    std::replace(names.begin(), names.end(), ',', '/');
    return Status::unimplemented(names + " is not supported by minfer serve: it has no " + f.what);
  }
  return Status::ok();
}

// llama-server's sampling flags that add_sampling_options() does not declare.
Status llama_sampling_flags(const ArgParser& p, runtime::SamplerParams& s) {
  if (p.has("--temperature") && !p.has("--temp")) {
    MINFER_ASSIGN_OR_RETURN(double t, p.get_double("--temperature", s.temperature, -1e9, 1e9));
    s.temperature = static_cast<float>(t);
  }
  MINFER_ASSIGN_OR_RETURN(double presence,
                          p.get_double("--presence-penalty", s.presence_penalty, -2, 2));
  MINFER_ASSIGN_OR_RETURN(double frequency,
                          p.get_double("--frequency-penalty", s.frequency_penalty, -2, 2));
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  return Status::ok();
}

// llama-server's inline --chat-template takes Jinja text or the name of a
// built-in template; minfer renders Jinja only, and would render a name as
// the literal text of every prompt.
Result<std::string> inline_chat_template(const std::string& value) {
  if (value.find("{{") == std::string::npos && value.find("{%") == std::string::npos) {
    return Status::invalid_argument(
        "--chat-template '" + value +
        "': built-in template names are not supported; give the Jinja text, or "
        "--chat-template-file FILE");
  }
  return value;
}

Status run(const ArgParser& p) {
  MINFER_RETURN_IF_ERROR(refuse_foreign_flags(p));
  serve::ServeOptions o;
  o.host = p.get_or("--host", "127.0.0.1");
  MINFER_ASSIGN_OR_RETURN(int64_t port, p.get_int("--port", 8080, 0, 65535));
  o.port = static_cast<int>(port);
  o.alias = p.get_or("--alias", "");
  o.api_key = p.get_or("--api-key", "");
  if (auto text = p.get("--chat-template")) {
    MINFER_ASSIGN_OR_RETURN(o.chat_template, inline_chat_template(*text));
  }
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
  MINFER_RETURN_IF_ERROR(llama_sampling_flags(p, o.sampling));
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
  MINFER_ASSIGN_OR_RETURN(
      o.chat.reasoning_format,
      serve::parse_reasoning_format(p.get_or("--reasoning-format", "auto"), "--reasoning-format"));
  MINFER_ASSIGN_OR_RETURN(int64_t budget, p.get_int("--reasoning-budget", -1, -1, 0));
  o.chat.reasoning_budget = static_cast<int>(budget);
  o.embeddings = p.has("--embedding");
  if (auto pooling = p.get("--pooling")) {
    MINFER_ASSIGN_OR_RETURN(o.pooling, runtime::parse_pooling(*pooling));
  }
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions config, run_options(p, 4096 * slots));
  MINFER_ASSIGN_OR_RETURN(o.speculative, speculative_params(p));

  serve::Server server(o);
  MINFER_RETURN_IF_ERROR(server.bind());
  Interrupts interrupts(Interrupts::Signals::kIntAndTerm);
  Status served;
  std::thread http([&] { served = server.serve(); });
  std::fprintf(stderr, "minfer serve: listening on http://%s:%d\n", o.host.c_str(), server.port());
  std::fflush(stderr);
  auto started = [&]() -> Status {
    MINFER_ASSIGN_OR_RETURN(auto model, load_model(p, /*quiet=*/true));
    runtime::EngineOptions e(config);
    e.n_slots = slots;
    // llama-server's rule: -c is the whole context, split among the slots.
    e.n_ctx = std::min<int64_t>(config.n_ctx / slots, model->hparams().n_ctx_train);
    if (e.n_ctx < 8) {
      return Status::invalid_argument("-c " + std::to_string(config.n_ctx) + " over " +
                                      std::to_string(slots) +
                                      " slots leaves fewer than 8 tokens per sequence");
    }
    e.decode_per_step = decode_per_step;
    e.graph_buckets = static_cast<int>(graph_buckets);
    MINFER_ASSIGN_OR_RETURN(const Speculation spec, speculation(p, *model, e, /*quiet=*/true));
    e.drafter = spec.drafter;  // (a draft model's sessions take the slots' context)
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
  add_speculative_options(p);
  p.option("--host", "ADDR", "address to listen on (127.0.0.1)");
  p.option("--port", "N", "port to listen on, 0 for any free one (8080)");
  p.option("-np,--parallel", "N", "sequences served at once (4)");
  p.option("--decode-per-step", "N",
           "sequences decoded per step, taking turns, new prompts first; 0: all "
           "(-1: all on a GPU, 8 on the CPU)");
  p.option("--graph-buckets", "N",
           "1: pad each step to one of a few shapes, so that their graphs are reused; 0: exact "
           "shapes (-1: 1 on a GPU, 0 on the CPU)");
  p.option("-n,--predict,--n-predict", "N",
           "default max tokens of a completion, -1 up to the context (-1)");
  p.option("--api-key", "KEY", "require Authorization: Bearer KEY");
  p.option("-a,--alias", "NAME", "the model's id in responses (its file name)");
  p.option("-to,--timeout", "S",
           "longest request, and longest write of one reply chunk, seconds (600)");
  p.option("--read-timeout", "S", "a whole request (headers and body) must arrive within S s (30)");
  p.option("--max-connections", "N", "open connections in all (1024)");
  p.option("--max-connections-per-client", "N", "open connections from one address (256)");
  p.option("--chat-template-file", "FILE", "a Jinja chat template instead of the model's");
  p.option("--chat-template", "JINJA", "the same, given inline (built-in template names refused)");
  p.option("--temperature", "T", "same as --temp");
  p.option("--presence-penalty", "X", "default presence penalty, 0 = off (0)");
  p.option("--frequency-penalty", "X", "default frequency penalty, 0 = off (0)");
  p.option("--max-queue", "N", "sequences that may wait for a slot; past it 503 (64 x -np)");
  p.option("--threads-http", "N",
           "threads for requests being completed or tokenized; past them 503 "
           "(slots + queue + 32, at most 1024)");
  p.option("--cors,--cors-origins", "ORIGIN",
           "allow browser requests from ORIGIN (or *); off by default");
  p.option("--shutdown-timeout", "S", "on SIGTERM, seconds running requests may finish (30)");
  p.option("--reasoning-format", "FORMAT",
           "none: thinking stays in the content; deepseek, auto: <think> text goes to "
           "reasoning_content (auto)");
  p.option("--reasoning-budget", "N", "-1: thinking unlimited; 0: thinking off (-1)");
  p.flag("--no-webui,--no-ui", "do not serve the web chat page at /");
  p.flag("--embedding,--embeddings",
         "answer POST /v1/embeddings, /embedding and /embeddings (completions still work)");
  p.option("--pooling", "TYPE",
           "embeddings' pooling: none, mean, cls or last (the model's <arch>.pooling_type, else "
           "none)");
  p.flag("--webui,--ui", "accepted (the page is served unless --no-webui)");
  // llama-server flags that have no meaning here: accepted, so that its
  // scripts run unchanged.
  p.flag("--jinja", "accepted (the model's chat template is always used)");
  p.flag("--no-jinja", "accepted and ignored");
  p.flag("--metrics", "accepted and ignored");
  p.flag("--slots", "accepted and ignored");
  p.flag("--no-slots", "accepted and ignored");
  p.flag("-fa,--flash-attn", "accepted and ignored (so is a following on, off or auto)");
  add_foreign_flags(p);
  const std::vector<std::string_view> kept = without_flash_attn_values(args);
  return parse_and_run(p, "serve", kept, run);
}

}  // namespace minfer::cli
