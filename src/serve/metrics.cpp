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
  out += ttft_.text("minfer_time_to_first_token_seconds",
                    "from the request's arrival to its first token");
  out += inter_token_.text("minfer_inter_token_latency_seconds",
                           "mean time between a completion's tokens");
  out += e2e_.text("minfer_request_latency_seconds", "from the request's arrival to its end");
  return out;
}

}  // namespace minfer::serve
