// `minfer chat`: an interactive conversation on stdin/stdout, in the model's
// own chat template (tokenizer.chat_template) or, for files without one, the
// built-in format (runtime/chat_formatter.h). It runs on a one-slot engine:
// each turn is a request for the whole conversation, whose pages the last
// turn left cached are reused (runtime/engine.h), so a turn computes little
// more than its new message. A harmony model (gpt-oss) shows its final
// channel only: the analysis stays hidden and out of the history, whose
// earlier reasoning the template drops anyway.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "base/utf8.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/output.h"
#include "runtime/chat_formatter.h"
#include "runtime/generate.h"
#include "serve/harmony.h"

namespace minfer::cli {
namespace {

// One turn: the whole conversation's prompt as one request (the pages the
// conversation so far left in the pool are reused), then the reply.
// `harmony`: the reply is read as harmony messages, and `reply` and the
// screen get its answer alone.
Status chat_turn(runtime::Engine& engine, const runtime::SamplerParams& sampling,
                 const std::string& text, int64_t n_predict, const Interrupts& interrupts,
                 bool harmony, std::string& reply) {
  const tokenizer::Tokenizer& tok = engine.model().tokenizer();
  auto ids = runtime::encode_prompt(tok, text);
  if (!ids) return ids.status().with_context("message");
  const int64_t room = engine.options().n_ctx - static_cast<int64_t>(ids->size());
  if (room < 1) {
    return Status::out_of_range(
        "the conversation no longer fits in the context (-c); /reset starts over");
  }
  tokenizer::Detokenizer detok(tok, /*render_special=*/false);
  std::optional<serve::HarmonyStream> channels;
  if (harmony) channels.emplace();
  // The text to show and keep: a harmony reply's answer, else all of it.
  const auto shown = [&](std::string piece, bool last) {
    if (!channels) return piece;
    std::string answer = channels->push(piece).content;
    if (last) answer += channels->finish().content;
    return answer;
  };
  Status written;  // a failed write ends the chat: nobody reads the reply
  auto stats = runtime::generate(engine, {std::move(*ids), sampling, std::min(n_predict, room)},
                                 [&](int32_t t) {
                                   const std::string piece = shown(detok.push(t), false);
                                   reply += piece;
                                   written = write_stdout(piece);
                                   return written.is_ok() && !interrupts.requested();
                                 });
  MINFER_RETURN_IF_ERROR(written);
  const std::string rest = shown(detok.flush(), true);
  reply += rest;
  MINFER_RETURN_IF_ERROR(write_stdout(rest + "\n"));
  return stats.status();
}

// One line from the user: '\r' of CRLF input stripped; nullopt at the end
// of input. The "> " marker goes to stderr, and only when a person types.
std::optional<std::string> read_line() {
  if (::isatty(STDIN_FILENO)) {
    std::fputs("> ", stderr);
    std::fflush(stderr);
  }
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

void report_turn_error(const Status& s) {
  std::fprintf(stderr, "minfer chat: %s\n", printable_text(s.message()).c_str());
}

Status run(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(int64_t n_predict, p.get_int("--n-predict", 512, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(runtime::SamplerParams sp, sampler_params(p));
  MINFER_RETURN_IF_ERROR(runtime::Sampler::create(sp).status());  // bad settings first
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions config, run_options(p, 4096));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p));
  config.n_ctx = std::min<int64_t>(config.n_ctx, model->hparams().n_ctx_train);
  MINFER_ASSIGN_OR_RETURN(auto engine, solo_engine(*model, config));
  runtime::ChatFormatter formatter = runtime::ChatFormatter::for_model(*model);
  if (auto path = p.get("--chat-template-file")) {
    MINFER_ASSIGN_OR_RETURN(std::string source, read_text_file(*path, "chat template file"));
    auto f = runtime::ChatFormatter::with_template(*model, source);
    if (!f) return f.status().with_context("chat template file '" + *path + "'");
    formatter = std::move(*f);
  }
  Interrupts interrupts;  // before the banner: who waits for it may signal
  std::fprintf(stderr,
               "chat format: %s, seed %llu. Type a message; an empty line, /exit or EOF ends, "
               "/reset starts over, Ctrl-C stops a reply (twice: quits).\n",
               formatter.name().c_str(), static_cast<unsigned long long>(sp.seed));
  const bool harmony = serve::is_harmony_template(formatter.template_source());
  std::vector<runtime::ChatMessage> messages;
  if (auto sys = p.get("--system")) messages.push_back({"system", *sys});
  const size_t n_fixed = messages.size();
  while (auto line = read_line()) {
    interrupts.clear();
    if (line->empty() || *line == "/exit") break;
    if (*line == "/reset") {
      messages.resize(n_fixed);
      std::fprintf(stderr, "(conversation reset)\n");
      continue;
    }
    if (const size_t bad = find_invalid_utf8(*line); bad != kUtf8Valid) {
      report_turn_error(Status::invalid_argument("message: invalid UTF-8 at byte " +
                                                 std::to_string(bad) + " of the line"));
      continue;
    }
    messages.push_back({"user", *line});
    std::string reply;
    auto prompt = formatter.render(messages);
    const Status s = prompt ? chat_turn(*engine, sp, *prompt, n_predict, interrupts, harmony, reply)
                            : prompt.status();
    if (s.code() == StatusCode::kIoError) return s;  // nobody reads the replies
    if (!s) {  // this turn failed; the conversation goes on without it
      report_turn_error(s);
      messages.pop_back();
      continue;
    }
    messages.push_back({"assistant", reply});  // a reply cut by Ctrl-C counts as given
  }
  return Status::ok();
}

}  // namespace

int run_chat(std::span<const std::string_view> args) {
  ArgParser p("chat", "-m MODEL.gguf [options]");
  add_model_options(p);
  p.option("--system", "TEXT", "system message");
  p.option("--chat-template-file", "FILE",
           "a Jinja chat template to use instead of the model's (HF apply_chat_template "
           "semantics)");
  p.option("-n,--n-predict", "N", "most tokens per reply (512)");
  add_sampling_options(p);
  return parse_and_run(p, "chat", args, run);
}

}  // namespace minfer::cli
