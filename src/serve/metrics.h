// The server's counters and latency histograms, written in Prometheus's text
// format for GET /metrics.
//
// Contract: every method is thread-safe. Histograms have fixed buckets (in
// seconds, cumulative "le" counts, _sum and _count as Prometheus expects);
// text() adds the engine's gauges (sequences waiting and running, KV pages
// in use, cached and free, prefix-cache hits) to the counters, and the
// llama-server series (llamacpp:*) computed from the same engine counts.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "runtime/engine.h"

namespace minfer::serve {

class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                     0.5,   1,    2.5,   5,    10,  30};
  void observe(double seconds);
  // The metric's lines, named `name`, with its HELP text.
  std::string text(const std::string& name, const std::string& help) const;

 private:
  std::array<uint64_t, kBounds.size() + 1> counts_{};  // the last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  void request(bool ok);
  // One finished completion: its token counts and latencies (first token,
  // mean time between tokens, the whole request; negative: not observed).
  void completion(int64_t prompt_tokens, int64_t completion_tokens, double ttft, double inter_token,
                  double total);
  std::string text(const runtime::EngineStats& engine) const;

 private:
  mutable std::mutex mu_;
  uint64_t requests_ = 0, failed_ = 0;
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  Histogram ttft_, inter_token_, e2e_;
};

}  // namespace minfer::serve
