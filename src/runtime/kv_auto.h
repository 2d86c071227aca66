// --kv-quant auto[:BITS]: the KV scheme of least measured quality loss within a budget of
// stored bits per K/V element (scales included; default 6.25, `turbo`'s), from a table
// shipped per architecture: wikitext-512 mean KL against the bf16 cache, measured with
// `scripts/eval/run-curve` on the model named in the table (docs/eval/README.md, "Picking a
// scheme: auto"). An architecture without a table takes, per scheme, the worst KL measured
// on any architecture.
#pragma once
#include <string>
#include <string_view>

#include "base/status.h"
#include "quant/kv_format.h"

namespace tkv::runtime {

// The budget of plain "auto": `turbo`'s (k8v3) bits per element.
constexpr double kAutoKvDefaultBits = 6.25;

struct KvAutoPick {
  quant::KvScheme scheme;   // at the model's head_dim
  double bits = 0;          // stored bits per element at this head_dim
  double kl = 0;            // its measured wikitext-512 KL
  std::string measured_on;  // the model the KL was measured on ("" for the fallback)
};

// "auto" or "auto:<bits>".
bool is_auto_kv_scheme(std::string_view scheme);
// The budget of an auto spelling in bits per element (6.25 for plain "auto"); an error
// names a malformed one.
Result<double> auto_kv_budget(std::string_view scheme);
// The pick for a model's architecture and head_dim within budget_bits per element; an error
// names a budget below the smallest scheme's bits. cuda: only schemes the CUDA forward takes
// (bf16 and turbo caches without symmetric keys or the absmax value codebook).
Result<KvAutoPick> pick_auto_kv_scheme(double budget_bits, const std::string& arch, int head_dim,
                                       bool cuda = false);
// The scheme to build a cache with: `fixed` itself unless auto_bits > 0 (--kv-quant
// auto[:BITS]), else the pick, logged with what it was chosen from (`who` names the model).
Result<quant::KvScheme> resolve_kv_scheme(const quant::KvScheme& fixed, double auto_bits,
                                          const std::string& arch, int head_dim,
                                          const std::string& who, bool cuda = false);

}  // namespace tkv::runtime
