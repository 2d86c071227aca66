// Server-side counters and latency histograms, and the Prometheus text of
// GET /metrics (names in vLLM's style, prefix "turbokv:"), joined with the
// engine's own stats (running/waiting, KV pages, preemptions) at scrape time.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/kv_events.h"
#include "turbokv/engine.h"

namespace tkv::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Prometheus lines of NAME_bucket{le=...}, NAME_sum, NAME_count.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last: +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

class Metrics {
 public:
  Metrics();
  void on_submit(int64_t prompt_tokens);
  void on_token(double since_last_token_s);  // since_last < 0: the first token
  void on_finish(const char* reason, const turbokv::Timings& t, int64_t prompt_tokens);
  void on_http_error(int status);
  // kv_events: the --kv-events publisher's counters, or null without it.
  std::string render(const turbokv::Engine& eng, const KvEventsStats* kv_events = nullptr) const;

 private:
  mutable std::mutex mu_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;  // prompt tokens looked up / found cached
  std::map<std::string, int64_t> finished_;       // by finish reason
  std::map<int, int64_t> http_errors_;            // by status
  Histogram ttft_, itl_, e2e_;
};

}  // namespace tkv::server
