// kvcodec_cpu (AVX-512 and AVX2 variants, threaded) must equal kvcodec_ref bit for
// bit — encoded planes and dequantized K/V (full and rotated) — for every scheme and
// head_dim, on random rows plus edge rows (zeros, constants, ±65504, denormals,
// NaN/Inf, huge offsets) and row counts that are not multiples of anything.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kvcodec/kvcodec.h"

namespace tkv::kernels {
namespace {

using quant::KvKind;
using quant::KvScheme;

std::vector<KvScheme> all_schemes(int d) {
  std::vector<KvScheme> out = {{KvKind::kBf16, 16, 16, d},
                               {KvKind::kAffine, 4, 4, d},
                               {KvKind::kAffine, 8, 8, d},
                               {KvKind::kAffine, 4, 8, d}};
  for (int k : {2, 3, 4, 5, 8})
    for (int v : {1, 2, 3, 4, 5, 8}) out.push_back({KvKind::kTurbo, k, v, d});
  for (int v : {2, 3}) out.push_back({KvKind::kTurbo, 8, v, d, true});
  for (int v : {2, 3, 4, 5}) {  // the absmax value codebook (signed scales)
    KvScheme s{KvKind::kTurbo, 8, v, d};
    s.v_absmax = true;
    s.k_symmetric = v == 4;
    out.push_back(s);
  }
  for (int k : {4, 5, 8})  // symmetric keys
    for (int v : {3, 4}) {
      KvScheme s{KvKind::kTurbo, k, v, d};
      s.k_symmetric = true;
      out.push_back(s);
    }
  for (int v : {1, 2, 3, 4, 5, 8}) {  // the MSE-fitted V scale: the SIMD search == the scalar one
    KvScheme s{KvKind::kTurbo, 4, v, d};
    s.v_mse_scale = true;
    out.push_back(s);
  }
  return out;
}

// Rows 0..7 are edge cases, the rest N(0, sigma) with per-row offsets/outliers.
std::vector<float> make_rows(int64_t n_rows, int d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n_rows * d);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x.data() + r * d;
    for (int i = 0; i < d; ++i) {
      const float g = nd(rng);
      switch (r) {
        case 0:
          row[i] = 0.0f;
          break;  // all zero (padded dims)
        case 1:
          row[i] = i < 40 ? 3.25f : -0.0f;
          break;  // constant groups, -0
        case 2:
          row[i] = (i % 3 == 0) ? 65504.0f : -65504.0f;
          break;  // fp16 extremes
        case 3:
          row[i] = (i % 2 ? 1.0f : -1.0f) * 5.96e-8f * (1 + i % 7);
          break;  // fp16 subnormals
        case 4:
          row[i] = i % 5 == 0 ? NAN : i % 5 == 1 ? INFINITY : i % 5 == 2 ? -INFINITY : g;
          break;
        case 5:
          row[i] = 1000.0f + 1e-3f * g;
          break;  // fp16 quotient overflow
        case 6:
          row[i] = g * 1e-30f;
          break;  // fp32 denormal-ish, below fp16
        case 7:
          row[i] = g * (i % 17 == 0 ? 3000.0f : 1.0f);
          break;  // outliers
        default:
          row[i] = g * (0.1f + (float)(r % 5)) + (float)(r % 3);
          break;
      }
    }
  }
  return x;
}

struct Buffers {
  std::vector<uint8_t> rows;
  KvPlanes planes;
  Buffers(const KvScheme& s, int64_t n_rows) {
    const quant::KvRowLayout l = quant::kv_row_layout(s);
    rows.assign(n_rows * l.row_bytes, 0xA5);  // poison: every byte must be written
    planes = kv_planes_interleaved(rows.data(), l);
  }
};

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void expect_same_floats(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(bits_of(a[i]), bits_of(b[i]))
        << what << " at " << i << ": cpu " << a[i] << " ref " << b[i];
    ASSERT_TRUE(std::isfinite(a[i])) << what << " non-finite at " << i;
  }
}

void check_scheme(const KvScheme& s, int64_t n_rows, ThreadPool* pool) {
  const int d = s.head_dim;
  const std::string what = quant::kv_scheme_name(s) + " d" + std::to_string(d);
  const std::vector<float> k = make_rows(n_rows, d, 1234u + d), v = make_rows(n_rows, d, 99u + d);
  Buffers ref(s, n_rows), cpu(s, n_rows);
  kvcodec_encode_ref({s, n_rows, k.data(), v.data(), ref.planes});
  kvcodec_encode_cpu({s, n_rows, k.data(), v.data(), cpu.planes}, pool);
  for (size_t i = 0; i < ref.rows.size(); ++i)
    ASSERT_EQ(cpu.rows[i], ref.rows[i]) << what << " encoded byte " << i << " (row "
                                        << i / quant::kv_row_layout(s).row_bytes << ")";
  for (bool rotated : {false, true}) {
    std::vector<float> kr(n_rows * d), vr(n_rows * d), kc(n_rows * d), vc(n_rows * d);
    kvcodec_dequant_ref({s, n_rows, ref.planes, kr.data(), vr.data(), rotated});
    kvcodec_dequant_cpu({s, n_rows, ref.planes, kc.data(), vc.data(), rotated}, pool);
    ASSERT_NO_FATAL_FAILURE(expect_same_floats(kc, kr, what + " K"));
    ASSERT_NO_FATAL_FAILURE(expect_same_floats(vc, vr, what + (rotated ? " V rotated" : " V")));
    if (rotated && s.kind == KvKind::kTurbo) {  // deferred un-rotation == full dequant
      turbo_v_unrotate_cpu(vc.data(), n_rows, d, pool);
      std::vector<float> full(n_rows * d);
      kvcodec_dequant_ref({s, n_rows, ref.planes, nullptr, full.data(), false});
      ASSERT_NO_FATAL_FAILURE(expect_same_floats(vc, full, what + " unrotate"));
      turbo_v_unrotate_ref(vr.data(), n_rows, d);
      ASSERT_NO_FATAL_FAILURE(expect_same_floats(vr, full, what + " unrotate ref"));
    }
  }
}

class KvCodecIsa : public ::testing::TestWithParam<KvCpuIsa> {
 protected:
  void SetUp() override {
    if (!kvcodec_cpu_set_isa(GetParam())) GTEST_SKIP() << "CPU lacks this ISA";
  }
  void TearDown() override { (void)kvcodec_cpu_set_isa(KvCpuIsa::kAuto); }
};

TEST_P(KvCodecIsa, CpuEqualsRefEverySchemeAndHeadDim) {
  ThreadPool single(1);
  for (int d : {64, 128, 256, 512})
    for (const KvScheme& s : all_schemes(d)) ASSERT_NO_FATAL_FAILURE(check_scheme(s, 13, &single));
}

TEST_P(KvCodecIsa, ThreadedLargeBatchEqualsRef) {
  ThreadPool pool(3);
  for (int d : {64, 256})
    for (const KvScheme& s : {KvScheme{KvKind::kTurbo, 8, 3, d}, KvScheme{KvKind::kTurbo, 4, 2, d},
                              KvScheme{KvKind::kAffine, 4, 4, d},
                              KvScheme{KvKind::kTurbo, 4, 3, d, false, false, true}})
      ASSERT_NO_FATAL_FAILURE(check_scheme(s, 1031, &pool));
}

INSTANTIATE_TEST_SUITE_P(Isa, KvCodecIsa, ::testing::Values(KvCpuIsa::kAvx2, KvCpuIsa::kAvx512),
                         [](const auto& isa_info) {
                           return isa_info.param == KvCpuIsa::kAvx2 ? "avx2" : "avx512";
                         });

TEST(KvCodec, SeparatePlanesEqualInterleaved) {
  const KvScheme s{KvKind::kTurbo, 5, 3, 128};
  const quant::KvRowLayout l = quant::kv_row_layout(s);
  const int64_t n = 7;
  const std::vector<float> k = make_rows(n, 128, 5), v = make_rows(n, 128, 6);
  Buffers inter(s, n);
  kvcodec_encode_cpu({s, n, k.data(), v.data(), inter.planes});
  std::vector<uint8_t> kd(n * l.k_data_bytes), vd(n * l.v_data_bytes), ks(n * l.k_scale_bytes),
      kz(n * l.k_zero_bytes), vs(n * l.v_scale_bytes);
  const KvPlanes sep =
      kv_planes_separate(l, kd.data(), vd.data(), ks.data(), kz.data(), vs.data(), nullptr);
  kvcodec_encode_cpu({s, n, k.data(), v.data(), sep});
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = inter.rows.data() + r * l.row_bytes;
    EXPECT_EQ(0, std::memcmp(row + l.k_data_offset, kd.data() + r * l.k_data_bytes, l.k_data_bytes))
        << r;
    EXPECT_EQ(0, std::memcmp(row + l.v_data_offset, vd.data() + r * l.v_data_bytes, l.v_data_bytes))
        << r;
    EXPECT_EQ(0,
              std::memcmp(row + l.k_scale_offset, ks.data() + r * l.k_scale_bytes, l.k_scale_bytes))
        << r;
    EXPECT_EQ(0, std::memcmp(row + l.k_zero_offset, kz.data() + r * l.k_zero_bytes, l.k_zero_bytes))
        << r;
    EXPECT_EQ(0,
              std::memcmp(row + l.v_scale_offset, vs.data() + r * l.v_scale_bytes, l.v_scale_bytes))
        << r;
  }
}

}  // namespace
}  // namespace tkv::kernels
