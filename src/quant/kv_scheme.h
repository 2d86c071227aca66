// KvScheme (the plain structs: kv_format.h): which KV-cache format a cache uses
// (bf16, affine, TurboQuant), its widths and head_dim, with validation, the CLI-string parser
// ("bf16", "8", "4", "turbo", "turbo:k<b>v<b>") and the per-row byte layout of the five/six planes
// (K data, V data, K scale, K zero, V scale, V zero) a cache stores. Layouts are
// defined in docs/kv-format.md; sizes match the goldens' bytes_per_token_per_head.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "quant/kv_format.h"

namespace tkv::quant {

// OK, or "[kv] ..." naming the bad value and the valid set.
Status validate_kv_scheme(const KvScheme& s);
// Parses a CLI string; the error lists the valid forms.
Result<KvScheme> parse_kv_scheme(std::string_view text, int head_dim);
// Canonical name: "bf16", "affine4", "affine8", "turbo:k8v3" (k8u for unsigned 8).
std::string kv_scheme_name(const KvScheme& s);

// Layout of a valid scheme (TKV_CHECKs validity, then kv_row_layout_of).
KvRowLayout kv_row_layout(const KvScheme& s);
// D*kb/8 + D*vb/8 + 6*D/32 for turbo (4*D/32 with symmetric keys); equals
// kv_row_layout(s).row_bytes.
int64_t kv_bytes_per_token_per_head(const KvScheme& s);
// Stored bits per K or V element, scales included: 8*row_bytes / (2*D).
double kv_bits_per_element(const KvScheme& s);
// fp16 K+V bytes (4*D) over row_bytes; turbo: 32 / (kb + vb + 1.5) (+ 1.0 symmetric).
double kv_compression_vs_fp16(const KvScheme& s);

}  // namespace tkv::quant
