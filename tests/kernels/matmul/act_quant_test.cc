// Activation quantizers (Q8_0 / Q8_1 / Q8_K as llama.cpp rounds them): round
// trip within half a step, block sums consistent with the codes, zero blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/matmul/act_quant.h"
#include "quant/half.h"

namespace tkv::kernels {
namespace {

std::vector<float> random_x(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = u(rng);
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = 0.0f;  // one all-zero 32-block
  return x;
}

TEST(ActQuant, Q8_32RoundTripAndSums) {
  const int64_t n = 1536;
  const std::vector<float> x = random_x(n, 7);
  for (bool fp16_sum : {false, true}) {
    std::vector<int8_t> q(n);
    std::vector<float> d(n / 32), s(n / 32);
    quantize_row_q8_32(x.data(), n, fp16_sum, q.data(), d.data(), s.data());
    double worst = 0.0;
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      // d = fp16(amax/127): relative rounding 2^-11; |x - d*q| <= dt/2 + 127*|d - dt| with dt =
      // amax/127.
      const double dt = amax / 127.0;
      EXPECT_NEAR(d[b], dt, dt * std::ldexp(1.0, -11) + 1e-30);
      const double bound = dt / 2 * (1 + 1e-6) + 127.0 * std::fabs(d[b] - dt);
      for (int i = 0; i < 32; ++i) {
        const double err = std::fabs(x[b * 32 + i] - static_cast<double>(d[b]) * q[b * 32 + i]);
        worst = std::max(worst, err / (bound + 1e-30));
        ASSERT_LE(err, bound + 1e-30) << "block " << b << " elem " << i;
        ASSERT_LE(std::abs(q[b * 32 + i]), 127);
        sum += q[b * 32 + i];
      }
      // Q8_1: s = fp16(d_f32*sum) (one fp16 rounding of a value within 2^-11 of d16*sum);
      // Q8_0: exactly d16*sum.
      const double exact = static_cast<double>(d[b]) * sum;
      if (fp16_sum) {
        EXPECT_NEAR(s[b], exact, std::fabs(exact) * std::ldexp(1.0, -10) * 1.001 + 1e-30)
            << "block " << b;
      } else {
        EXPECT_EQ(static_cast<double>(s[b]), exact) << "block " << b;
      }
    }
    std::printf("[act_quant] q8_32 fp16_sum=%d worst err/bound %.3f\n", fp16_sum, worst);
  }
}

TEST(ActQuant, Q8KRoundTripAndBsums) {
  const int64_t n = 768;
  std::vector<float> x = random_x(n, 9);
  for (int i = 256; i < 512; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero super-block
  std::vector<int8_t> q(n);
  std::vector<float> d(n / 256);
  std::vector<int16_t> bs(n / 16);
  quantize_row_q8_k(x.data(), n, q.data(), d.data(), bs.data());
  EXPECT_EQ(d[1], 0.0f);
  for (int64_t b = 0; b < n / 256; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[b * 256 + i]));
    // |d| = amax/127 up to two fp32 roundings; error per element <= |d|/2 plus 127 of those
    // roundings.
    const double bound = std::fabs(d[b]) / 2 + 127.0 * amax / 127.0 * std::ldexp(1.0, -22);
    for (int i = 0; i < 256; ++i) {
      ASSERT_LE(std::fabs(x[b * 256 + i] - static_cast<double>(d[b]) * q[b * 256 + i]), bound)
          << b << " " << i;
      ASSERT_GE(q[b * 256 + i], -127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b * 256 + g * 16 + i];
      ASSERT_EQ(sum, bs[b * 16 + g]) << "block " << b << " group " << g;
    }
  }
}

}  // namespace
}  // namespace tkv::kernels
