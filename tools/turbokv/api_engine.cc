// The CLI's side of the public API (include/turbokv/): the --kv-* spellings, an
// Engine built from the common options, and the summaries printed from it.
#include <cstdio>

#include "base/mem_info.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {

Result<bool> parse_swa_mode(const std::string& text) {
  if (text == "quant") return false;
  if (text == "bf16") return true;
  return invalid_argument("[cli] unknown --kv-quant-swa '{}' (valid: quant | bf16)", text);
}

Result<turbokv::AttnPath> parse_attn_path(const std::string& text) {
  if (text == "fused") return turbokv::AttnPath::kFused;
  if (text == "reference") return turbokv::AttnPath::kReference;
  if (text == "verify") return turbokv::AttnPath::kVerify;
  return invalid_argument("[cli] unknown --kv-attn '{}' (valid: fused | reference | verify)", text);
}

turbokv::EngineConfig engine_config(const CommonOptions& o, int max_seqs) {
  turbokv::EngineConfig c;
  c.model_path = o.model;
  c.kv = turbokv::KvConfig::parse(o.kv_quant).value();  // validated at parse time
  c.context = o.ctx;
  c.max_seqs = max_seqs;
  c.threads = o.threads;
  if (!o.kv_budget.empty()) c.kv_budget_bytes = parse_byte_size(o.kv_budget).value();
  c.step_tokens = std::max<int64_t>(o.ubatch, max_seqs);
  c.quant_start = o.kv_quant_start;
  c.swa_bf16 = parse_swa_mode(o.kv_quant_swa).value();  // validated at parse time
  c.attn = parse_attn_path(o.kv_attn).value();
  c.key_center = o.kv_key_center == "on";
  c.prompt_cache_dir = o.prompt_cache;
  c.draft_model_path = o.draft_model;
  if (!o.prompt_cache_size.empty())
    c.prompt_cache_bytes = static_cast<int64_t>(parse_byte_size(o.prompt_cache_size).value());
  c.device = turbokv::parse_device(o.device).value();  // validated at parse time
  return c;
}

std::unique_ptr<turbokv::Engine> make_api_engine(const CommonOptions& o, int max_seqs,
                                                 turbokv::KvEventsCallback on_kv_events) {
  auto path = resolve_model(o.model);
  if (!path.ok()) {
    std::fprintf(stderr, "error: %s\n", path.status().message().c_str());
    return nullptr;
  }
  CommonOptions resolved = o;
  resolved.model = path.value();
  turbokv::EngineConfig cfg = engine_config(resolved, max_seqs);
  cfg.on_kv_events = std::move(on_kv_events);
  auto r = turbokv::Engine::create(cfg);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return nullptr;
  }
  return std::move(r).value();
}

void print_kv_summary(const turbokv::Engine& eng, const CommonOptions& o, int64_t n) {
  const turbokv::KvInfo kv = eng.kv_info();
  const size_t used = eng.kv_bytes_for_tokens(n);
  const std::string start = o.kv_quant_start > 0 && !eng.config().kv.is_float()
                                ? fmt::format("; first {} tokens bf16, then {} B/token",
                                              o.kv_quant_start, kv.bytes_per_token)
                                : "";
  std::fprintf(stderr,
               "[turbokv] kv cache %s: %lld tokens, %zu bytes used (%.1f B/token%s), %.2f MiB "
               "allocated\n",
               kv.scheme.c_str(), static_cast<long long>(n), used,
               n > 0 ? static_cast<double>(used) / static_cast<double>(n) : 0.0, start.c_str(),
               static_cast<double>(kv.allocated_bytes) / 1048576.0);
  if (kv.verify_calls > 0)
    std::fprintf(stderr,
                 "[turbokv] --kv-attn verify: %lld attention calls, max |fused - reference| %.3g "
                 "(max |out| %.3g, worst call relative %.3g)\n",
                 static_cast<long long>(kv.verify_calls), kv.verify_max_abs_err,
                 kv.verify_max_abs_out, kv.verify_max_rel_err);
}

bool check_chat_template(const turbokv::Engine& eng, const std::string& model) {
  if (eng.model_info().has_chat_template) return true;
  std::fprintf(stderr,
               "error: [cli] model %s (%s) has no chat template (tokenizer.chat_template is "
               "absent): it is likely a base model; use an instruct model, or run generate "
               "without --chat\n",
               eng.model_info().name.c_str(), model.c_str());
  return false;
}

}  // namespace tkv::cli
