// CUDA prefill GEMM (gemm_cuda): the bf16 dequantization bit for bit against the CPU's
// dequantize_row rounded to bf16, for every supported GGUF type; then y = W x against
// matmul_ref for 17..512 tokens, odd row counts and a matrix of two slabs. Bound per
// output (u = 2^-8, bf16's unit roundoff; W and x each rounded once, their product exact
// in fp32; fp32 sums of n_in terms in any order, gamma = n_in 2^-24 / (1 - n_in 2^-24);
// the reference's own rounding to fp32):
//   |y - ref| <= ((1 + u)^2 - 1 + gamma (1 + u)^2) sum_i |w_i x_i| + 2^-24 |ref|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "device/cuda_upload.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul_cuda/gemm_cuda.h"
#include "quant/half.h"
#include "tests/cuda/cuda_test_util.h"

namespace tkv::testing {
namespace {

using ggml::Type;

const auto& kTypes = kCudaWeightTypes;

class Cublas {
 public:
  Cublas() {
    const Status st = kernels::gemm_cuda_create(&h_);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  ~Cublas() { kernels::gemm_cuda_destroy(h_); }
  void* get() const { return h_; }

 private:
  void* h_ = nullptr;
};

TEST(GemmCuda, DequantizesToBf16AsTheCpu) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  device::PinnedStaging staging;
  for (Type t : kTypes) {
    SCOPED_TRACE(std::string(ggml::traits(t).name));
    const int64_t n_in = 2048, n_out = 37;
    const std::vector<uint8_t> w = random_ggml_weights(t, n_in, n_out, rng);
    auto dw = device::upload_to_device(w.data(), w.size(), staging);
    ASSERT_TRUE(dw.ok());
    DeviceBuffer<uint16_t> out((size_t)(n_in * n_out));
    out.fill_bytes(0xFF);
    TKV_CUDA_CHECK(
        kernels::cuda_detail::dequant_bf16(dw.value().data(), t, n_out, n_in, out.get(), nullptr));
    const std::vector<uint16_t> got = out.download();
    std::vector<float> row((size_t)n_in);
    const size_t rb = ggml::row_bytes(t, n_in);
    for (int64_t o = 0; o < n_out; ++o) {
      kernels::dequantize_row(t, w.data() + rb * o, row.data(), n_in);
      for (int64_t i = 0; i < n_in; ++i)
        ASSERT_EQ(got[(size_t)(o * n_in + i)], f32_to_bf16(row[(size_t)i]))
            << "row " << o << " element " << i << " (" << row[(size_t)i] << ")";
    }
  }
}

void check(Cublas& cb, Type t, int64_t n_in, int64_t n_out, int64_t n_tokens, std::mt19937& rng,
           device::PinnedStaging& staging, double* worst) {
  SCOPED_TRACE(std::string(ggml::traits(t).name) + " n_in " + std::to_string(n_in) + " n_out " +
               std::to_string(n_out) + " tokens " + std::to_string(n_tokens));
  const std::vector<uint8_t> w = random_ggml_weights(t, n_in, n_out, rng);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x((size_t)(n_in * n_tokens));
  for (float& v : x) v = n01(rng);
  std::vector<float> ref((size_t)(n_out * n_tokens));
  kernels::matmul_ref({w.data(), t, n_in, n_out}, x.data(), ref.data(), n_tokens);
  auto dw = device::upload_to_device(w.data(), w.size(), staging);
  ASSERT_TRUE(dw.ok());
  DeviceBuffer<float> dx, dy;
  dx.upload(x);
  dy.upload(std::vector<float>(ref.size(), std::numeric_limits<float>::quiet_NaN()));
  DeviceBuffer<uint8_t> scratch((size_t)kernels::gemm_cuda_scratch_bytes(n_in, n_out, n_tokens));
  kernels::GemmCudaParams p;
  p.w = dw.value().data(), p.type = t, p.n_in = n_in, p.n_out = n_out, p.n_tokens = n_tokens;
  p.x = dx.get(), p.y = dy.get(), p.scratch = scratch.get();
  p.scratch_bytes = (int64_t)scratch.size(), p.cublas = cb.get();
  const Status st = kernels::gemm_cuda(p, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> y = dy.download();
  const double u = std::ldexp(1.0, -8), u24 = std::ldexp(1.0, -24), n = (double)n_in;
  const double gamma = n * u24 / (1.0 - n * u24);
  const double rel = (1 + u) * (1 + u) - 1 + gamma * (1 + u) * (1 + u);
  std::vector<float> row((size_t)n_in);
  const size_t rb = ggml::row_bytes(t, n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    kernels::dequantize_row(t, w.data() + rb * o, row.data(), n_in);
    for (int64_t tk = 0; tk < n_tokens; ++tk) {
      double mag = 0;
      for (int64_t i = 0; i < n_in; ++i) mag += std::fabs((double)row[i] * x[tk * n_in + i]);
      const size_t k = (size_t)(tk * n_out + o);
      ASSERT_TRUE(std::isfinite(y[k])) << "y[" << tk << ", " << o << "] not written";
      const double err = std::fabs((double)y[k] - ref[k]);
      const double bound = rel * mag + u24 * std::fabs(ref[k]);
      ASSERT_LE(err, bound) << "y[" << tk << ", " << o << "] = " << y[k] << ", ref " << ref[k];
      if (bound > 0) *worst = std::max(*worst, err / bound);
    }
  }
}

TEST(GemmCuda, MatchesReferencePerTypeAndShape) {
  TKV_SKIP_WITHOUT_GPU();
  Cublas cb;
  std::mt19937 rng(2027);
  device::PinnedStaging staging;
  for (Type t : kTypes) {
    double worst = 0;
    const int64_t n_in = ggml::traits(t).block_elems == 256 ? 1536 : 576;
    for (int64_t n_out : {67, 1031})
      for (int64_t tokens : {17, 64, 100}) {
        check(cb, t, n_in, n_out, tokens, rng, staging, &worst);
        if (HasFatalFailure()) return;
      }
    check(cb, t, 4096, 256, 512, rng, staging, &worst);
    if (HasFatalFailure()) return;
    std::printf("%-5s gemm max |err| / bound %.3g\n", ggml::traits(t).name.data(), worst);
  }
}

// A matrix of more than one slab (kGemmSlabBytes of bf16 rows): the slabs' rows land in
// their columns of y.
TEST(GemmCuda, SeveralSlabs) {
  TKV_SKIP_WITHOUT_GPU();
  Cublas cb;
  std::mt19937 rng(9);
  device::PinnedStaging staging;
  const int64_t n_in = 8192, n_out = kernels::kGemmSlabBytes / (2 * n_in) * 2 + 77;
  double worst = 0;
  check(cb, Type::kQ8_0, n_in, n_out, 33, rng, staging, &worst);
  std::printf("q8_0 %lld rows (3 slabs): max |err| / bound %.3g\n", (long long)n_out, worst);
}

TEST(GemmCuda, RejectsBadArguments) {
  TKV_SKIP_WITHOUT_GPU();
  alignas(16) static float buf[64];
  Cublas cb;
  kernels::GemmCudaParams p;
  p.w = buf, p.x = buf, p.y = buf, p.scratch = buf, p.cublas = cb.get();
  p.type = Type::kQ8_0, p.n_in = 64, p.n_out = 4, p.n_tokens = 40;
  p.scratch_bytes = 16;  // needs 2 * 64 * (4 + 40)
  EXPECT_FALSE(kernels::gemm_cuda(p, nullptr).ok());
  p.scratch_bytes = kernels::gemm_cuda_scratch_bytes(64, 4, 40);
  p.type = Type::kQ2_K;
  EXPECT_FALSE(kernels::gemm_cuda(p, nullptr).ok());
  p.type = Type::kQ4_K;  // 64 is not a multiple of 256
  EXPECT_FALSE(kernels::gemm_cuda(p, nullptr).ok());
}

}  // namespace
}  // namespace tkv::testing
