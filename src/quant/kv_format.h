// The KV row formats as plain data: KvKind, KvScheme and the per-row byte layout
// of its planes, computed inline. No base/ headers and C++17, so the CUDA sources
// (nvcc, C++17) share this one description with the CPU code; validation, parsing
// and names live in kv_scheme.h. Layouts: docs/kv-format.md.
#pragma once
#include <cstdint>

#include "quant/affine_kv.h"  // kAffineGroup
#include "quant/half.h"       // TKV_HD
#include "quant/turbo_k.h"    // kTurboGroup

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
  int head_dim = 128;        // 64|128|256|512 (bf16/f16 rows: any multiple of 8)
  bool k_unsigned8 = false;  // turbo, k_bits 8: uint8 [0,255] keys instead of int8 [-127,127]
  // Keys stored rotated, H(k ⊙ sign)/√D (the V codec's random-sign FWHT), and queries
  // rotated alike before the dot product, which an orthonormal rotation leaves unchanged:
  // outlier channels spread over the row before the per-32 integer grid. turbo, and the
  // bf16 rows of such a cache's --kv-quant-start prefix.
  bool k_rotated = false;
  // Values: each 32-group's stored scale is the fp16 scale that minimizes the group's
  // squared reconstruction error among the RMS scale and its Lloyd refinements
  // (quant/turbo_v_fit.h), not the RMS itself. Same bytes, codebook and decode
  // (c[idx]*scale); only the encoder differs. turbo only.
  bool v_mse_scale = false;
  // Values scaled by each 32-group's signed extreme m (x / m in [-1, 1], m itself at +1) and
  // bucketed into a codebook fitted to that ratio (turbo_absmax_centroids, top level +1), the
  // scale then fitted to the group's squared error as for v_mse_scale. Same bytes; decode
  // c_absmax[idx] * scale. turbo, v_bits 2..5; not with v_mse_scale.
  bool v_absmax = false;
  // Keys symmetric per 32-group (turbo, k_bits 4|5|8): one fp16 scale d = m / -2^(K-1), m the
  // group's signed extreme, codes rint(k/d) + 2^(K-1) in [0, 2^K - 1], no zero plane
  // (K + 0.5 bits per element). Read as the unsigned affine key with the implied zero
  // -2^(K-1) (k_zero_implied), so every kernel's dot is unchanged (quant/turbo_k.h).
  bool k_symmetric = false;

  TKV_HD bool k_signed() const {
    return kind == KvKind::kTurbo && k_bits == 8 && !k_unsigned8 && !k_symmetric;
  }
  // Parts only the CPU kernels read so far (the CUDA encode, attention and forward refuse
  // them, and --kv-quant auto skips them on CUDA): symmetric keys, the absmax codebook.
  TKV_HD bool cpu_only() const { return k_symmetric || v_absmax; }
  // The zero every key group of a symmetric scheme shares (x̂ = (code + zero) * scale).
  TKV_HD float k_zero_implied() const { return -static_cast<float>(1 << (k_bits - 1)); }
  // Plain 16-bit float rows [K x head_dim][V x head_dim], no scales.
  TKV_HD bool is_float() const { return kind == KvKind::kBf16 || kind == KvKind::kF16; }
  TKV_HD bool operator==(const KvScheme& o) const {
    return kind == o.kind && k_bits == o.k_bits && v_bits == o.v_bits && head_dim == o.head_dim &&
           k_unsigned8 == o.k_unsigned8 && k_rotated == o.k_rotated &&
           v_mse_scale == o.v_mse_scale && k_symmetric == o.k_symmetric && v_absmax == o.v_absmax;
  }
  TKV_HD bool operator!=(const KvScheme& o) const { return !(*this == o); }
};

// Bytes of each plane of one (token, kv-head) row, and their offsets when the
// planes are interleaved into one row of row_bytes (in the order listed).
// fp16 planes: turbo one value per 32-group (v_zero empty; k_zero empty for symmetric
// keys), affine per 64-group.
struct KvRowLayout {
  int64_t k_data_bytes = 0, v_data_bytes = 0;
  int64_t k_scale_bytes = 0, k_zero_bytes = 0, v_scale_bytes = 0, v_zero_bytes = 0;
  int64_t k_data_offset = 0, v_data_offset = 0;
  int64_t k_scale_offset = 0, k_zero_offset = 0, v_scale_offset = 0, v_zero_offset = 0;
  int64_t row_bytes = 0;
};

// The layout of s, unchecked (kv_row_layout in kv_scheme.h validates first).
TKV_HD KvRowLayout kv_row_layout_of(const KvScheme& s) {
  KvRowLayout l;
  const int64_t d = s.head_dim;
  l.k_data_bytes = d * s.k_bits / 8;
  l.v_data_bytes = d * s.v_bits / 8;
  if (s.kind == KvKind::kTurbo) {
    l.k_scale_bytes = l.k_zero_bytes = l.v_scale_bytes = 2 * d / kTurboGroup;
    if (s.k_symmetric) l.k_zero_bytes = 0;
  } else if (s.kind == KvKind::kAffine) {
    l.k_scale_bytes = l.k_zero_bytes = l.v_scale_bytes = l.v_zero_bytes = 2 * d / kAffineGroup;
  }
  l.k_data_offset = 0;
  l.v_data_offset = l.k_data_offset + l.k_data_bytes;
  l.k_scale_offset = l.v_data_offset + l.v_data_bytes;
  l.k_zero_offset = l.k_scale_offset + l.k_scale_bytes;
  l.v_scale_offset = l.k_zero_offset + l.k_zero_bytes;
  l.v_zero_offset = l.v_scale_offset + l.v_scale_bytes;
  l.row_bytes = l.v_zero_offset + l.v_zero_bytes;
  return l;
}

}  // namespace tkv::quant
