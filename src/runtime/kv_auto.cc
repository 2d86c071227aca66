// --kv-quant auto[:BITS] (kv_auto.h): the measured table and the pick.
#include "runtime/kv_auto.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <vector>

#include "base/log.h"
#include "quant/kv_scheme.h"

namespace tkv::runtime {
namespace {

struct Measured {
  const char* scheme;
  double kl;
};
struct ArchTable {
  const char* arch;
  const char* model;
  std::vector<Measured> rows;
};

// wikitext-512 mean KL vs the bf16 cache (docs/eval/curve.md, 10 chunks; the rotated-key
// and fitted-value-scale (m) rows from docs/eval/README.md "Rotated keys" and "MSE-fitted
// value scale", 20 chunks on SmolLM2, 10 on the others; the symmetric-key (s) and absmax (a)
// rows and turbo:k8v8 from "Symmetric keys and the absmax value codebook", 10 chunks; the a
// rows through the int8 V dot, as they run). Only measured pairs: Gemma 3 has no k4rv2 row;
// SmolLM2's k4rv2m (no better than k4rv2) is left out.
const std::vector<ArchTable>& tables() {
  static const std::vector<ArchTable> t = {
      {"llama",
       "SmolLM2-135M",
       {{"turbo:k8v8", 0.00444},
        {"8", 0.00396},
        {"turbo:k8v4", 0.01123},
        {"turbo:k8v3", 0.02993},
        {"turbo:k8v2", 0.13852},
        {"turbo:k5rv3", 0.0413},
        {"4", 0.10426},
        {"turbo:k4v3", 0.09934},
        {"turbo:k4rv3", 0.0686},
        {"turbo:k4v2", 0.20983},
        {"turbo:k4rv2", 0.1874},
        {"turbo:k8v3m", 0.0298},
        {"turbo:k5rv3m", 0.0366},
        {"turbo:k4rv3m", 0.0617},
        {"turbo:k8srv8", 0.00407},
        {"turbo:k8sv8", 0.00464},
        {"turbo:k8srv4a", 0.00881},
        {"turbo:k8srv4m", 0.00939},
        {"turbo:k8sv4a", 0.00937},
        {"turbo:k8sv4m", 0.01051},
        {"turbo:k8sv4", 0.01198},
        {"turbo:k5srv5a", 0.0131},
        {"turbo:k5srv5m", 0.01347},
        {"turbo:k5srv4m", 0.01725},
        {"turbo:k4srv4a", 0.04185},
        {"turbo:k4srv4m", 0.04165},
        {"turbo:k4sv4m", 0.1426}}},
      {"gemma3",
       "Gemma3-270M",
       {{"turbo:k8v8", 0.00879},
        {"8", 0.00740},
        {"turbo:k8v4", 0.01248},
        {"turbo:k8v3", 0.02863},
        {"turbo:k8v2", 0.09022},
        {"turbo:k5rv3", 0.0445},
        {"4", 0.33372},
        {"turbo:k4v3", 0.10717},
        {"turbo:k4rv3", 0.1086},
        {"turbo:k4v2", 0.16987},
        {"turbo:k8v3m", 0.02596},
        {"turbo:k5rv3m", 0.04614},
        {"turbo:k4v3m", 0.10260},
        {"turbo:k8srv8", 0.00692},
        {"turbo:k8sv8", 0.0096},
        {"turbo:k8srv4m", 0.01142},
        {"turbo:k8srv4a", 0.01126},
        {"turbo:k8sv4a", 0.0133},
        {"turbo:k8sv4m", 0.01362},
        {"turbo:k8sv4", 0.01507},
        {"turbo:k5srv5m", 0.03153},
        {"turbo:k5srv5a", 0.03075},
        {"turbo:k5srv4m", 0.03489},
        {"turbo:k4srv4a", 0.09411},
        {"turbo:k4srv4m", 0.08948},
        {"turbo:k4sv4m", 0.12701}}},
      {"qwen2",
       "Qwen2.5-Coder-1.5B (keys centered)",
       {{"turbo:k8v8", 0.00353},
        {"8", 0.00327},
        {"turbo:k8v4", 0.00763},
        {"turbo:k8v3", 0.01880},
        {"turbo:k8v2", 0.06637},
        {"turbo:k5rv3", 0.0211},
        {"4", 0.02436},
        {"turbo:k4v3", 0.03281},
        {"turbo:k4rv3", 0.0287},
        {"turbo:k4v2", 0.08083},
        {"turbo:k4rv2", 0.0782},
        {"turbo:k8v3m", 0.0154},
        {"turbo:k5rv3m", 0.0181},
        {"turbo:k4rv3m", 0.0248},
        {"turbo:k4rv2m", 0.0755},
        {"turbo:k8srv8", 0.00335},
        {"turbo:k8sv8", 0.00362},
        {"turbo:k8srv4a", 0.00595},
        {"turbo:k8sv4a", 0.00629},
        {"turbo:k8srv4m", 0.00645},
        {"turbo:k8sv4m", 0.00645},
        {"turbo:k8sv4", 0.00828},
        {"turbo:k5srv5m", 0.00676},
        {"turbo:k5srv5a", 0.00662},
        {"turbo:k5srv4m", 0.00899},
        {"turbo:k4srv4m", 0.0163},
        {"turbo:k4srv4a", 0.01615},
        {"turbo:k4sv4m", 0.02421}}},
  };
  return t;
}

// The schemes every table measured, each with its worst KL (for an architecture without a
// table).
ArchTable fallback_table() {
  ArchTable f{"", "", {}};
  for (const Measured& m : tables()[0].rows) {
    double worst = 0;
    size_t seen = 0;
    for (const ArchTable& t : tables())
      for (const Measured& r : t.rows)
        if (std::string_view(r.scheme) == m.scheme) worst = std::max(worst, r.kl), ++seen;
    if (seen == tables().size()) f.rows.push_back({m.scheme, worst});
  }
  return f;
}

}  // namespace

Result<double> auto_kv_budget(std::string_view s) {
  if (s == "auto") return kAutoKvDefaultBits;
  const std::string_view num = s.substr(5);  // after "auto:"
  double v = 0;
  const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (ec != std::errc() || end != num.data() + num.size() || !std::isfinite(v))
    return invalid_argument("[kv] bad --kv-quant '{}': auto:<bits>, e.g. auto:4.5", s);
  return v;
}

bool is_auto_kv_scheme(std::string_view scheme) {
  return scheme == "auto" || scheme.substr(0, 5) == "auto:";
}

Result<KvAutoPick> pick_auto_kv_scheme(double budget, const std::string& arch, int head_dim,
                                       bool cuda) {
  const ArchTable* table = nullptr;
  for (const ArchTable& t : tables())
    if (arch == t.arch) table = &t;
  const ArchTable fb = table ? ArchTable{} : fallback_table();
  if (!table) table = &fb;
  std::optional<KvAutoPick> best;
  double least_bits = 1e9;
  for (const Measured& m : table->rows) {
    auto s = quant::parse_kv_scheme(m.scheme, head_dim);
    if (!s.ok()) continue;  // not valid at this head_dim
    // Not on CUDA (yet): affine caches, symmetric keys, the absmax value codebook.
    if (cuda && (s->kind == quant::KvKind::kAffine || s->cpu_only())) continue;
    const double bits = quant::kv_bits_per_element(s.value());
    least_bits = std::min(least_bits, bits);
    if (bits > budget + 1e-9) continue;
    if (!best || m.kl < best->kl || (m.kl == best->kl && bits < best->bits))
      best = KvAutoPick{s.value(), bits, m.kl, table->model};
  }
  if (!best)
    return invalid_argument(
        "[kv] --kv-quant auto:{}: no measured scheme{} fits {} bits per element at head_dim {} "
        "(the smallest takes {:.2f})",
        budget, cuda ? " on CUDA" : "", budget, head_dim, least_bits);
  return *best;
}

Result<quant::KvScheme> resolve_kv_scheme(const quant::KvScheme& fixed, double auto_bits,
                                          const std::string& arch, int head_dim,
                                          const std::string& who, bool cuda) {
  if (auto_bits <= 0) return fixed;
  TKV_ASSIGN_OR_RETURN(const KvAutoPick p, pick_auto_kv_scheme(auto_bits, arch, head_dim, cuda));
  // At the warning level, which is shown by default: the user asked for a choice and should
  // see it without raising the log level.
  TKV_LOG_WARN(
      "[kv] --kv-quant auto:{} for {} ({}): {}, {:.2f} bits per element, wikitext-512 KL {:.4f} "
      "{}",
      auto_bits, who, arch, quant::kv_scheme_name(p.scheme), p.bits, p.kl,
      p.measured_on.empty()
          ? "(worst measured over llama, gemma3 and qwen2: no table for " + arch + ")"
          : "measured on " + p.measured_on);
  return p.scheme;
}

}  // namespace tkv::runtime
