// Shared CLI plumbing: common options, engine construction, progress bar.
#include <algorithm>
#include <cstdio>

#include "base/mem_info.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {

// CLI11 validator from one of the kvcache parsers: the error text lists the valid forms.
template <typename Fn>
CLI::Validator kv_validator(const char* name, Fn fn) {
  return CLI::Validator(
      [fn](std::string& v) -> std::string {
        const Status st = fn(v);
        return st.ok() ? std::string() : st.message();
      },
      "", name);
}

// The --kv-* flags; every value is checked at parse time by the kvcache parsers.
void add_kv_options(CLI::App* app, CommonOptions& o) {
  app->add_option("--kv-quant", o.kv_quant,
                  "KV cache scheme: bf16 | f16 | 8 | 4 | turbo (= turbo:k8v3) | turbo:k<K>v<V>")
      ->check(kv_validator("KV_SCHEME",
                           [](const std::string& v) { return kv::check_kv_scheme_syntax(v); }));
  app->add_option("--kv-quant-start", o.kv_quant_start,
                  "Keep the first N tokens of a sequence in bf16")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--kv-quant-swa", o.kv_quant_swa, "Sliding-window layers: quant (default) | bf16")
      ->check(
          kv_validator("SWA", [](const std::string& v) { return kv::parse_swa_mode(v).status(); }));
  app->add_option("--kv-attn", o.kv_attn,
                  "Attention over a quantized cache: fused (default) | reference | verify (fused, "
                  "checked against reference)")
      ->check(kv_validator("PATH",
                           [](const std::string& v) { return kv::parse_attn_path(v).status(); }));
  app->add_option(
         "--kv-key-center", o.kv_key_center,
         "Store keys minus the model's K bias (exact for attention; Qwen2): on (default) | off")
      ->check(CLI::IsMember({"on", "off"}));
  app->add_option("--kv-budget", o.kv_budget,
                  "Most memory the KV cache may take, e.g. 512MiB, 8GiB, 2G (default: half of "
                  "available memory minus the model; bench --kv-report: 8GiB)")
      ->check(
          kv_validator("SIZE", [](const std::string& v) { return parse_byte_size(v).status(); }));
}

}  // namespace

void add_common_options(CLI::App* app, CommonOptions& o) {
  app->add_option("-m,--model", o.model,
                  "GGUF model file (default: SmolLM2-135M-Instruct from the model cache)");
  app->add_option("-t,--threads", o.threads, "Threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  add_kv_options(app, o);
  app->add_option("-c,--ctx", o.ctx, "KV cache capacity in tokens")->check(CLI::PositiveNumber);
  app->add_option("--ubatch", o.ubatch, "Prefill chunk size")->check(CLI::Range(1, 4096));
}

void add_sampling_options(CLI::App* app, sampling::SamplerParams& sp) {
  app->add_option("--temp", sp.temperature, "Temperature (0 = greedy)");
  app->add_option("--top-k", sp.top_k, "Top-k (0 = off)");
  app->add_option("--top-p", sp.top_p, "Top-p (1 = off)");
  app->add_option("--min-p", sp.min_p, "Min-p (0 = off)");
  app->add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty (1 = off)");
  app->add_option("--repeat-last-n", sp.repeat_last_n,
                  "Tokens considered by the repetition penalty");
  app->add_option("--seed", sp.seed, "RNG seed");
}

std::unique_ptr<runtime::Engine> make_engine(const CommonOptions& o) {
  runtime::EngineOptions eo;
  eo.model_path = o.model.empty() ? runtime::default_model_path() : o.model;
  eo.n_threads = o.threads;
  eo.ubatch = o.ubatch;
  eo.key_center = o.kv_key_center == "on";
  eo.cache.scheme = o.kv_quant;
  eo.cache.quant_start = o.kv_quant_start;
  eo.cache.swa_bf16 = kv::parse_swa_mode(o.kv_quant_swa).value();  // validated at parse time
  eo.cache.attn = kv::parse_attn_path(o.kv_attn).value();
  eo.cache.max_chunk_tokens = std::max<int64_t>(o.ubatch, 1);
  eo.cache.max_tokens = o.ctx;
  eo.cache.max_seqs = 4;
  if (!o.kv_budget.empty()) eo.kv_budget_bytes = parse_byte_size(o.kv_budget).value();
  auto r = runtime::Engine::create(eo);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return nullptr;
  }
  return std::move(r).value();
}

void progress_bar(int64_t done, int64_t total) {
  if (total < 256) return;
  const int width = 40;
  const int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "\rprefill [%.*s%*s] %lld/%lld", filled,
               "========================================", width - filled, "",
               static_cast<long long>(done), static_cast<long long>(total));
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace tkv::cli
