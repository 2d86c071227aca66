// Random but well-formed GGML weight data for synthetic (speed-only) models:
// quant bytes are uniform random and the fp16 scale fields (d, and dmin or m
// where the type has one) are overwritten, with a random sign per block, so the
// dequantized weights have mean ~0 and standard deviation ~sigma. The scales are
// calibrated once per type by dequantizing sample blocks with the shared
// dequantizers (ggml_dequant.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_types.h"

namespace tkv::ggml {

// splitmix64: small, fast, and fully determined by its seed.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform_pm1() {  // uniform in [-1, 1)
    return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
};

// Whether fill_random can write `t` as a weight type: the float types and every
// dequantizable quant type whose scales are fp16 (not q8_1 or q8_K).
bool can_synthesize(Type t);

// Fills n_blocks blocks of `t` (elements, for the float types) at dst. The
// same (type, sigma, rng state) gives the same bytes.
class RandomBlocks {
 public:
  RandomBlocks(Type t, float sigma);  // TKV_CHECKs can_synthesize(t) and sigma > 0
  void fill(SplitMix64& rng, uint8_t* dst, size_t n_blocks) const;
  float d() const { return d_; }  // the fp16 scale written (after rounding)

 private:
  Type type_;
  float sigma_;
  int block_bytes_;
  int d_off_ = -1, m_off_ = -1;  // byte offsets of the fp16 scale fields
  uint16_t d_bits_ = 0, m_bits_ = 0;
  float d_ = 0;
};

}  // namespace tkv::ggml
