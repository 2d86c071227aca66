// CUDA decode GEMV (gemv_cuda) = matmul_ref (exact dequantized weights, fp64 dot) for
// every supported GGUF type, n_in 576/640/1536/8960 (K-quants: 1536/2048/8960), n_out 1,
// 67 and 1031 (odd: rows straddle 16-byte boundaries and stages), 1/2/5/16 tokens, and one
// tall matrix per type (many stages per block). Weights are random valid blocks uploaded
// through PinnedStaging in small chunks; y is poisoned with NaN first, so every element must
// be written. Bound, per output (u = 2^-24, gamma = n_in u / (1 - n_in u) + u):
//   quantized weights: x is rounded to int8 as the CPU matmul rounds it for that weight
//   format (per 32 with an fp16 scale, K-quants per 256 with an fp32 scale), |x_i - xq_i|
//   <= e_i = c amax_block / 127 (c = 0.501: half a step plus the step's own rounding; 0.564
//   with the fp16 scale, which moves every step by up to 127 * 2^-11 of one); the min terms
//   (mn_i: Q4_1/Q4_K/Q5_K) meet the quantized x too, and for Q4_1 its sum is rounded to
//   fp16 (2^-11 (|x_i| + e_i) more per element), so
//   |y - ref| <= sum_i (|dq_i| + |mn_i|) e_i [+ |mn_i| 2^-11 (|x_i| + e_i)]
//               + gamma * sum_i (|dq_i| + |mn_i|) (|x_i| + e_i);
//   float weights: e = 0, dq = w: fp32 accumulation of n_in products in any order plus the
//   reference's rounding to fp32 (Higham's gamma, recursive or tree summation alike).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "device/cuda_upload.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul_cuda/matmul_cuda.h"
#include "quant/ggml_blocks.h"
#include "quant/half.h"
#include "tests/cuda/cuda_test_util.h"

namespace tkv::testing {
namespace {

using ggml::Type;
using Variant = kernels::GemvCudaParams::Variant;

const auto& kTypes = kCudaWeightTypes;

// The kernels that take a case: the block kernel always, the warp kernel where it plans one
// (quantized weights, n_in <= 4096, a few tokens).
std::vector<Variant> variants(Type t, int64_t n_in, int n_tokens) {
  kernels::GemvCudaParams p;
  p.type = t, p.n_in = n_in, p.n_out = 64, p.n_tokens = n_tokens, p.variant = Variant::kWarp;
  kernels::cuda_detail::GemvPlan plan;
  if (kernels::cuda_detail::gemv_plan(p, &plan)) return {Variant::kBlock, Variant::kWarp};
  return {Variant::kBlock};
}
const char* variant_name(Variant v) {
  return v == Variant::kWarp ? "warp" : "block";
}

struct Shape {
  int64_t n_in, n_out;
  int n_tokens;
};

// Checks one case; *worst gets max |err| / bound over the outputs (the margin left).
void check(Type t, const Shape& s, Variant kernel, std::mt19937& rng,
           device::PinnedStaging& staging, double* worst) {
  const std::string what = std::string(ggml::traits(t).name) + " n_in " + std::to_string(s.n_in) +
                           " n_out " + std::to_string(s.n_out) + " tokens " +
                           std::to_string(s.n_tokens) + " kernel " + variant_name(kernel);
  SCOPED_TRACE(what);
  const std::vector<uint8_t> w = random_ggml_weights(t, s.n_in, s.n_out, rng);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x((size_t)(s.n_in * s.n_tokens));
  for (float& v : x) v = n01(rng);
  std::vector<float> ref((size_t)(s.n_out * s.n_tokens));
  kernels::WeightView wv{w.data(), t, s.n_in, s.n_out};
  kernels::matmul_ref(wv, x.data(), ref.data(), s.n_tokens);

  auto dw = device::upload_to_device(w.data(), w.size(), staging);
  ASSERT_TRUE(dw.ok()) << dw.status().message();
  DeviceBuffer<float> dx, dy(ref.size());
  dx.upload(x);
  dy.upload(std::vector<float>(ref.size(), std::numeric_limits<float>::quiet_NaN()));
  kernels::GemvCudaParams p;
  p.w = dw.value().data(), p.type = t, p.n_in = s.n_in, p.n_out = s.n_out;
  p.n_tokens = s.n_tokens, p.x = dx.get(), p.y = dy.get(), p.variant = kernel;
  const Status st = kernels::gemv_cuda(p);
  ASSERT_TRUE(st.ok()) << st.message();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> y = dy.download();

  // dq: the weights with the min fields zeroed (w itself where the type has none).
  std::vector<uint8_t> w_nomin = w;
  const bool has_min = t == Type::kQ4_1 || t == Type::kQ4_K || t == Type::kQ5_K;
  const size_t bb = ggml::traits(t).block_bytes;
  if (has_min)
    for (size_t b = 0; b < w_nomin.size(); b += bb) w_nomin[b + 2] = w_nomin[b + 3] = 0;
  const bool quant = t != Type::kF32 && t != Type::kF16 && t != Type::kBF16;
  std::vector<float> row((size_t)s.n_in), dq((size_t)s.n_in), e((size_t)s.n_in);
  const double u = std::ldexp(1.0, -24), n = (double)s.n_in;
  const double gamma = n * u / (1.0 - n * u) + u;
  const size_t rb = ggml::row_bytes(t, s.n_in);
  for (int64_t o = 0; o < s.n_out; ++o) {
    kernels::dequantize_row(t, w.data() + rb * o, row.data(), s.n_in);
    kernels::dequantize_row(t, w_nomin.data() + rb * o, dq.data(), s.n_in);
    for (int tk = 0; tk < s.n_tokens; ++tk) {
      const float* xt = x.data() + tk * s.n_in;
      const bool k_quant = t == Type::kQ4_K || t == Type::kQ5_K || t == Type::kQ6_K;
      const int64_t blk = k_quant ? 256 : 32;
      const double c = k_quant ? 0.501 : 0.564, u16 = std::ldexp(1.0, -11);
      for (int64_t b = 0; b < s.n_in; b += blk) {
        double amax = 0.0;
        for (int64_t i = 0; i < blk; ++i) amax = std::max(amax, (double)std::fabs(xt[b + i]));
        for (int64_t i = 0; i < blk; ++i) e[b + i] = quant ? (float)(c * amax / 127.0) : 0.0f;
      }
      double mag = 0.0, qerr = 0.0;
      for (int64_t i = 0; i < s.n_in; ++i) {
        const double d = std::fabs((double)dq[i]), mn = std::fabs((double)row[i] - dq[i]);
        const double xe = std::fabs(xt[i]) + e[i];
        mag += (d + mn) * xe;
        qerr += (d + mn) * e[i] + (t == Type::kQ4_1 ? mn * u16 * xe : 0.0);
      }
      const size_t k = (size_t)(tk * s.n_out + o);
      ASSERT_TRUE(std::isfinite(y[k])) << "y[" << tk << ", " << o << "] not written or not finite";
      const double err = std::fabs((double)y[k] - ref[k]), bound = qerr + gamma * mag;
      ASSERT_LE(err, bound) << "y[" << tk << ", " << o << "] = " << y[k] << ", ref " << ref[k];
      if (bound > 0) *worst = std::max(*worst, err / bound);
    }
  }
}

TEST(MatmulCuda, MatchesReferencePerTypeAndShape) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(2026);
  device::PinnedStaging staging(4096);  // small chunks: the upload's double buffering runs
  for (Type t : kTypes) {
    double worst = 0.0;
    const bool k_quant = ggml::traits(t).block_elems == 256;
    const std::vector<int64_t> n_ins = k_quant ? std::vector<int64_t>{1536, 2048, 8960}
                                               : std::vector<int64_t>{576, 640, 1536, 8960};
    for (int64_t n_in : n_ins)
      for (int64_t n_out : {1, 67, 1031})
        for (int tokens : {1, 2, 3, 5, 16})
          for (Variant v : variants(t, n_in, tokens)) {
            check(t, {n_in, n_out, tokens}, v, rng, staging, &worst);
            if (HasFatalFailure()) return;
          }
    for (int64_t n_in : {k_quant ? 1536 : 576, 4096})
      for (int tokens : {1, 2, 3})
        for (Variant v : variants(t, n_in, tokens))
          check(t, {n_in, 20011, tokens}, v, rng, staging, &worst);
    std::printf("%-5s max |err| / bound %.3g\n", ggml::traits(t).name.data(), worst);
  }
}

// The GPU quantizes x exactly as the CPU matmul does (same int8 values, same scales), so
// against matmul_cpu only fp32 rounding differs: a few roundings per block product and the
// sum of at most n_in / 16 such products (any order), each side: |err| <= 2 (n_in / 16 + 4)
// u sum |w| |x|, about 5x below the gap an unrounded (fp32 instead of fp16) activation scale
// leaves and ~50x below different roundings of x (a random walk of 512 half-steps). x has
// outliers and an exact |x| tie of opposite signs in one 256-block (the K-quant scale
// takes the first one's sign).
TEST(MatmulCuda, SameIntegersAsTheCpuMatmul) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  device::PinnedStaging staging;
  ThreadPool pool(2);
  const int64_t n_in = 512, n_out = 67;
  const int n_tokens = 3;
  const double tol = 2 * (n_in / 16 + 4) * std::ldexp(1.0, -24);
  for (Type t : kTypes) {
    if (t == Type::kF32 || t == Type::kF16 || t == Type::kBF16) continue;
    SCOPED_TRACE(std::string(ggml::traits(t).name));
    const std::vector<uint8_t> w = random_ggml_weights(t, n_in, n_out, rng);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> x((size_t)(n_in * n_tokens));
    for (float& v : x) v = n01(rng);
    x[5] = -9.5f, x[100] = 9.5f, x[300] = 6.0f, x[n_in + 7] = -12.0f;
    kernels::WeightView wv{w.data(), t, n_in, n_out};
    std::vector<float> cpu((size_t)(n_out * n_tokens)), ref(cpu.size());
    kernels::matmul_cpu(wv, x.data(), cpu.data(), n_tokens, pool);
    auto dw = device::upload_to_device(w.data(), w.size(), staging);
    ASSERT_TRUE(dw.ok());
    DeviceBuffer<float> dx, dy(cpu.size());
    dx.upload(x);
    for (Variant v : variants(t, n_in, n_tokens)) {
      kernels::GemvCudaParams p;
      p.w = dw.value().data(), p.type = t, p.n_in = n_in, p.n_out = n_out;
      p.n_tokens = n_tokens, p.x = dx.get(), p.y = dy.get(), p.variant = v;
      ASSERT_TRUE(kernels::gemv_cuda(p).ok());
      const std::vector<float> y = dy.download();
      std::vector<float> row((size_t)n_in);
      double worst = 0;
      for (int64_t o = 0; o < n_out; ++o) {
        kernels::dequantize_row(t, w.data() + ggml::row_bytes(t, n_in) * o, row.data(), n_in);
        for (int tk = 0; tk < n_tokens; ++tk) {
          double mag = 0;  // |w| (|x| + a step): the products' size
          for (int64_t i = 0; i < n_in; ++i)
            mag += std::fabs((double)row[i]) * (std::fabs(x[tk * n_in + i]) + 0.1);
          const size_t k = (size_t)(tk * n_out + o);
          const double err = std::fabs((double)y[k] - cpu[k]), bound = tol * mag;
          ASSERT_LE(err, bound) << "y[" << tk << ", " << o << "] gpu " << y[k] << " cpu " << cpu[k];
          worst = std::max(worst, err / bound);
        }
      }
      std::printf("%-5s %-5s GPU vs CPU matmul: max |err| / bound %.3g\n",
                  ggml::traits(t).name.data(), variant_name(v), worst);
    }
  }
}

TEST(MatmulCuda, SameInputSameBits) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  device::PinnedStaging staging;
  const int64_t n_in = 1536, n_out = 4099;
  const std::vector<uint8_t> w = random_ggml_weights(Type::kQ4_K, n_in, n_out, rng);
  auto dw = device::upload_to_device(w.data(), w.size(), staging);
  ASSERT_TRUE(dw.ok());
  std::vector<float> x((size_t)n_in * 4);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (float& v : x) v = n01(rng);
  DeviceBuffer<float> dx, dy((size_t)n_out * 4);
  dx.upload(x);
  kernels::GemvCudaParams p;
  p.w = dw.value().data(), p.type = Type::kQ4_K, p.n_in = n_in, p.n_out = n_out;
  p.n_tokens = 4, p.x = dx.get(), p.y = dy.get();
  for (Variant v : variants(Type::kQ4_K, n_in, 4)) {
    p.variant = v;
    ASSERT_TRUE(kernels::gemv_cuda(p).ok());
    const std::vector<float> a = dy.download();
    ASSERT_TRUE(kernels::gemv_cuda(p).ok());
    EXPECT_EQ(0, std::memcmp(a.data(), dy.download().data(), a.size() * 4)) << variant_name(v);
  }
}

// A split output (fused Q|K|V) writes the same bits as the plain output, row ranges apart.
TEST(MatmulCuda, SplitOutputSameBits) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  device::PinnedStaging staging;
  const int64_t n_in = 1536, n_out = 1536 + 2 * 256;
  for (int tokens : {1, 3, 16})
    for (Variant var : variants(Type::kQ4_0, n_in, tokens)) {
      SCOPED_TRACE(variant_name(var));
      const std::vector<uint8_t> w = random_ggml_weights(Type::kQ4_0, n_in, n_out, rng);
      auto dw = device::upload_to_device(w.data(), w.size(), staging);
      ASSERT_TRUE(dw.ok());
      std::vector<float> x((size_t)n_in * tokens);
      std::normal_distribution<float> n01(0.0f, 1.0f);
      for (float& v : x) v = n01(rng);
      DeviceBuffer<float> dx, dy((size_t)n_out * tokens), dq((size_t)1536 * tokens),
          dk((size_t)256 * tokens), dv((size_t)256 * tokens);
      dx.upload(x);
      kernels::GemvCudaParams p;
      p.w = dw.value().data(), p.type = Type::kQ4_0, p.n_in = n_in, p.n_out = n_out;
      p.n_tokens = tokens, p.x = dx.get(), p.y = dy.get(), p.variant = var;
      ASSERT_TRUE(kernels::gemv_cuda(p).ok());
      p.y = dq.get(), p.y1 = dk.get(), p.y2 = dv.get(), p.split1 = 1536, p.split2 = 1536 + 256;
      ASSERT_TRUE(kernels::gemv_cuda(p).ok());
      const auto y = dy.download(), q = dq.download(), k = dk.download(), v = dv.download();
      for (int t = 0; t < tokens; ++t)
        for (int64_t o = 0; o < n_out; ++o) {
          const float got = o < 1536   ? q[t * 1536 + o]
                            : o < 1792 ? k[t * 256 + (o - 1536)]
                                       : v[t * 256 + (o - 1792)];
          ASSERT_EQ(got, y[t * n_out + o]) << "token " << t << " row " << o;
        }
    }
}

TEST(MatmulCuda, RejectsBadShapes) {
  kernels::GemvCudaParams p;
  alignas(16) static float buf[64];
  p.w = buf, p.x = buf, p.y = buf, p.type = Type::kQ4_K, p.n_in = 576, p.n_out = 4;
  EXPECT_FALSE(kernels::gemv_cuda(p).ok());  // 576 is not a multiple of 256
  p.type = Type::kQ8_0, p.n_tokens = kernels::kGemvMaxTokens + 1;
  EXPECT_FALSE(kernels::gemv_cuda(p).ok());
  p.n_tokens = 1, p.type = Type::kQ2_K;
  EXPECT_FALSE(kernels::gemv_cuda(p).ok());
  p.type = Type::kQ8_0, p.w = buf + 1;
  EXPECT_FALSE(kernels::gemv_cuda(p).ok());
  p.w = buf, p.type = Type::kF16, p.n_in = 64, p.variant = Variant::kWarp;
  EXPECT_FALSE(kernels::gemv_cuda(p).ok());  // the warp kernel takes quantized weights only
  p.type = Type::kQ8_0, p.n_in = 8192;
  EXPECT_FALSE(kernels::gemv_cuda(p).ok());  // ... and rows of up to 4096
}

}  // namespace
}  // namespace tkv::testing
