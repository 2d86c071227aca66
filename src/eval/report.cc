// Serialisation of evaluation reports: the curve.json row schema (shared with the
// llama.cpp peer rows written by scripts/eval) and a plain-text table.
#include <cmath>

#include "eval/eval.h"

namespace tkv::eval {
namespace {
std::string protocol_label(const EvalOptions& o) {
  if (o.protocol == Protocol::kWikitext) return fmt::format("wikitext-{}", o.n_ctx);
  return "serving-kl";
}
// bf16 | f16 | affine | turbo, from the scheme's --kv-quant spelling.
const char* family(const std::string& scheme) {
  auto kv = turbokv::KvConfig::parse(scheme);
  if (!kv.ok()) return "?";
  switch (kv.value().kind) {
    case turbokv::KvConfig::Kind::kBf16:
      return "bf16";
    case turbokv::KvConfig::Kind::kF16:
      return "f16";
    case turbokv::KvConfig::Kind::kAffine:
      return "affine";
    case turbokv::KvConfig::Kind::kTurbo:
      return "turbo";
    case turbokv::KvConfig::Kind::kAuto:
      return "auto";
  }
  return "?";
}
// --kv-quant-swa as given.
const char* swa_mode(const EvalOptions& o) {
  return o.engine.swa_bf16 ? "bf16" : "quant";
}
}  // namespace

nlohmann::json report_to_json(const EvalReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  const EvalOptions& o = r.opts;
  for (const SchemeResult& s : r.rows) {
    nlohmann::json row = {{"engine", "turbokv"},
                          {"model", o.model_label},
                          {"arch", r.arch},
                          {"head_dim", r.head_dim},
                          {"protocol", protocol_label(o)},
                          {"kv_swa", swa_mode(o)},
                          {"key_center", o.engine.key_center},
                          {"scheme", s.scheme},
                          {"family", family(s.scheme)},
                          {"bits_per_elem", s.bits_per_elem},
                          {"format_bits", s.format_bits},
                          {"kl", s.kl},
                          {"kl_ci95", s.kl_ci95},
                          {"ppl", s.ppl},
                          {"ppl_ci95", s.ppl_ci95},
                          {"top1", s.top1},
                          {"top1_ci95", s.top1_ci95},
                          {"base_kept_mass", s.kept_mass},
                          {"n_scored", s.n_scored},
                          {"seconds", s.seconds}};
    if (o.protocol == Protocol::kWikitext) {
      row["n_ctx"] = o.n_ctx;
      row["n_chunks"] = s.n_scored / std::max(1, o.n_ctx - 1 - o.n_ctx / 2);
    } else {
      row["n_prompts"] = o.n_prompts;
      row["prefix_tokens"] = o.prefix_tokens;
      row["decode_steps"] = o.decode_steps;
    }
    rows.push_back(row);
  }
  return {{"rows", rows}};
}

std::string report_to_table(const EvalReport& r) {
  std::string out = fmt::format(
      "model {} ({}, head_dim {}), protocol {}, corpus {} tokens, swa {}\n", r.opts.model_label,
      r.arch, r.head_dim, protocol_label(r.opts), r.n_tokens_corpus, swa_mode(r.opts));
  out += fmt::format("{:<12} {:>6} {:>22} {:>18} {:>16} {:>6} {:>7}\n", "scheme", "bits",
                     "KL (95% CI)", "PPL (95% CI)", "top-1 (95% CI)", "n", "s");
  for (const SchemeResult& s : r.rows)
    out += fmt::format(
        "{:<12} {:>6.2f} {:>10.5f} ± {:<9.5f} {:>8.3f} ± {:<7.3f} {:>6.4f} ± {:<6.4f} {:>6} "
        "{:>7.1f}\n",
        s.scheme, s.bits_per_elem, s.kl, s.kl_ci95, s.ppl, s.ppl_ci95, s.top1, s.top1_ci95,
        s.n_scored, s.seconds);
  return out;
}

std::string check_curve_schema(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array())
    return "no \"rows\" array";
  size_t i = 0;
  for (const auto& row : doc["rows"]) {
    for (const char* f : {"engine", "model", "protocol", "scheme"})
      if (!row.contains(f) || !row[f].is_string())
        return fmt::format("row {}: \"{}\" missing or not a string", i, f);
    for (const char* f : {"bits_per_elem", "kl", "ppl", "top1"}) {
      if (!row.contains(f)) return fmt::format("row {}: \"{}\" missing", i, f);
      if (std::string(f) == "top1" && row[f].is_null()) continue;
      if (!row[f].is_number() || !std::isfinite(row[f].get<double>()))
        return fmt::format("row {}: \"{}\" not a finite number", i, f);
    }
    ++i;
  }
  return "";
}

}  // namespace tkv::eval
