// Prometheus text for GET /metrics (see metrics.h). Counters end in _total;
// the KV figures are the engine's full-attention pool at scrape time. The load
// figures routers read are also given under vLLM's names (docs/scale-out.md).
#include "server/metrics.h"

#include <cstdio>

namespace tkv::server {
namespace {

std::string fmt_num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void head(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string& out, const std::string& name, const char* type, const char* help,
            double v) {
  head(out, name, type, help);
  out += name + " " + fmt_num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + fmt_num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(n_) + "\n";
  out += name + "_sum " + fmt_num(sum_) + "\n" + name + "_count " + std::to_string(n_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
             20, 40, 80}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
            1, 2.5, 5, 10}),
      e2e_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480}) {}

void Metrics::on_submit(int64_t prompt_tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += prompt_tokens;
}

void Metrics::on_token(double since_last_token_s) {
  std::lock_guard<std::mutex> lk(mu_);
  ++generation_tokens_;
  if (since_last_token_s >= 0) itl_.observe(since_last_token_s);
}

void Metrics::on_finish(const char* reason, const turbokv::Timings& t, int64_t prompt_tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  ++finished_[reason];
  prefix_queries_ += prompt_tokens;
  prefix_hits_ += t.cached_tokens;
  if (t.generated_tokens > 0) ttft_.observe(t.ttft_ms / 1000.0);
  e2e_.observe((t.ttft_ms + t.decode_ms) / 1000.0);
}

void Metrics::on_http_error(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++http_errors_[status];
}

std::string Metrics::render(const turbokv::Engine& eng, const KvEventsStats* kv_events) const {
  const turbokv::EngineStats st = eng.stats();
  const turbokv::KvInfo kv = eng.kv_info();
  const double page_bytes = static_cast<double>(kv.page_size) * kv.bytes_per_token;
  const double usage =
      st.kv_pages_total > 0 ? static_cast<double>(st.kv_pages_used) / st.kv_pages_total : 0;
  std::string o;
  scalar(o, "turbokv:num_requests_running", "gauge", "Sequences in the engine's batch.",
         st.running);
  scalar(o, "turbokv:num_requests_waiting", "gauge", "Sequences queued for the batch.", st.waiting);
  scalar(o, "turbokv:kv_cache_usage_perc", "gauge", "Fraction of KV pages in use (0 to 1).", usage);
  // The same three under the names the Gateway API inference extension and
  // vLLM-aware routers scrape (vllm:gpu_cache_usage_perc: vLLM before 0.10).
  scalar(o, "vllm:num_requests_running", "gauge", "= turbokv:num_requests_running.", st.running);
  scalar(o, "vllm:num_requests_waiting", "gauge", "= turbokv:num_requests_waiting.", st.waiting);
  scalar(o, "vllm:kv_cache_usage_perc", "gauge", "= turbokv:kv_cache_usage_perc.", usage);
  scalar(o, "vllm:gpu_cache_usage_perc", "gauge", "= turbokv:kv_cache_usage_perc (old name).",
         usage);
  head(o, "vllm:cache_config_info", "gauge", "KV cache configuration (block_size in tokens).");
  o += "vllm:cache_config_info{block_size=\"" + std::to_string(kv.page_size) + "\"} 1\n";
  scalar(o, "turbokv:prefix_cache_blocks", "gauge",
         "Full KV blocks in the prefix cache (what --kv-events reported stored, less removed).",
         st.prefix_cache_blocks);
  scalar(o, "turbokv:prefix_cache_evictions_total", "counter",
         "Cached KV blocks evicted to make room.", st.prefix_cache_evictions);
  if (kv_events != nullptr) {
    scalar(o, "turbokv:kv_events_batches_published_total", "counter",
           "KV event batches sent on --kv-events.", kv_events->batches_published);
    scalar(o, "turbokv:kv_events_published_total", "counter", "KV events sent on --kv-events.",
           kv_events->events_published);
    scalar(o, "turbokv:kv_events_dropped_total", "counter",
           "KV events dropped because the publisher's queue was full.", kv_events->events_dropped);
  }
  scalar(o, "turbokv:kv_pages_total", "gauge", "KV pages in the pool.", st.kv_pages_total);
  scalar(o, "turbokv:kv_pages_used", "gauge", "KV pages held by sequences.", st.kv_pages_used);
  scalar(o, "turbokv:kv_pages_free", "gauge", "KV pages not held by a sequence.", st.kv_pages_free);
  scalar(o, "turbokv:kv_bytes_used", "gauge", "KV bytes held by sequences.",
         st.kv_pages_used * page_bytes);
  scalar(o, "turbokv:kv_bytes_free", "gauge", "KV bytes not held by a sequence.",
         st.kv_pages_free * page_bytes);
  scalar(o, "turbokv:kv_bytes_per_token", "gauge", "KV bytes one token takes (all layers).",
         static_cast<double>(kv.bytes_per_token));
  scalar(o, "turbokv:num_preemptions_total", "counter", "Sequences preempted (KV freed).",
         st.preemptions);
  scalar(o, "turbokv:spec_decode_num_draft_tokens_total", "counter",
         "Draft tokens verified by speculative decoding (--spec).", st.spec_drafted_tokens);
  scalar(o, "turbokv:spec_decode_num_accepted_tokens_total", "counter",
         "Draft tokens speculative decoding kept.", st.spec_accepted_tokens);
  scalar(o, "turbokv:prompt_cache_disk_hits_total", "counter",
         "Prompts whose first KV pages were loaded from --prompt-cache.", st.prompt_cache_hits);
  scalar(o, "turbokv:prompt_cache_disk_tokens_total", "counter",
         "Prompt tokens loaded from --prompt-cache instead of prefilled.", st.prompt_cache_tokens);
  scalar(o, "turbokv:prompt_cache_disk_writes_total", "counter",
         "KV page blocks written to --prompt-cache.", st.prompt_cache_writes);
  scalar(o, "turbokv:prompt_cache_disk_errors_total", "counter",
         "Block writes to --prompt-cache that failed (disk full, ...).",
         st.prompt_cache_write_errors);
  scalar(o, "turbokv:prompt_cache_disk_skipped_total", "counter",
         "Corrupt or foreign --prompt-cache blocks refused and removed.", st.prompt_cache_skipped);
  scalar(o, "turbokv:prompt_cache_disk_evictions_total", "counter",
         "--prompt-cache blocks evicted (LRU).", st.prompt_cache_evictions);
  scalar(o, "turbokv:prompt_cache_disk_bytes", "gauge",
         "Bytes of the --prompt-cache directory's blocks.", st.prompt_cache_bytes);
  std::lock_guard<std::mutex> lk(mu_);
  scalar(o, "turbokv:prompt_tokens_total", "counter", "Prompt tokens submitted.", prompt_tokens_);
  scalar(o, "turbokv:generation_tokens_total", "counter", "Tokens generated.", generation_tokens_);
  scalar(o, "turbokv:prefix_cache_queries_total", "counter",
         "Prompt tokens of finished requests looked up in the prefix cache.", prefix_queries_);
  scalar(o, "turbokv:prefix_cache_hits_total", "counter",
         "Prompt tokens of finished requests found in the prefix cache.", prefix_hits_);
  scalar(o, "turbokv:prefix_cache_hit_ratio", "gauge", "prefix_cache_hits / prefix_cache_queries.",
         prefix_queries_ > 0 ? static_cast<double>(prefix_hits_) / prefix_queries_ : 0);
  head(o, "turbokv:request_success_total", "counter", "Finished requests by finish reason.");
  for (const auto& [reason, n] : finished_)
    o += "turbokv:request_success_total{finished_reason=\"" + reason + "\"} " + std::to_string(n) +
         "\n";
  head(o, "turbokv:http_errors_total", "counter", "Error responses by HTTP status.");
  for (const auto& [status, n] : http_errors_)
    o += "turbokv:http_errors_total{status=\"" + std::to_string(status) + "\"} " +
         std::to_string(n) + "\n";
  head(o, "turbokv:time_to_first_token_seconds", "histogram", "Submit to first token.");
  ttft_.render("turbokv:time_to_first_token_seconds", o);
  head(o, "turbokv:inter_token_latency_seconds", "histogram", "Between consecutive tokens.");
  itl_.render("turbokv:inter_token_latency_seconds", o);
  head(o, "turbokv:e2e_request_latency_seconds", "histogram", "Submit to finish.");
  e2e_.render("turbokv:e2e_request_latency_seconds", o);
  return o;
}

}  // namespace tkv::server
