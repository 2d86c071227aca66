// nn kernels against direct double-precision formulas.
#include "kernels/nn/nn.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace tkv::kernels {
namespace {

TEST(Nn, RmsNorm) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 3);
  const int n = 576;
  std::vector<float> x(2 * n), w(n), y(2 * n);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  rms_norm(x.data(), w.data(), y.data(), 2, n, 1e-5f);
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const double s = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i)
      EXPECT_NEAR(y[r * n + i], x[r * n + i] * s * w[i],
                  1e-5 * std::fabs(x[r * n + i] * s * w[i]) + 1e-6);
  }
}

TEST(Nn, RopeNormAndNeoxPreserveNormsAndMatchFormula) {
  const int hd = 64;
  std::vector<float> x(hd), y;
  for (int i = 0; i < hd; ++i) x[i] = std::sin(0.3f * i) + 0.1f;
  for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
    y = x;
    int32_t pos = 7;
    rope(y.data(), &pos, 1, 1, hd, hd, 10000.f, 1.f, mode);
    for (int i = 0; i < hd / 2; ++i) {
      const int a = mode == RopeMode::kNorm ? 2 * i : i,
                b = mode == RopeMode::kNorm ? 2 * i + 1 : i + hd / 2;
      const double th = 7.0 * std::pow(10000.0, -2.0 * i / hd);
      EXPECT_NEAR(y[a], x[a] * std::cos(th) - x[b] * std::sin(th), 2e-5);
      EXPECT_NEAR(y[b], x[a] * std::sin(th) + x[b] * std::cos(th), 2e-5);
    }
  }
}

TEST(Nn, GatedActivations) {
  std::vector<float> g = {-3, -0.5f, 0, 0.5f, 3}, u = {1, 2, 3, 4, 5};
  auto s = g, t = g;
  silu_mul(s.data(), u.data(), 5);
  gelu_tanh_mul(t.data(), u.data(), 5);
  for (int i = 0; i < 5; ++i) {
    const double x = g[i];
    EXPECT_NEAR(s[i], x / (1 + std::exp(-x)) * u[i], 1e-6 * (1 + std::fabs(s[i])));
    const double gl = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(t[i], gl * u[i], 1e-6 * (1 + std::fabs(t[i])));
  }
}

TEST(Nn, SoftmaxSumsToOne) {
  std::vector<float> x = {1000, 999, -1000, 0};
  softmax(x.data(), 4);
  EXPECT_NEAR(x[0] + x[1] + x[2] + x[3], 1.0, 1e-6);
  EXPECT_NEAR(x[0] / x[1], std::exp(1.0), 1e-4);
}

}  // namespace
}  // namespace tkv::kernels
