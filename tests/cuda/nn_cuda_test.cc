// kernels/nn_cuda against the CPU kernels of kernels/nn (the reference), on random
// inputs with odd sizes. Tolerances: exact for adds, scaling, gathers and the bf16
// conversions (the same fp32 operations); a few ulp of the output's scale where
// libm and CUDA's math library may differ (sqrt, exp, tanh, sin/cos: <= 2 ulp each).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention/attention_quant.h"
#include "kernels/nn/nn.h"
#include "kernels/nn_cuda/nn_cuda.h"
#include "quant/half.h"
#include "quant/kv_rotation.h"
#include "tests/cuda/cuda_test_util.h"

namespace tkv {
namespace {
using testing::DeviceBuffer;
constexpr float kEps = std::numeric_limits<float>::epsilon();

std::vector<float> random_vec(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max |got - want| / (tol_ulps * eps * (|want| + floor)) must be <= 1; reports where.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol_ulps,
                  float floor, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": non-finite at " << i;
    const double r = std::fabs(double(got[i]) - want[i]) /
                     (tol_ulps * kEps * (std::fabs(double(want[i])) + floor));
    if (r > worst) worst = r, at = i;
  }
  EXPECT_LE(worst, 1.0) << what << ": worst at " << at << " got " << got[at] << " want "
                        << want[at];
}

TEST(NnCuda, RmsNorm) {
  TKV_SKIP_WITHOUT_GPU();
  for (int64_t n : {64, 576, 1001}) {
    for (int64_t rows : {1, 7}) {
      for (bool weighted : {true, false}) {
        const auto x = random_vec(size_t(rows * n), 3.0f, 11);
        const auto w = random_vec(size_t(n), 1.0f, 12);
        std::vector<float> want(x.size());
        kernels::rms_norm(x.data(), weighted ? w.data() : nullptr, want.data(), rows, n, 1e-5f);
        DeviceBuffer<float> dx, dw;
        dx.upload(x);
        dw.upload(w);
        ASSERT_EQ(kernels::rms_norm_cuda(dx.get(), weighted ? dw.get() : nullptr, dx.get(), rows, n,
                                         1e-5f, nullptr),
                  cudaSuccess);
        // the scale: one sqrt and one division (<= 2 ulp each), then 2 products
        expect_close(dx.download(), want, 6, 0, "rms_norm");
      }
    }
  }
}

// x += h then rms_norm(x) into h (the forward's fused residual + norm): x exactly the CPU's
// add, y as rms_norm of it.
TEST(NnCuda, AddRmsNorm) {
  TKV_SKIP_WITHOUT_GPU();
  for (int64_t n : {576, 4096}) {
    const int64_t rows = 3;
    const auto x = random_vec(size_t(rows * n), 3.0f, 21);
    const auto h = random_vec(size_t(rows * n), 2.0f, 22);
    const auto w = random_vec(size_t(n), 1.0f, 23);
    std::vector<float> sum = x, want(x.size());
    kernels::add_inplace(sum.data(), h.data(), rows * n);
    kernels::rms_norm(sum.data(), w.data(), want.data(), rows, n, 1e-6f);
    DeviceBuffer<float> dx, dh, dw;
    dx.upload(x);
    dh.upload(h);
    dw.upload(w);
    ASSERT_EQ(
        kernels::add_rms_norm_cuda(dx.get(), dh.get(), dw.get(), dh.get(), rows, n, 1e-6f, nullptr),
        cudaSuccess);
    const auto got_x = dx.download();
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(got_x[i], sum[i]) << "x[" << i << "]";
    expect_close(dh.download(), want, 6, 0, "add_rms_norm");
  }
}

// The key rotation (KvScheme::k_rotated) bit for bit as the CPU's quant::rotate_key_rows.
TEST(NnCuda, FwhtRowsAsTheCpu) {
  TKV_SKIP_WITHOUT_GPU();
  for (int n : {64, 128, 256}) {
    const int64_t rows = 5;
    auto x = random_vec(size_t(rows * n), 4.0f, 31);
    const float* signs = quant::turbo_signs(n);
    ASSERT_NE(signs, nullptr);
    DeviceBuffer<float> dx, ds;
    dx.upload(x);
    ds.upload(std::vector<float>(signs, signs + n));
    ASSERT_EQ(
        kernels::fwht_rows_cuda(dx.get(), rows, n, ds.get(), quant::turbo_inv_sqrt(n), nullptr),
        cudaSuccess);
    quant::rotate_key_rows(x.data(), rows, n);
    const auto got = dx.download();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i]) << "n " << n << " element " << i;
  }
}

TEST(NnCuda, RopeBothModes) {
  TKV_SKIP_WITHOUT_GPU();
  const int64_t n_tokens = 5, n_heads = 3;
  for (auto mode : {kernels::RopeMode::kNorm, kernels::RopeMode::kNeox}) {
    for (int64_t hd : {64, 128}) {
      for (int64_t n_rot : {hd, hd / 2}) {
        auto x = random_vec(size_t(n_tokens * n_heads * hd), 1.0f, 21);
        const std::vector<int32_t> pos = {0, 1, 17, 999, 8191};
        std::vector<float> want = x;
        kernels::rope(want.data(), pos.data(), n_tokens, n_heads, hd, n_rot, 10000.0f, 1.0f, mode);
        DeviceBuffer<float> dx;
        DeviceBuffer<int32_t> dp;
        dx.upload(x);
        dp.upload(pos);
        ASSERT_EQ(kernels::rope_cuda(dx.get(), dp.get(), n_tokens, n_heads, hd, n_rot, 10000.0f,
                                     1.0f, mode, nullptr),
                  cudaSuccess);
        // The angles are the same floats; cos/sin within 2 ulp of |angle| scale ~1, so
        // each output moves by <= ~4 eps * (|x0| + |x1|); 1.0 floor for that sum.
        expect_close(dx.download(), want, 8, 1.0f, "rope");
      }
    }
  }
}

TEST(NnCuda, GatedActivations) {
  TKV_SKIP_WITHOUT_GPU();
  const size_t n = 4099;
  const auto g = random_vec(n, 4.0f, 31), u = random_vec(n, 1.0f, 32);
  for (bool silu : {true, false}) {
    std::vector<float> want = g;
    if (silu)
      kernels::silu_mul(want.data(), u.data(), int64_t(n));
    else
      kernels::gelu_tanh_mul(want.data(), u.data(), int64_t(n));
    DeviceBuffer<float> dg, du;
    dg.upload(g);
    du.upload(u);
    ASSERT_EQ(silu ? kernels::silu_mul_cuda(dg.get(), du.get(), int64_t(n), nullptr)
                   : kernels::gelu_tanh_mul_cuda(dg.get(), du.get(), int64_t(n), nullptr),
              cudaSuccess);
    // exp/tanh within 2 ulp of their value, which is O(1): where 1 + tanh (or
    // 1 + exp(-g)) cancels, that absolute error becomes relative to the small output,
    // so the bound is 16 eps |want| + 4 eps |g u| (seen on an H100: 4.8e-8 off a
    // GELU output of -9.2e-4, 440 eps of it).
    const auto got = dg.download();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
      const double bound = 16 * kEps * std::fabs(want[i]) + 4 * kEps * std::fabs(g[i] * u[i]);
      ASSERT_LE(std::fabs(double(got[i]) - want[i]), bound)
          << (silu ? "silu_mul" : "gelu_tanh_mul") << " at " << i << " g " << g[i];
    }
  }
}

// The int8 query grid equals the CPU fused attention's (the same fp32 operations and
// round-to-nearest-even), row by row, for head_dim 64, 128 and 256 and a zero row.
TEST(NnCuda, Int8QueryGrid) {
  TKV_SKIP_WITHOUT_GPU();
  for (const int d : {64, 128, 256}) {
    const int64_t rows = 37;
    auto q = random_vec(size_t(rows * d), 3.0f, 51 + d);
    for (int e = 0; e < d; ++e) q[size_t(5 * d + e)] = 0.0f;
    q[7] = 127.5f / 127.0f * 4.0f;  // a tie-prone value beside a large one
    q[8] = 4.0f;
    std::vector<float> want(q.size());
    kernels::fused_int8_query_rows(q.data(), rows, d, want.data());
    DeviceBuffer<float> dq;
    dq.upload(q);
    ASSERT_EQ(kernels::int8_grid_rows_cuda(dq.get(), rows, d, nullptr), cudaSuccess);
    EXPECT_EQ(dq.download(), want) << "head_dim " << d;
  }
}

TEST(NnCuda, ExactOps) {
  TKV_SKIP_WITHOUT_GPU();
  const int64_t rows = 7, n = 333;
  const auto y = random_vec(size_t(rows * n), 2.0f, 41), x = random_vec(y.size(), 2.0f, 42);
  const auto b = random_vec(size_t(n), 2.0f, 43);
  DeviceBuffer<float> dy, dx, db;
  {  // add_inplace
    std::vector<float> want = y;
    kernels::add_inplace(want.data(), x.data(), rows * n);
    dy.upload(y);
    dx.upload(x);
    ASSERT_EQ(kernels::add_inplace_cuda(dy.get(), dx.get(), rows * n, nullptr), cudaSuccess);
    EXPECT_EQ(dy.download(), want);
  }
  {  // add_bias
    std::vector<float> want = y;
    kernels::add_bias(want.data(), b.data(), rows, n);
    dy.upload(y);
    db.upload(b);
    ASSERT_EQ(kernels::add_bias_cuda(dy.get(), db.get(), rows, n, nullptr), cudaSuccess);
    EXPECT_EQ(dy.download(), want);
  }
  {  // scale_inplace
    std::vector<float> want = y;
    kernels::scale_inplace(want.data(), 24.0f, rows * n);
    dy.upload(y);
    ASSERT_EQ(kernels::scale_inplace_cuda(dy.get(), 24.0f, rows * n, nullptr), cudaSuccess);
    EXPECT_EQ(dy.download(), want);
  }
  {  // bf16 round trip: RNE as quant::f32_to_bf16, NaN kept
    std::vector<float> v = y;
    v[3] = std::numeric_limits<float>::quiet_NaN();
    v[4] = std::numeric_limits<float>::infinity();
    DeviceBuffer<uint16_t> dh(v.size());
    dy.upload(v);
    ASSERT_EQ(kernels::f32_to_bf16_cuda(dy.get(), dh.get(), int64_t(v.size()), nullptr),
              cudaSuccess);
    const auto h = dh.download();
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(h[i], f32_to_bf16(v[i])) << i;
    ASSERT_EQ(kernels::bf16_to_f32_cuda(dh.get(), dx.get(), int64_t(v.size()), nullptr),
              cudaSuccess);
    const auto back = dx.download();
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = bf16_to_f32(h[i]);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(back[i]));
      else
        EXPECT_EQ(back[i], want) << i;
    }
  }
  {  // gather_rows
    const std::vector<int32_t> idx = {6, 0, 3, 3};
    DeviceBuffer<int32_t> di;
    di.upload(idx);
    DeviceBuffer<float> dout(idx.size() * size_t(n));
    dy.upload(y);
    ASSERT_EQ(
        kernels::gather_rows_cuda(dy.get(), di.get(), dout.get(), int64_t(idx.size()), n, nullptr),
        cudaSuccess);
    const auto got = dout.download();
    for (size_t r = 0; r < idx.size(); ++r)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[r * size_t(n) + size_t(i)], y[size_t(idx[r] * n + i)]);
  }
}

}  // namespace
}  // namespace tkv
