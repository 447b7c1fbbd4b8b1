#include "serve/metrics.h"

#include <cstdio>

namespace minfer::serve {
namespace {

std::string number(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.9g", v);
  return b;
}

std::string metric(const std::string& name, const char* type, const std::string& help,
                   const std::string& value) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         value + "\n";
}

// The series llama-server exports (tools/server, `--metrics`) under the same
// names, types and meanings, for routers and dashboards that read them. Only
// those the engine's counts give exactly; docs/SERVER_API.md ("Metrics for
// a router") lists the ones left out and why.
std::string llama_server_series(const runtime::EngineStats& e) {
  std::string out;
  out += metric("llamacpp:prompt_tokens_total", "counter",
                "prompt tokens computed (those reused from cached pages not counted)",
                std::to_string(e.prompt_tokens));
  out += metric("llamacpp:prompt_tokens_cached_total", "counter",
                "prompt tokens taken from cached KV pages", std::to_string(e.reused_tokens));
  out += metric("llamacpp:tokens_predicted_total", "counter", "tokens generated",
                std::to_string(e.generated_tokens));
  out += metric("llamacpp:n_decode_total", "counter",
                "engine steps (one forward pass over a batch each)", std::to_string(e.steps));
  // Sequences, as llama-server counts slots and deferred tasks: a request
  // with n choices is n of them.
  out += metric("llamacpp:requests_processing", "gauge", "sequences in the engine's batches",
                std::to_string(e.running));
  out += metric("llamacpp:requests_deferred", "gauge", "sequences waiting for a slot or KV pages",
                std::to_string(e.waiting));
  // Pages held by sequences over all pages: cached pages no sequence holds
  // are evictable, so they count as free (as vLLM's kv_cache_usage_perc).
  const double usage =
      e.pool.pages > 0 ? static_cast<double>(e.pool.referenced) / static_cast<double>(e.pool.pages)
                       : 0.0;
  out += metric("llamacpp:kv_cache_usage_ratio", "gauge",
                "KV pages held by sequences over all pages (0 to 1)", number(usage));
  return out;
}

}  // namespace

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts_[i];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::text(const std::string& name, const std::string& help) const {
  std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + number(kBounds[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_[kBounds.size()];
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
  return out;
}

void Metrics::request(bool ok) {
  std::lock_guard lock(mu_);
  ++requests_;
  failed_ += !ok;
}

void Metrics::completion(int64_t prompt_tokens, int64_t completion_tokens, double ttft,
                         double inter_token, double total) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  completion_tokens_ += static_cast<uint64_t>(completion_tokens);
  if (ttft >= 0) ttft_.observe(ttft);
  if (inter_token >= 0) inter_token_.observe(inter_token);
  if (total >= 0) e2e_.observe(total);
}

std::string Metrics::text(const runtime::EngineStats& e) const {
  std::lock_guard lock(mu_);
  std::string out;
  out += metric("minfer_requests_total", "counter", "completion requests received",
                std::to_string(requests_));
  out += metric("minfer_requests_failed_total", "counter", "completion requests that failed",
                std::to_string(failed_));
  out += metric("minfer_prompt_tokens_total", "counter", "prompt tokens of finished completions",
                std::to_string(prompt_tokens_));
  out += metric("minfer_completion_tokens_total", "counter", "tokens generated",
                std::to_string(completion_tokens_));
  out += metric("minfer_sequences_waiting", "gauge", "requests waiting for a slot or KV pages",
                std::to_string(e.waiting));
  out += metric("minfer_sequences_running", "gauge", "sequences in the engine's batches",
                std::to_string(e.running));
  out += metric("minfer_kv_pages", "gauge", "KV pages in the pool", std::to_string(e.pool.pages));
  out += metric("minfer_kv_pages_used", "gauge", "KV pages held by sequences",
                std::to_string(e.pool.referenced));
  out += metric("minfer_kv_pages_cached", "gauge", "KV pages kept for prefix reuse",
                std::to_string(e.pool.cached));
  out += metric("minfer_prefix_cache_hits_total", "counter", "KV pages reused by later prompts",
                std::to_string(e.pool.prefix_hits));
  out +=
      metric("minfer_engine_steps_total", "counter", "engine steps run", std::to_string(e.steps));
  out += metric("minfer_draft_tokens_total", "counter",
                "speculative decoding: draft tokens verified", std::to_string(e.drafted_tokens));
  out += metric("minfer_draft_tokens_accepted_total", "counter",
                "speculative decoding: draft tokens the target agreed with (kept)",
                std::to_string(e.accepted_tokens));
  out += ttft_.text("minfer_time_to_first_token_seconds",
                    "from the request's arrival to its first token");
  out += inter_token_.text("minfer_inter_token_latency_seconds",
                           "mean time between a completion's tokens");
  out += e2e_.text("minfer_request_latency_seconds", "from the request's arrival to its end");
  out += llama_server_series(e);
  return out;
}

}  // namespace minfer::serve
