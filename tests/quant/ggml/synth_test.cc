// RandomBlocks (quant/ggml_synth.h): for every type it writes, the dequantized
// random weights are finite with mean ~0 and standard deviation ~sigma, and the
// bytes depend only on the RNG state. Bounds: over 16384 samples the sample mean
// is ~sigma/128 from 0 (plus the blocks' own offsets, ~0.1 sigma each, under random
// signs: ~0.1 sigma/sqrt(64 blocks)), so 0.05 sigma is > 3 standard errors; the std
// must be within 0.8..1.25 sigma (fp16 rounding of d, the sample's spread).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul/matmul.h"
#include "quant/ggml_synth.h"

namespace tkv::ggml {
namespace {

constexpr Type kTypes[] = {Type::kF32,  Type::kF16,  Type::kBF16, Type::kQ4_0, Type::kQ4_1,
                           Type::kQ5_0, Type::kQ5_1, Type::kQ8_0, Type::kQ2_K, Type::kQ3_K,
                           Type::kQ4_K, Type::kQ5_K, Type::kQ6_K};

TEST(RandomBlocks, FiniteZeroMeanAndSigmaForEveryType) {
  for (Type t : kTypes) {
    for (float sigma : {1.0f, 1.0f / std::sqrt(14336.0f)}) {
      const TypeTraits& tr = traits(t);
      const int64_t n = 64 * 256;  // a whole number of blocks for every type
      std::vector<uint8_t> bytes(row_bytes(t, n));
      SplitMix64 rng{42};
      RandomBlocks(t, sigma).fill(rng, bytes.data(), static_cast<size_t>(n / tr.block_elems));
      std::vector<float> y(static_cast<size_t>(n));
      kernels::dequantize_row(t, bytes.data(), y.data(), n);
      double sum = 0, sq = 0;
      for (float v : y) {
        ASSERT_TRUE(std::isfinite(v)) << tr.name;
        sum += v;
        sq += double{v} * v;
      }
      const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
      EXPECT_LT(std::fabs(mean), 0.05 * sigma) << tr.name << " sigma " << sigma;
      EXPECT_GT(sd, 0.8 * sigma) << tr.name << " sigma " << sigma;
      EXPECT_LT(sd, 1.25 * sigma) << tr.name << " sigma " << sigma;
    }
  }
}

TEST(RandomBlocks, BytesDependOnlyOnTheSeed) {
  for (Type t : {Type::kQ4_K, Type::kQ8_0, Type::kF16}) {
    const size_t n_blocks = 8, nb = n_blocks * static_cast<size_t>(traits(t).block_bytes);
    std::vector<uint8_t> a(nb), b(nb), c(nb);
    SplitMix64 ra{7}, rb{7}, rc{8};
    const RandomBlocks gen(t, 0.05f);
    gen.fill(ra, a.data(), n_blocks);
    gen.fill(rb, b.data(), n_blocks);
    gen.fill(rc, c.data(), n_blocks);
    EXPECT_EQ(a, b) << traits(t).name;
    EXPECT_NE(a, c) << traits(t).name;
  }
}

TEST(RandomBlocks, KnowsWhichTypesItCanWrite) {
  for (Type t : kTypes) EXPECT_TRUE(can_synthesize(t)) << traits(t).name;
  EXPECT_FALSE(can_synthesize(Type::kQ8_1));  // no dequantizer
  EXPECT_FALSE(can_synthesize(Type::kQ8_K));  // fp32 d, not a weight type in GGUF files
}

}  // namespace
}  // namespace tkv::ggml
