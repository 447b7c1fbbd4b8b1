// `minfer chat`: an interactive conversation on stdin/stdout, in the model's
// own chat template (tokenizer.chat_template) or, for files without one, the
// built-in format (runtime/chat_formatter.h). The KV cache is kept between
// turns: each turn evaluates only the tokens that differ from what the cache
// already holds (runtime/prompt_cache.h).
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
#include "runtime/prompt_cache.h"

namespace minfer::cli {
namespace {

// One turn: the whole conversation's prompt, of which only what the cache
// does not hold is evaluated (runtime::PromptCache), then the reply.
Status chat_turn(runtime::Session& session, runtime::Sampler& sampler,
                 const tokenizer::Tokenizer& tok, const std::string& text,
                 runtime::PromptCache& cache, int64_t n_predict, const Interrupts& interrupts,
                 std::string& reply) {
  auto ids = runtime::encode_prompt(tok, text);
  if (!ids) return ids.status().with_context("message");
  const int64_t room = session.n_ctx() - static_cast<int64_t>(ids->size());
  if (room < 1) {
    return Status::out_of_range(
        "the conversation no longer fits in the context (-c); /reset starts over");
  }
  const std::span<const int32_t> fresh = cache.prepare(session, *ids);
  tokenizer::Detokenizer detok(tok, /*render_special=*/false);
  sampler.reset();
  std::vector<int32_t> generated;
  Status written;  // a failed write ends the chat: nobody reads the reply
  auto stats =
      runtime::generate(session, sampler, fresh, std::min(n_predict, room), [&](int32_t t) {
        generated.push_back(t);
        const std::string piece = detok.push(t);
        reply += piece;
        written = write_stdout(piece);
        return written.is_ok() && !interrupts.requested();
      });
  MINFER_RETURN_IF_ERROR(written);
  const std::string rest = detok.flush();
  reply += rest;
  MINFER_RETURN_IF_ERROR(write_stdout(rest + "\n"));
  if (!stats) return stats.status();
  // The prompt's rest and the replies but the last (sampled, not evaluated).
  std::vector<int32_t> evaluated(fresh.begin(), fresh.end());
  if (!generated.empty()) generated.pop_back();
  evaluated.insert(evaluated.end(), generated.begin(), generated.end());
  cache.commit(session, evaluated);
  return Status::ok();
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
  MINFER_ASSIGN_OR_RETURN(runtime::Sampler sampler, runtime::Sampler::create(sp));
  MINFER_ASSIGN_OR_RETURN(runtime::SessionOptions so, session_options(p, 4096));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p));
  so.n_ctx = std::min<int64_t>(so.n_ctx, model->hparams().n_ctx_train);
  MINFER_ASSIGN_OR_RETURN(auto session, runtime::Session::create(*model, so));
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
  std::vector<runtime::ChatMessage> messages;
  if (auto sys = p.get("--system")) messages.push_back({"system", *sys});
  const size_t n_fixed = messages.size();
  runtime::PromptCache cache;
  while (auto line = read_line()) {
    interrupts.clear();
    if (line->empty() || *line == "/exit") break;
    if (*line == "/reset") {
      messages.resize(n_fixed);
      cache.clear();
      session->reset();
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
    const Status s = prompt ? chat_turn(*session, sampler, model->tokenizer(), *prompt, cache,
                                        n_predict, interrupts, reply)
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
