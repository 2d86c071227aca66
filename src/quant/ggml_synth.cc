// RandomBlocks (see ggml_synth.h): per-type scale-field offsets from the POD
// block structs, and a one-off calibration of d (and dmin / m) by dequantizing
// sample blocks, so no per-type variance formula has to be kept in step by hand.
#include "quant/ggml_synth.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_dequant.h"
#include "quant/half.h"

namespace tkv::ggml {
namespace {

struct ScaleFields {
  int d_off;
  int m_off;  // -1: the type has no offset field
};

// Where a type keeps its fp16 scale and offset; {-1, -1} for types we do not synthesize.
ScaleFields scale_fields(Type t) {
  switch (t) {
    case Type::kQ4_0:
      return {offsetof(BlockQ4_0, d), -1};
    case Type::kQ4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case Type::kQ5_0:
      return {offsetof(BlockQ5_0, d), -1};
    case Type::kQ5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case Type::kQ8_0:
      return {offsetof(BlockQ8_0, d), -1};
    case Type::kQ2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case Type::kQ3_K:
      return {offsetof(BlockQ3_K, d), -1};
    case Type::kQ4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case Type::kQ5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case Type::kQ6_K:
      return {offsetof(BlockQ6_K, d), -1};
    default:
      return {-1, -1};
  }
}

bool is_float(Type t) {
  return t == Type::kF32 || t == Type::kF16 || t == Type::kBF16;
}

template <typename B>
void dequant_as(const uint8_t* src, float* y) {
  B b;
  std::memcpy(&b, src, sizeof(B));
  dequantize_block(b, y);
}

void dequant_one(Type t, const uint8_t* src, float* y) {
  switch (t) {
    case Type::kQ4_0:
      return dequant_as<BlockQ4_0>(src, y);
    case Type::kQ4_1:
      return dequant_as<BlockQ4_1>(src, y);
    case Type::kQ5_0:
      return dequant_as<BlockQ5_0>(src, y);
    case Type::kQ5_1:
      return dequant_as<BlockQ5_1>(src, y);
    case Type::kQ8_0:
      return dequant_as<BlockQ8_0>(src, y);
    case Type::kQ2_K:
      return dequant_as<BlockQ2_K>(src, y);
    case Type::kQ3_K:
      return dequant_as<BlockQ3_K>(src, y);
    case Type::kQ4_K:
      return dequant_as<BlockQ4_K>(src, y);
    case Type::kQ5_K:
      return dequant_as<BlockQ5_K>(src, y);
    case Type::kQ6_K:
      return dequant_as<BlockQ6_K>(src, y);
    default:
      TKV_CHECK(false && "dequant_one: type not synthesized");
  }
}

void fill_bytes(SplitMix64& rng, uint8_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, 8);
  }
  if (i < n) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, n - i);
  }
}

void put_half(uint8_t* block, int off, uint16_t bits) {
  std::memcpy(block + off, &bits, sizeof(bits));
}

// Mean and mean square of the dequantized sample with the scale fields set to (d, m).
struct Moments {
  double mean = 0, mean_sq = 0;
};
Moments moments(Type t, const ScaleFields& f, std::vector<uint8_t>& sample, int block_bytes,
                int block_elems, float d, float m) {
  const size_t n_blocks = sample.size() / static_cast<size_t>(block_bytes);
  std::vector<float> y(static_cast<size_t>(block_elems));
  Moments r;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = sample.data() + b * static_cast<size_t>(block_bytes);
    put_half(blk, f.d_off, f32_to_f16(d));
    if (f.m_off >= 0) put_half(blk, f.m_off, f32_to_f16(m));
    dequant_one(t, blk, y.data());
    for (float v : y) {
      r.mean += v;
      r.mean_sq += double{v} * v;
    }
  }
  const double n = static_cast<double>(n_blocks) * block_elems;
  r.mean /= n;
  r.mean_sq /= n;
  return r;
}

}  // namespace

bool can_synthesize(Type t) {
  return is_float(t) || scale_fields(t).d_off >= 0;
}

RandomBlocks::RandomBlocks(Type t, float sigma) : type_(t), sigma_(sigma) {
  TKV_CHECK(can_synthesize(t) && sigma > 0 && std::isfinite(sigma));
  const TypeTraits& tr = traits(t);
  block_bytes_ = tr.block_bytes;
  if (is_float(t)) return;
  const ScaleFields f = scale_fields(t);
  d_off_ = f.d_off;
  m_off_ = f.m_off;
  constexpr size_t kSampleBlocks = 256;
  std::vector<uint8_t> sample(kSampleBlocks * static_cast<size_t>(block_bytes_));
  SplitMix64 rng{0x5eed5eedull + static_cast<uint64_t>(t)};
  fill_bytes(rng, sample.data(), sample.size());
  // The offset field that cancels the mean: m = ratio * d.
  float ratio = 0;
  if (m_off_ >= 0) {
    const double a = moments(t, f, sample, block_bytes_, tr.block_elems, 1.0f, 0.0f).mean;
    const double b = moments(t, f, sample, block_bytes_, tr.block_elems, 0.0f, 1.0f).mean;
    ratio = b != 0 ? static_cast<float>(-a / b) : 0.0f;
  }
  const Moments mo = moments(t, f, sample, block_bytes_, tr.block_elems, 1.0f, ratio);
  const double sd = std::sqrt(std::max(mo.mean_sq - mo.mean * mo.mean, 1e-12));
  d_bits_ = f32_to_f16(static_cast<float>(sigma / sd));
  m_bits_ = f32_to_f16(static_cast<float>(sigma / sd) * ratio);
  d_ = f16_to_f32(d_bits_);
  TKV_CHECK(std::isfinite(d_) && d_ > 0);
}

void RandomBlocks::fill(SplitMix64& rng, uint8_t* dst, size_t n_blocks) const {
  const float amp = sigma_ * std::sqrt(3.0f);  // uniform [-amp, amp) has std sigma
  switch (type_) {
    case Type::kF32:
      for (size_t i = 0; i < n_blocks; ++i) {
        const float v = amp * rng.uniform_pm1();
        std::memcpy(dst + 4 * i, &v, 4);
      }
      return;
    case Type::kF16:
    case Type::kBF16:
      for (size_t i = 0; i < n_blocks; ++i) {
        const float v = amp * rng.uniform_pm1();
        const uint16_t h = type_ == Type::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    default:
      break;
  }
  const size_t bb = static_cast<size_t>(block_bytes_);
  fill_bytes(rng, dst, n_blocks * bb);
  // A random sign per block (a random bit of the bytes d overwrites): the
  // formats' own offset (q4_0's (q - 8) has mean -1/2) then averages out.
  for (size_t i = 0; i < n_blocks; ++i) {
    uint8_t* blk = dst + i * bb;
    const uint16_t sign = (blk[d_off_] & 1u) ? 0x8000u : 0u;
    put_half(blk, d_off_, static_cast<uint16_t>(d_bits_ ^ sign));
    if (m_off_ >= 0) put_half(blk, m_off_, static_cast<uint16_t>(m_bits_ ^ sign));
  }
}

}  // namespace tkv::ggml
