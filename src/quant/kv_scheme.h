// KvScheme: which KV-cache format a cache uses (bf16, affine, TurboQuant), its
// widths and head_dim, with validation, the CLI-string parser ("bf16", "8", "4",
// "turbo", "turbo:k<b>v<b>") and the per-row byte layout of the five/six planes
// (K data, V data, K scale, K zero, V scale, V zero) a cache stores. Layouts are
// defined in docs/kv-format.md; sizes match the goldens' bytes_per_token_per_head.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tkv::quant {

enum class KvKind : uint8_t {
  kBf16,
  kAffine,
  kTurbo,
  kF16
};  // kF16: IEEE half rows (as llama.cpp's default)

struct KvScheme {
  KvKind kind = KvKind::kTurbo;
  int k_bits = 8;            // bf16/f16: 16; affine: 4|8; turbo: 2|3|4|5|8
  int v_bits = 3;            // bf16/f16: 16; affine: 4|8; turbo: 1|2|3|4|5|8 (1 is for tests)
  int head_dim = 128;        // 64|128|256|512
  bool k_unsigned8 = false;  // turbo, k_bits 8: uint8 [0,255] keys instead of int8 [-127,127]

  bool k_signed() const { return kind == KvKind::kTurbo && k_bits == 8 && !k_unsigned8; }
  bool operator==(const KvScheme&) const = default;
};

// Bytes of each plane of one (token, kv-head) row, and their offsets when the
// planes are interleaved into one row of row_bytes (in the order listed).
// fp16 planes: turbo one value per 32-group (v_zero empty), affine per 64-group.
struct KvRowLayout {
  int64_t k_data_bytes = 0, v_data_bytes = 0;
  int64_t k_scale_bytes = 0, k_zero_bytes = 0, v_scale_bytes = 0, v_zero_bytes = 0;
  int64_t k_data_offset = 0, v_data_offset = 0;
  int64_t k_scale_offset = 0, k_zero_offset = 0, v_scale_offset = 0, v_zero_offset = 0;
  int64_t row_bytes = 0;
};

// OK, or "[kv] ..." naming the bad value and the valid set.
Status validate_kv_scheme(const KvScheme& s);
// Parses a CLI string; the error lists the valid forms.
Result<KvScheme> parse_kv_scheme(std::string_view text, int head_dim);
// Canonical name: "bf16", "affine4", "affine8", "turbo:k8v3" (k8u for unsigned 8).
std::string kv_scheme_name(const KvScheme& s);

// Layout of a valid scheme (TKV_CHECKs validity).
KvRowLayout kv_row_layout(const KvScheme& s);
// D*kb/8 + D*vb/8 + 6*D/32 for turbo; equals kv_row_layout(s).row_bytes.
int64_t kv_bytes_per_token_per_head(const KvScheme& s);
// Stored bits per K or V element, scales included: 8*row_bytes / (2*D).
double kv_bits_per_element(const KvScheme& s);
// fp16 K+V bytes (4*D) over row_bytes; turbo: 32 / (kb + vb + 1.5).
double kv_compression_vs_fp16(const KvScheme& s);

}  // namespace tkv::quant
