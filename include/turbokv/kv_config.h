// turbokv::KvConfig: the KV cache scheme, typed (a kind and the key/value bit
// widths), parsed once from the --kv-quant spelling: bf16 | f16 | 8 | 4 (affine)
// | turbo (= turbo:k8v3) | turbo:k<K>v<V> | turbo:k<K>rv<V> (keys stored rotated by a
// random-sign Hadamard transform, queries rotated alike) | turbo:k<K>s[r]v<V> (keys
// symmetric per 32-group, one scale and no zero point, K in 4|5|8); a turbo form may end in a
// (turbo:k8sv4a: values scaled by each group's signed extreme on a codebook fitted to it) or m
// (turbo:k4rv3m: each value group's scale fitted to its squared error) | auto[:BITS] (the
// scheme of least measured quality loss within BITS stored bits per element for the model's
// architecture, default 6.25: picked, and logged, when the engine is created). Whether the
// model's head_dim can use the scheme is checked when the engine is created for that model.
#pragma once
#include <string>
#include <string_view>

#include "turbokv/status.h"

namespace turbokv {

struct KvConfig {
  enum class Kind { kBf16, kF16, kAffine, kTurbo, kAuto };
  Kind kind = Kind::kBf16;
  int key_bits = 16;                // bf16/f16: 16; affine: 4 | 8; turbo: 2 | 4 | 5 | 8
  int value_bits = 16;              // bf16/f16: 16; affine: = key_bits; turbo: 2 | 3 | 4 | 5 | 8
  bool rotated_keys = false;        // turbo: keys rotated before quantization
  bool symmetric_keys = false;      // turbo: keys symmetric per 32-group (no zero point)
  bool fitted_value_scale = false;  // turbo: value scales fitted to the squared error
  bool absmax_values = false;       // turbo: values on the absmax-anchored codebook
  double auto_bits = 0;             // auto: the budget in bits per element (0: the default, 6.25)

  // The error names the text and lists the valid forms.
  static Result<KvConfig> parse(std::string_view text);
  // The --kv-quant spelling: parse(to_string()) gives this config back.
  std::string to_string() const;
  bool is_float() const { return kind == Kind::kBf16 || kind == Kind::kF16; }
  bool operator==(const KvConfig&) const = default;
};

}  // namespace turbokv
