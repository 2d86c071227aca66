// Shared CLI plumbing: common options and their checks, sampling flags, progress bar.
#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "base/mem_info.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {

// CLI11 validator from one of the flag parsers: the error text lists the valid forms.
template <typename Fn>
CLI::Validator kv_validator(const char* name, Fn fn) {
  return CLI::Validator(
      [fn](std::string& v) -> std::string {
        const Status st = fn(v);
        return st.ok() ? std::string() : st.message();
      },
      "", name);
}

// The --kv-* flags; every value is checked at parse time by the parsers the
// engine config is built with (KvConfig::parse, parse_swa_mode, ...).
void add_kv_options(CLI::App* app, CommonOptions& o) {
  app->add_option(
         "--kv-quant", o.kv_quant,
         "KV cache scheme: bf16 | f16 | 8 | 4 | turbo (= turbo:k8v3) | turbo:k<K>v<V> | "
         "turbo:k<K>rv<V> (keys rotated) | turbo:k<K>sv<V> (keys symmetric, no zero point, "
         "K in 4|5|8; s before r: turbo:k4srv4); a turbo form ending in m fits each value "
         "group's scale to its squared error (turbo:k4rv3m), one ending in a scales each value "
         "group by its signed extreme on a codebook fitted to it (turbo:k8sv4a) | auto[:BITS] "
         "(the scheme of "
         "least measured quality loss within BITS stored bits per element for the model, "
         "default 6.25; printed at start)")
      ->check(kv_validator(
          "KV_SCHEME", [](const std::string& v) { return turbokv::KvConfig::parse(v).status(); }));
  app->add_option("--kv-quant-start", o.kv_quant_start,
                  "Keep the first N tokens of a sequence in bf16")
      ->check(int_range("--kv-quant-start", 0, kNoMax));
  app->add_option("--kv-quant-swa", o.kv_quant_swa, "Sliding-window layers: quant (default) | bf16")
      ->check(kv_validator("SWA", [](const std::string& v) { return parse_swa_mode(v).status(); }));
  app->add_option("--kv-attn", o.kv_attn,
                  "Attention over a quantized cache: fused (default) | reference | verify (fused, "
                  "checked against reference)")
      ->check(
          kv_validator("PATH", [](const std::string& v) { return parse_attn_path(v).status(); }));
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

CLI::Validator int_range(const std::string& name, int64_t lo, int64_t hi) {
  return CLI::Validator(
      [name, lo, hi](std::string& v) -> std::string {
        const std::string range =
            hi == kNoMax ? fmt::format(">= {}", lo) : fmt::format("{} to {}", lo, hi);
        size_t pos = 0;
        long long x = 0;
        try {
          x = std::stoll(v, &pos);
        } catch (...) {
          pos = 0;
        }
        if (pos != v.size() || pos == 0)
          return fmt::format("'{}' is not an integer (valid: {})", v, range);
        if (x < lo || x > hi) return fmt::format("value {} out of range (valid: {})", v, range);
        return std::string();
      },
      "", name);
}

void add_common_options(CLI::App* app, CommonOptions& o) {
  app->add_option("-m,--model", o.model,
                  "GGUF file or short name (smollm2, gemma3, ...; see `turbokv models`); default "
                  "$TKV_MODEL or smollm2");
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  app->add_option("-t,--threads", o.threads, "Threads (0 = all cores)")
      ->check(int_range("--threads", 0, hw));
  add_kv_options(app, o);
  app->add_option("-c,--ctx,--ctx-size", o.ctx,
                  "Context: the most tokens one sequence holds (prompt + output), exactly")
      ->check(int_range("--ctx", 1, kNoMax));
  app->add_option("--device", o.device,
                  "Where the model runs: cpu (default) | cuda (one GPU; bf16 and turbo KV)")
      ->check(kv_validator("DEVICE",
                           [](const std::string& v) { return turbokv::parse_device(v).status(); }));
  app->add_option("--ubatch", o.ubatch, "Prefill chunk size")
      ->check(int_range("--ubatch", 1, 4096));
}

void add_prompt_cache_options(CLI::App* app, CommonOptions& o) {
  app->add_option("--prompt-cache", o.prompt_cache,
                  "Keep the KV of finished prompts in DIR and load it instead of prefilling a "
                  "prompt that starts with one (shared safely by processes; survives restarts)");
  app->add_option("--prompt-cache-size", o.prompt_cache_size,
                  "Size limit of the --prompt-cache directory, least recently used entries "
                  "evicted first, e.g. 4GiB (default)")
      ->check(
          kv_validator("SIZE", [](const std::string& v) { return parse_byte_size(v).status(); }));
}

void add_sampling_options(CLI::App* app, turbokv::SamplingParams& sp) {
  // Ranges are checked after parsing by turbokv::validate (the check submit runs).
  app->add_option("--temp", sp.temperature, "Temperature (0 = greedy)");
  app->add_option("--top-k", sp.top_k, "Top-k (0 = off)");
  app->add_option("--top-p", sp.top_p, "Top-p (1 = off)");
  app->add_option("--min-p", sp.min_p, "Min-p (0 = off)");
  app->add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty (1 = off)");
  app->add_option("--repeat-last-n", sp.repeat_last_n,
                  "Tokens considered by the repetition penalty (-1 = all, 0 = off)");
  app->add_option("--frequency-penalty", sp.frequency_penalty,
                  "Subtract N x (times generated) from a token's logit (0 = off, -2 to 2)");
  app->add_option("--presence-penalty", sp.presence_penalty,
                  "Subtract N from the logit of every token generated so far (0 = off, -2 to 2)");
  app->add_option("--seed", sp.seed, "RNG seed (default: random, printed)")->default_str("random");
}

bool finish_sampling(CLI::App* sub, turbokv::SamplingParams& sp) {
  if (const Status st = turbokv::validate(sp); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return false;
  }
  if (sp.temperature == 0) {
    for (const char* f : {"--top-k", "--top-p", "--min-p", "--seed"})
      warn_no_effect(sub, f, "with --temp 0 (greedy)");
  } else if (sub->count("--seed") == 0) {
    sp.seed = std::random_device{}();
    std::fprintf(stderr, "seed: %llu\n", static_cast<unsigned long long>(sp.seed));
  }
  return true;
}

void warn_no_effect(CLI::App* sub, const std::string& flag, const std::string& why) {
  if (sub->count(flag) > 0)
    std::fprintf(stderr, "warning: %s has no effect %s\n", flag.c_str(), why.c_str());
}

bool check_common(CLI::App* sub, CommonOptions& o, bool one_scheme) {
  if (one_scheme && turbokv::KvConfig::parse(o.kv_quant).value().is_float()) {
    warn_no_effect(sub, "--kv-quant-start",
                   "with a float KV cache (--kv-quant " + o.kv_quant + ")");
  }
  if (o.prompt_cache.empty() && sub->get_option_no_throw("--prompt-cache-size") != nullptr)
    warn_no_effect(sub, "--prompt-cache-size", "without --prompt-cache");
  auto path = resolve_model(o.model);
  if (!path.ok()) {
    std::fprintf(stderr, "error: %s\n", path.status().message().c_str());
    return false;
  }
  o.model = path.value();
  return true;
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
