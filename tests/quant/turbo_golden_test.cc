// Bit-exactness of the TurboQuant codec (src/quant/turbo_*.h) against every golden
// in tests/data/goldens/turboquant_tables.json ("golden") and turboquant_vectors.json:
// indices, fp16 scales/zeros, packed bytes, dequantized K, decoded V, forward FWHT,
// sign tables and boundaries. Every comparison is exact (bits), no tolerance.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "quant/turbo_tables.h"
#include "quant/turbo_v.h"

namespace tkv::quant {
namespace {

using nlohmann::json;

json load(const char* name) {
  std::ifstream f(std::string(TKV_SOURCE_DIR) + "/tests/data/goldens/" + name);
  EXPECT_TRUE(f.good()) << "missing golden " << name;
  return json::parse(f);
}
const json& tables() {
  static const json j = load("turboquant_tables.json");
  return j;
}
const json& vectors() {
  static const json j = load("turboquant_vectors.json");
  return j;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// Golden floats must be exact fp16 values; returns their fp16 bits.
uint16_t golden_f16(double v) {
  const uint16_t h = f32_to_f16((float)v);
  EXPECT_EQ((double)f16_to_f32(h), v) << "golden value not fp16-exact";
  return h;
}

// Exact comparison of two float arrays (bit patterns), reporting the first mismatch.
void expect_bits_eq(const std::vector<float>& got, const json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = (float)want[i].get<double>();
    ASSERT_EQ((double)w, want[i].get<double>()) << what << ": golden not fp32-exact at " << i;
    ASSERT_EQ(bits_of(got[i]), bits_of(w))
        << what << " [" << i << "] got " << got[i] << " want " << w;
  }
}

struct KCase {
  int bits;
  bool is_signed;
};

void check_k(const json& input, const json& g, KCase kc, const std::string& what) {
  const int d = (int)input.size();
  std::vector<float> x(d);
  for (int i = 0; i < d; ++i) x[i] = (float)input[i].get<double>();
  std::vector<uint8_t> packed(d * kc.bits / 8);
  std::vector<uint16_t> scale(d / 32), zero(d / 32);
  turbo_k_encode_row(x.data(), d, kc.bits, kc.is_signed, packed.data(), scale.data(), zero.data());
  for (int gi = 0; gi < d / 32; ++gi) {
    ASSERT_EQ(scale[gi], golden_f16(g["scale_fp16"][gi].get<double>()))
        << what << " scale group " << gi;
    ASSERT_EQ(zero[gi], golden_f16(g["zero_fp16"][gi].get<double>()))
        << what << " zero group " << gi;
  }
  for (int i = 0; i < (int)packed.size(); ++i)
    ASSERT_EQ(packed[i], g["packed_u8"][i].get<int>()) << what << " byte " << i;
  for (int i = 0; i < d; ++i) {
    const uint32_t stored = bitpack_get(packed.data(), i, kc.bits);
    const int idx = kc.is_signed ? (int)(int8_t)stored : (int)stored;
    ASSERT_EQ(idx, g["idx"][i].get<int>()) << what << " idx " << i;
  }
  std::vector<float> deq(d);
  turbo_k_dequant_row(packed.data(), scale.data(), zero.data(), d, kc.bits, kc.is_signed,
                      deq.data());
  expect_bits_eq(deq, g["dequant_f32"], fmt::format("{} dequant", what));
}

void check_v(const json& input, const json& g, int bits, const std::string& what) {
  const int d = (int)input.size();
  std::vector<float> x(d), scratch(d), out(d);
  for (int i = 0; i < d; ++i) x[i] = (float)input[i].get<double>();
  std::vector<uint8_t> packed(d * bits / 8);
  std::vector<uint16_t> scale(d / 32);
  turbo_v_encode_row(x.data(), d, bits, turbo_signs(d), turbo_inv_sqrt(d), turbo_boundaries(bits),
                     scratch.data(), packed.data(), scale.data());
  for (int gi = 0; gi < d / 32; ++gi)
    ASSERT_EQ(scale[gi], golden_f16(g["scale_fp16"][gi].get<double>()))
        << what << " scale group " << gi;
  for (int i = 0; i < (int)packed.size(); ++i)
    ASSERT_EQ(packed[i], g["packed_u8"][i].get<int>()) << what << " byte " << i;
  for (int i = 0; i < d; ++i)
    ASSERT_EQ((int)bitpack_get(packed.data(), i, bits), g["idx"][i].get<int>())
        << what << " idx " << i;
  turbo_v_dequant_row(packed.data(), scale.data(), d, bits, turbo_centroids(bits), turbo_signs(d),
                      turbo_inv_sqrt(d), out.data());
  expect_bits_eq(out, g["decoded_f32"], fmt::format("{} decoded", what));
}

TEST(TurboGolden, VectorsFileKeys) {
  const std::pair<const char*, KCase> schemes[] = {{"k8s", {8, true}}, {"k8u", {8, false}},
                                                   {"k5", {5, false}}, {"k4", {4, false}},
                                                   {"k3", {3, false}}, {"k2", {2, false}}};
  int n = 0;
  for (const json& vec : vectors()["vectors"]) {
    for (const auto& [name, kc] : schemes) {
      const std::string what = fmt::format("d{} {} {}", vec["head_dim"].get<int>(),
                                           vec["kind"].get<std::string>(), name);
      ASSERT_NO_FATAL_FAILURE(check_k(vec["input"], vec["k"][name], kc, what));
      ++n;
    }
  }
  EXPECT_EQ(n, 20 * 6);
}

TEST(TurboGolden, VectorsFileValues) {
  int n = 0;
  for (const json& vec : vectors()["vectors"]) {
    for (int bits : {1, 2, 3, 4, 5, 8}) {
      const std::string name = fmt::format("v{}", bits);
      const std::string what = fmt::format("d{} {} {}", vec["head_dim"].get<int>(),
                                           vec["kind"].get<std::string>(), name);
      ASSERT_NO_FATAL_FAILURE(check_v(vec["input"], vec["v"][name], bits, what));
      ++n;
    }
  }
  EXPECT_EQ(n, 20 * 6);
}

TEST(TurboGolden, TablesFileGolden) {
  const json& g = tables()["golden"];
  const std::pair<const char*, KCase> ks[] = {{"k_q8_0", {8, true}},
                                              {"k_uint8", {8, false}},
                                              {"k_q5_0", {5, false}},
                                              {"k_q4_0", {4, false}},
                                              {"k_uint2", {2, false}}};
  const std::pair<const char*, int> vs[] = {
      {"v_2bit", 2}, {"v_3bit", 3}, {"v_4bit", 4}, {"v_5bit", 5}, {"v_8bit", 8}};
  for (int t = 0; t < 2; ++t) {
    const json& in = g["input_fp16_d128"][t];
    for (const auto& [name, kc] : ks) {
      json one;
      for (const char* f : {"idx", "scale_fp16", "zero_fp16", "packed_u8", "dequant_f32"})
        one[f] = g[name][f][t];
      ASSERT_NO_FATAL_FAILURE(check_k(in, one, kc, fmt::format("{} #{}", name, t)));
    }
    for (const auto& [name, bits] : vs) {
      json one;
      for (const char* f : {"idx", "scale_fp16", "packed_u8", "decoded_f32"})
        one[f] = g[name][f][t];
      ASSERT_NO_FATAL_FAILURE(check_v(in, one, bits, fmt::format("{} #{}", name, t)));
    }
  }
}

TEST(TurboGolden, ForwardFwhtBasis) {
  const json& g = tables()["golden"]["fwht_fwd_d128_basis_e0_e5"];
  const int basis[2] = {0, 5};
  for (int t = 0; t < 2; ++t) {
    std::vector<float> x(128, 0.0f);
    x[basis[t]] = 1.0f;
    fwht_forward(x.data(), 128, turbo_signs(128), turbo_inv_sqrt(128));
    expect_bits_eq(x, g[t], fmt::format("fwht e{}", basis[t]));
  }
}

TEST(TurboGolden, SignTables) {
  for (int d : {64, 128, 256, 512}) {
    const json& s = tables()[fmt::format("signs_{}", d)];
    const json& s01 = tables()[fmt::format("signs01_{}", d)];
    ASSERT_EQ((int)s.size(), d);
    for (int i = 0; i < d; ++i) {
      ASSERT_EQ(turbo_signs(d)[i], (float)s[i].get<int>()) << "d" << d << " sign " << i;
      ASSERT_EQ(turbo_signs(d)[i], 1.0f - 2.0f * s01[i].get<int>()) << "d" << d << " sign01 " << i;
    }
    EXPECT_EQ(turbo_inv_sqrt(d),
              (float)tables()["_meta"]["fwht_inv_sqrt_n_f32"][std::to_string(d)].get<double>());
  }
  EXPECT_EQ(turbo_signs(32), nullptr);
}

TEST(TurboGolden, CodebooksAndMetalBoundaries) {
  for (int b : {1, 2, 3, 4, 5, 8}) {
    const json& c = tables()[fmt::format("centroids_{}", b)];
    const json& bnd =
        tables()[b == 3 ? std::string("boundaries_3_metal") : fmt::format("boundaries_{}", b)];
    ASSERT_EQ((int)c.size(), 1 << b);
    for (int i = 0; i < (1 << b); ++i)
      ASSERT_EQ(turbo_centroids(b)[i], (float)c[i].get<double>()) << b << " c" << i;
    for (int i = 0; i + 1 < (1 << b); ++i) {
      const float mid = 0.5f * (turbo_centroids(b)[i] + turbo_centroids(b)[i + 1]);
      ASSERT_EQ(bits_of(turbo_boundaries(b)[i]), bits_of(mid)) << b << " midpoint " << i;
      ASSERT_EQ(turbo_boundaries(b)[i], (float)bnd[i].get<double>()) << b << " boundary " << i;
    }
  }
  // The Python BOUNDARIES_3BIT differs from the kernel's midpoint by 1 ulp (spec §2.4).
  EXPECT_NE(turbo_boundaries(3)[0], (float)tables()["boundaries_3"][0].get<double>());
}

}  // namespace
}  // namespace tkv::quant
