// `minfer batched-bench`: many sequences decoded together on the Engine, with
// llama-batched-bench's tests and columns. For each (PP, TG, B): B sequences
// of PP prompt tokens each generate TG tokens, all in one engine.
//   T_PP: from the first step until every sequence has its first token
//         (prefill, chunked by -b); S_PP = B * PP / T_PP.
//   T_TG: the rest; S_TG = B * (TG - 1) / T_TG (the first tokens came with
//         the prefill). T and S: the whole run, B * (PP + TG) tokens.
//   TTFT: the mean time from the start to each sequence's first token.
// -pps: every sequence has the same prompt, computed once beforehand by a
// warm-up sequence, so the batch measures prefix reuse (its TTFT against a
// run without -pps is the reuse's effect).
// --prefix N: only the first N prompt tokens are the same for every sequence
// (a shared system prompt), the other PP - N each sequence's own; with -pps
// the N are what the warm-up computes. Default: all PP with -pps, none
// without.
// --spec ngram / -md FILE: the sequences speculate (docs/ENGINE.md
// "Speculative decoding"); each case then adds a line with the drafts
// verified and kept and the tokens per decoding step (JSON: draft_n,
// draft_n_accepted, tokens_per_step).
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/output.h"
#include "cli/speculative_options.h"
#include "cli/value_list.h"
#include "runtime/engine.h"

namespace minfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  int64_t pp = 0, tg = 0, b = 0;
  int64_t prefix = 0;  // prompt tokens every sequence shares
};

struct Timing {
  double t_pp = 0, t_tg = 0, ttft_mean = 0;
  double forward = 0;  // seconds in forward passes (the rest is the engine's host work)
  int64_t reused = 0;
  // Speculative decoding: drafts verified and kept; tokens and the steps
  // that decoded them, summed over the sequences.
  int64_t drafted = 0, accepted = 0, generated = 0, decode_steps = 0;
};

std::vector<int32_t> bench_prompt(int64_t n, int64_t n_vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 12345;
  for (auto& id : t) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(n_vocab));
  }
  return t;
}

// Runs every sequence of one case to its end and times it.
Result<Timing> run_case(runtime::Engine& e, const Case& c, bool shared, int64_t n_vocab,
                        const runtime::SpeculativeParams& spec) {
  runtime::SamplerParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> common = bench_prompt(c.prefix, n_vocab, 7);
  // Untimed warm-up, as llama-batched-bench's: a short sequence through
  // prefill and decode (the CPU backend packs its weights on first use).
  MINFER_RETURN_IF_ERROR(e.add({bench_prompt(2, n_vocab, 3), greedy, 2}).status());
  while (!e.idle()) MINFER_RETURN_IF_ERROR(e.step().status());
  if (shared && c.prefix > 0) {  // compute the prefix once, so that its pages are cached
    MINFER_RETURN_IF_ERROR(e.add({common, greedy, 1}).status());
    while (!e.idle()) MINFER_RETURN_IF_ERROR(e.step().status());
  }
  const double forward_before = e.stats().forward_seconds;
  std::map<runtime::SequenceId, double> first_token;
  for (int64_t i = 0; i < c.b; ++i) {
    std::vector<int32_t> prompt = common;
    const auto own = bench_prompt(c.pp - c.prefix, n_vocab, 100 + static_cast<uint64_t>(i));
    prompt.insert(prompt.end(), own.begin(), own.end());
    // Ignoring end-of-generation tokens is not possible here; greedy
    // decoding of a random prompt rarely meets one, and T_TG counts what ran.
    runtime::Request r(std::move(prompt), greedy, c.tg);
    r.speculative = spec;
    MINFER_RETURN_IF_ERROR(e.add(std::move(r)).status());
  }
  std::map<runtime::SequenceId, runtime::SequenceEvent> last;
  Timing t;
  const auto t0 = Clock::now();
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  while (!e.idle()) {
    MINFER_ASSIGN_OR_RETURN(auto events, e.step());
    for (const auto& ev : events) {  // a sequence's first event: its first token (or its end)
      if (!first_token.count(ev.id)) {
        first_token[ev.id] = since();
        t.reused += ev.reused_tokens;
      }
      last[ev.id] = ev;
    }
    if (static_cast<int64_t>(first_token.size()) == c.b && t.t_pp == 0) t.t_pp = since();
  }
  t.t_tg = since() - t.t_pp;
  t.forward = e.stats().forward_seconds - forward_before;
  for (const auto& [id, ev] : last) {
    t.drafted += ev.drafted;
    t.accepted += ev.draft_accepted;
    t.generated += ev.generated;
    t.decode_steps += ev.decode_steps;
  }
  for (const auto& [id, s] : first_token) t.ttft_mean += s / static_cast<double>(c.b);
  return t;
}

double tokens_per_step(const Timing& t) {
  return t.decode_steps > 0 ? static_cast<double>(t.generated) / static_cast<double>(t.decode_steps)
                            : 0.0;
}

// One line of JSON per case (llama-batched-bench's jsonl field names, plus
// ttft and reused).
Status print_json(const Case& c, const Timing& t, const runtime::EngineOptions& o, bool shared,
                  bool speculative) {
  const double pp_tokens = static_cast<double>(c.b * c.pp);
  const double tg_tokens = static_cast<double>(c.b * (c.tg - 1));
  const double total = t.t_pp + t.t_tg;
  char line[640];
  std::snprintf(
      line, sizeof(line),
      "{\"n_kv_max\": %lld, \"n_batch\": %lld, \"is_pp_shared\": %d, "
      "\"n_threads\": %d, \"pp\": %lld, \"tg\": %lld, \"pl\": %lld, \"n_kv\": %lld, "
      "\"t_pp\": %.6f, \"speed_pp\": %.3f, \"t_tg\": %.6f, \"speed_tg\": %.3f, "
      "\"t\": %.6f, \"speed\": %.3f, \"ttft\": %.6f, \"reused\": %lld, \"t_forward\": %.6f, "
      "\"prefix\": %lld",
      static_cast<long long>(o.n_ctx * o.n_slots), static_cast<long long>(o.max_batch),
      shared ? 1 : 0, o.n_threads, static_cast<long long>(c.pp), static_cast<long long>(c.tg),
      static_cast<long long>(c.b), static_cast<long long>(c.b * (c.pp + c.tg)), t.t_pp,
      t.t_pp > 0 ? pp_tokens / t.t_pp : 0.0, t.t_tg, t.t_tg > 0 ? tg_tokens / t.t_tg : 0.0, total,
      total > 0 ? (pp_tokens + tg_tokens + static_cast<double>(c.b)) / total : 0.0, t.ttft_mean,
      static_cast<long long>(t.reused), t.forward, static_cast<long long>(c.prefix));
  std::string out = line;
  if (speculative) {
    std::snprintf(line, sizeof(line),
                  ", \"draft_n\": %lld, \"draft_n_accepted\": %lld, \"tokens_per_step\": %.3f",
                  static_cast<long long>(t.drafted), static_cast<long long>(t.accepted),
                  tokens_per_step(t));
    out += line;
  }
  return write_stdout(out + "}\n");
}

Status print_speculation(const Timing& t) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "speculative: %lld drafted, %lld accepted (%.1f%%), %.2f tokens per step\n",
                static_cast<long long>(t.drafted), static_cast<long long>(t.accepted),
                t.drafted > 0
                    ? 100.0 * static_cast<double>(t.accepted) / static_cast<double>(t.drafted)
                    : 0.0,
                tokens_per_step(t));
  return write_stdout(line);
}

Status print_row(const Case& c, const Timing& t) {
  const double pp_tokens = static_cast<double>(c.b * c.pp);
  const double tg_tokens = static_cast<double>(c.b * (c.tg - 1));
  const double total = t.t_pp + t.t_tg;
  char line[256];
  std::snprintf(
      line, sizeof(line),
      "| %6lld | %6lld | %4lld | %6lld | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f | "
      "%8.3f | %6lld | %5.1f |\n",
      static_cast<long long>(c.pp), static_cast<long long>(c.tg), static_cast<long long>(c.b),
      static_cast<long long>(c.b * (c.pp + c.tg)), t.t_pp, t.t_pp > 0 ? pp_tokens / t.t_pp : 0.0,
      t.t_tg, t.t_tg > 0 ? tg_tokens / t.t_tg : 0.0, total,
      total > 0 ? (pp_tokens + tg_tokens + static_cast<double>(c.b)) / total : 0.0, t.ttft_mean,
      static_cast<long long>(t.reused), total > 0 ? 100.0 * t.forward / total : 0.0);
  return write_stdout(line);
}

Result<std::vector<Case>> cases(const ArgParser& p, bool shared) {
  auto list = [&](const char* flag, const char* fallback, int64_t min) {
    return parse_value_list(p.spelled(flag), p.get_or(flag, fallback), min, kMaxContext);
  };
  MINFER_ASSIGN_OR_RETURN(auto pps, list("-npp", "128", 1));
  MINFER_ASSIGN_OR_RETURN(auto tgs, list("-ntg", "32", 1));
  MINFER_ASSIGN_OR_RETURN(auto bs, list("-npl", "1,2,4", 1));
  const bool has_prefix = p.has("--prefix");
  MINFER_ASSIGN_OR_RETURN(int64_t prefix, p.get_int("--prefix", 0, 0, kMaxContext));
  std::vector<Case> out;
  for (int64_t pp : pps) {
    if (prefix > pp) {
      return Status::invalid_argument(p.spelled("--prefix") + " is longer than the prompt (PP " +
                                      std::to_string(pp) + ")");
    }
    const int64_t shared_tokens = has_prefix ? prefix : (shared ? pp : 0);
    for (int64_t tg : tgs) {
      for (int64_t b : bs) out.push_back({pp, tg, b, shared_tokens});
    }
  }
  return out;
}

Status run(const ArgParser& p) {
  const bool shared = p.has("-pps");
  MINFER_ASSIGN_OR_RETURN(std::vector<Case> all, cases(p, shared));
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions config, run_options(p, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(int64_t page_size, p.get_int("--page-size", 16, 1, 4096));
  const bool json = p.has("--json");
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p, /*quiet=*/json));
  MINFER_ASSIGN_OR_RETURN(const Speculation spec, speculation(p, *model, config, json));
  if (!json)
    MINFER_RETURN_IF_ERROR(write_stdout(
        "|     PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s "
        "|    S t/s |   TTFT s | reused | fwd % |\n|--------|--------|------|--------|----------|"
        "----------|----------|----------|----------|----------|----------|--------|-------|\n"));
  for (const Case& c : all) {
    runtime::EngineOptions o(config);
    o.n_slots = c.b;
    o.n_ctx = c.pp + c.tg + 1;  // each sequence's context (-c may give more)
    if (p.has("--ctx-size") && config.n_ctx < o.n_ctx) {
      return Status::invalid_argument(p.spelled("--ctx-size") + ": PP " + std::to_string(c.pp) +
                                      " + TG " + std::to_string(c.tg) + " need " +
                                      std::to_string(o.n_ctx) + " tokens per sequence");
    }
    if (p.has("--ctx-size")) o.n_ctx = config.n_ctx;
    o.page_size = page_size;
    o.await_shared_prefill = !p.has("--no-await-prefill");
    o.drafter = spec.drafter;
    MINFER_ASSIGN_OR_RETURN(auto engine, runtime::Engine::create(*model, o));
    MINFER_ASSIGN_OR_RETURN(Timing t,
                            run_case(*engine, c, shared, model->hparams().n_vocab, spec.params));
    MINFER_RETURN_IF_ERROR(json ? print_json(c, t, o, shared, spec.on()) : print_row(c, t));
    if (spec.on() && !json) MINFER_RETURN_IF_ERROR(print_speculation(t));
    if (!engine->op_profile().empty()) {
      std::fprintf(stderr, "%s", engine->op_profile().table().c_str());
    }
  }
  return Status::ok();
}

}  // namespace

int run_batched_bench(std::span<const std::string_view> args) {
  ArgParser p("batched-bench", "-m MODEL.gguf [-npp 128] [-ntg 32] [-npl 1,2,4] [-pps]");
  add_model_options(p);
  p.option("-npp,--n-prompt", "LIST", "prompt tokens per sequence (128)");
  p.option("-ntg,--n-gen", "LIST", "generated tokens per sequence (32)");
  p.option("-npl,--n-parallel", "LIST", "sequences decoded together (1,2,4)");
  p.option("--page-size", "N", "cells per KV page (16)");
  p.flag("-pps,--prompt-shared", "every sequence has the same prompt, already cached");
  p.option("--prefix", "N",
           "only the first N prompt tokens are shared (computed beforehand with -pps); the "
           "rest are each sequence's own (all with -pps, none without)");
  add_speculative_options(p);
  p.flag("--no-await-prefill",
         "sequences whose prompts share a prefix all compute it, instead of the later ones "
         "waiting for the first one's pages");
  p.flag("--json",
         "one JSON object per case (llama-batched-bench's jsonl names; t_forward: seconds in "
         "forward passes, the fwd % column)");
  return parse_and_run(p, "batched-bench", args, run);
}

}  // namespace minfer::cli
