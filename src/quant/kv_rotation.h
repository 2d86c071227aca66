// The key rotation of KvScheme::k_rotated (kv_format.h): x <- H(x ⊙ sign)/√D, the
// random-sign FWHT of the TurboQuant V codec (fwht.h), applied to every key row before
// it is stored and to every query row before it meets those keys. The transform is
// orthonormal, so q·k is unchanged up to fp32 rounding, while a key's outlier channels
// are spread over the whole row before the per-32 integer grid sees them.
#pragma once
#include <cstdint>

#include "quant/fwht.h"
#include "quant/turbo_tables.h"

namespace tkv::quant {

// Rows [n_rows, head_dim] in place; head_dim one the TurboQuant tables hold.
inline void rotate_key_rows(float* x, int64_t n_rows, int head_dim) {
  const float* sign = turbo_signs(head_dim);
  const float inv = turbo_inv_sqrt(head_dim);
  for (int64_t r = 0; r < n_rows; ++r) fwht_forward(x + r * head_dim, head_dim, sign, inv);
}

}  // namespace tkv::quant
