// TurboQuant constant tables (generated into turbo_tables.cc by
// scripts/gen-turbo-tables.py from tests/data/goldens/turboquant_tables.json).
// Signs are +-1.0f (sign01 bit 0 -> +1), one independent draw per head_dim;
// boundaries are the fp32 midpoints 0.5f*(c[i]+c[i+1]) used by Metal tq_encode.
#pragma once

namespace tkv::quant {

struct KvScheme;

// [head_dim] +-1.0f, or nullptr if head_dim is not 64/128/256/512.
const float* turbo_signs(int head_dim);
// [2^v_bits] ascending centroids for v_bits in {1,2,3,4,5,8}, else nullptr.
const float* turbo_centroids(int v_bits);
// [2^v_bits - 1] ascending boundaries for v_bits in {1,2,3,4,5,8}, else nullptr.
const float* turbo_boundaries(int v_bits);

// The codebooks of KvScheme::v_absmax (turbo_absmax_tables.cc, scripts/gen-absmax-codebooks.py):
// [2^v_bits] ascending levels (the top one +1) and their [2^v_bits - 1] fp32 midpoints, for
// v_bits in {2,3,4,5}, else nullptr.
const float* turbo_absmax_centroids(int v_bits);
const float* turbo_absmax_boundaries(int v_bits);

// The value codebook a turbo scheme decodes with and its boundaries: the absmax-anchored
// one for v_absmax, else the Lloyd-Max one of v_bits (defined in kv_scheme.cc).
const float* turbo_value_centroids(const KvScheme& s);
const float* turbo_value_boundaries(const KvScheme& s);

// 1/sqrt(head_dim) in fp32 exactly as MLX's 1.0f/std::sqrt(n) rounds it.
constexpr float turbo_inv_sqrt(int head_dim) {
  return head_dim == 64    ? 0.125f
         : head_dim == 128 ? 0.08838834764831843f
         : head_dim == 256 ? 0.0625f
         : head_dim == 512 ? 0.04419417382415922f
                           : 0.0f;
}

}  // namespace tkv::quant
