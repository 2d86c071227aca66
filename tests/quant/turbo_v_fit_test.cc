// The MSE-fitted value scale (KvScheme::v_mse_scale, --kv-quant turbo:k<K>[r]v<V>m,
// quant/turbo_v_fit.h): per group its squared error is never above the RMS scale's and is
// clearly lower on average; its rows decode through the unchanged dequant as c[idx]*s; and
// the spelling round-trips and is refused where it does not apply. Measured mean error
// reduction over 4000 groups (Gaussian / Student-t with 3 degrees of freedom): 2 bits
// 6.3% / 7.1%, 3 bits 20.5% / 48.5%, 4 bits 30.8% / 80.4%.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "quant/kv_scheme.h"
#include "quant/turbo_tables.h"
#include "quant/turbo_v.h"

namespace tkv::quant {
namespace {

// Rotated-domain values of one 32-group: N(0, 0.5^2), or 0.3 * Student-t(3) (heavy tails).
std::vector<float> group_values(std::mt19937& rng, bool heavy) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::student_t_distribution<float> td(3.0f);
  std::vector<float> r(kTurboGroup);
  for (float& x : r) x = heavy ? 0.3f * td(rng) : 0.5f * nd(rng);
  return r;
}

// The group's squared error sum_i (h(r_i) - c[idx_i]*s)^2 as the fit sums it.
float group_error(const std::vector<float>& r, const uint8_t* idx, uint16_t scale, int bits) {
  const float s = f16_to_f32(scale);
  float e2[kTurboGroup];
  for (int i = 0; i < kTurboGroup; ++i) {
    const float d = add_rn(round_f16(r[i]), -mul_rn(turbo_centroids(bits)[idx[i]], s));
    e2[i] = mul_rn(d, d);
  }
  return turbo_v_fit_sum(e2);
}

TEST(TurboVFit, NeverWorsePerGroupAndLowerOnAverage) {
  struct Floor {
    int bits;
    double gauss, heavy;  // the least mean reduction accepted (measured: see the top)
  };
  for (const Floor f : {Floor{2, 0.04, 0.05}, Floor{3, 0.15, 0.35}, Floor{4, 0.22, 0.6}}) {
    for (const bool heavy : {false, true}) {
      std::mt19937 rng(1000 + f.bits);
      double sum_rms = 0, sum_fit = 0;
      for (int g = 0; g < 4000; ++g) {
        const std::vector<float> r = group_values(rng, heavy);
        uint8_t idx_rms[kTurboGroup], idx_fit[kTurboGroup];
        const uint16_t s_rms =
            turbo_v_encode_group(r.data(), turbo_boundaries(f.bits), f.bits, idx_rms);
        const uint16_t s_fit = turbo_v_encode_group(r.data(), turbo_boundaries(f.bits), f.bits,
                                                    idx_fit, turbo_centroids(f.bits));
        const float e_rms = group_error(r, idx_rms, s_rms, f.bits);
        const float e_fit = group_error(r, idx_fit, s_fit, f.bits);
        ASSERT_LE(e_fit, e_rms) << f.bits << " bits, group " << g << (heavy ? " heavy" : "");
        sum_rms += e_rms;
        sum_fit += e_fit;
      }
      const double reduction = 1.0 - sum_fit / sum_rms;
      std::printf("%d bits %s: mean squared error -%.1f%%\n", f.bits, heavy ? "t3" : "gauss",
                  100.0 * reduction);
      EXPECT_GT(reduction, heavy ? f.heavy : f.gauss) << f.bits << " bits";
    }
  }
}

// The group's squared error of a decode c[idx]*s on the codebook c.
float group_error_on(const std::vector<float>& r, const uint8_t* idx, uint16_t scale,
                     const float* c) {
  const float s = f16_to_f32(scale);
  float e2[kTurboGroup];
  for (int i = 0; i < kTurboGroup; ++i) {
    const float d = add_rn(round_f16(r[i]), -mul_rn(c[idx[i]], s));
    e2[i] = mul_rn(d, d);
  }
  return turbo_v_fit_sum(e2);
}

// KvScheme::v_absmax: per group never worse than its own starting point (the signed extreme
// as the scale, the extreme on the top level), and on average below the fitted RMS scale
// (suffix m) on Gaussian groups, and on heavy-tailed ones up to 4 bits.
TEST(TurboVAbsmax, NeverWorseThanTheExtremeAndBelowTheFittedRms) {
  for (int bits : {2, 3, 4, 5}) {
    const float* ca = turbo_absmax_centroids(bits);
    const float* ba = turbo_absmax_boundaries(bits);
    ASSERT_TRUE(ca && ba);
    EXPECT_EQ(ca[(1 << bits) - 1], 1.0f);
    for (const bool heavy : {false, true}) {
      std::mt19937 rng(2000 + bits);
      double sum_m = 0, sum_a = 0;
      for (int g = 0; g < 4000; ++g) {
        const std::vector<float> r = group_values(rng, heavy);
        std::vector<float> rh(kTurboGroup);
        for (int i = 0; i < kTurboGroup; ++i) rh[i] = round_f16(r[i]);
        uint8_t idx_m[kTurboGroup], idx_a[kTurboGroup], idx_x[kTurboGroup];
        const uint16_t s_m = turbo_v_encode_group(r.data(), turbo_boundaries(bits), bits, idx_m,
                                                  turbo_centroids(bits));
        const uint16_t s_a = turbo_v_encode_group(r.data(), ba, bits, idx_a, ca, true);
        const float m = turbo_v_signed_extreme(rh.data());
        for (int i = 0; i < kTurboGroup; ++i)
          idx_x[i] = static_cast<uint8_t>(turbo_v_bucket(f16_div(rh[i], m), ba, bits));
        const float e_a = group_error_on(r, idx_a, s_a, ca);
        ASSERT_LE(e_a, group_error_on(r, idx_x, f32_to_f16(m), ca)) << bits << " bits, group " << g;
        ASSERT_EQ(f16_to_f32(s_a) < 0.0f, m < 0.0f) << "the scale keeps the extreme's sign";
        sum_m += group_error_on(r, idx_m, s_m, turbo_centroids(bits));
        sum_a += e_a;
      }
      const double reduction = 1.0 - sum_a / sum_m;
      std::printf("%d bits %s: absmax vs fitted RMS: mean squared error -%.1f%%\n", bits,
                  heavy ? "t3" : "gauss", 100.0 * reduction);
      // Measured (gauss / t3): 2 bits -2.0 / -40.7 %, 3 bits -9.6 / -34.6 %, 4 bits -8.7 / -2.3 %,
      // 5 bits -14.0 / +22.6 %: the codebook is fitted to Gaussian groups, and at 5 bits
      // heavy tails leave its levels near +-1 idle.
      if (!heavy || bits <= 4) {
        EXPECT_GT(reduction, 0.0) << bits << " bits";
      }
    }
  }
}

TEST(TurboVFit, ZeroAndConstantGroups) {
  for (int bits : {1, 2, 3, 4, 5, 8}) {
    uint8_t idx[kTurboGroup];
    const std::vector<float> zero(kTurboGroup, 0.0f), flat(kTurboGroup, 1.5f);
    EXPECT_EQ(
        turbo_v_encode_group(zero.data(), turbo_boundaries(bits), bits, idx, turbo_centroids(bits)),
        0)
        << bits;
    uint8_t idx_rms[kTurboGroup];
    const uint16_t s_rms = turbo_v_encode_group(flat.data(), turbo_boundaries(bits), bits, idx_rms);
    const uint16_t s =
        turbo_v_encode_group(flat.data(), turbo_boundaries(bits), bits, idx, turbo_centroids(bits));
    EXPECT_LE(group_error(flat, idx, s, bits), group_error(flat, idx_rms, s_rms, bits)) << bits;
  }
}

// Rows encoded with the fitted scale decode through the existing dequant (which never sees
// the flag) as exactly c[idx] * s of the group encoder's indices and scale.
TEST(TurboVFit, DecodeIsCodebookTimesScale) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int d : {64, 128}) {
    for (int bits : {2, 3, 4}) {
      std::vector<float> x(d), scratch(d), out(d);
      for (float& v : x) v = nd(rng);
      std::vector<uint8_t> packed(bitpack_bytes(d, bits));
      std::vector<uint16_t> scale(d / kTurboGroup);
      turbo_v_encode_row(x.data(), d, bits, turbo_signs(d), turbo_inv_sqrt(d),
                         turbo_boundaries(bits), scratch.data(), packed.data(), scale.data(),
                         turbo_centroids(bits));
      turbo_v_dequant_rotated_row(packed.data(), scale.data(), d, bits, turbo_centroids(bits),
                                  out.data());
      // The group encoder on the same rotated row (scratch holds it).
      for (int g = 0; g < d / kTurboGroup; ++g) {
        uint8_t idx[kTurboGroup];
        const uint16_t s =
            turbo_v_encode_group(scratch.data() + g * kTurboGroup, turbo_boundaries(bits), bits,
                                 idx, turbo_centroids(bits));
        ASSERT_EQ(s, scale[g]);
        for (int i = 0; i < kTurboGroup; ++i) {
          const float want = mul_rn(turbo_centroids(bits)[idx[i]], f16_to_f32(s));
          ASSERT_EQ(out[g * kTurboGroup + i], want) << d << " d, " << bits << " bits";
        }
      }
    }
  }
}

TEST(TurboVFit, Spelling) {
  for (const char* text : {"turbo:k4rv3m", "turbo:k8v3m", "turbo:k4v2m", "turbo:k5rv4m"}) {
    auto s = parse_kv_scheme(text, 128);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status().message();
    EXPECT_TRUE(s.value().v_mse_scale) << text;
    EXPECT_EQ(kv_scheme_name(s.value()), text);
  }
  const KvScheme m = parse_kv_scheme("turbo:k4rv3m", 128).value();
  const KvScheme plain = parse_kv_scheme("turbo:k4rv3", 128).value();
  EXPECT_TRUE(m.k_rotated);
  EXPECT_EQ(m.v_bits, 3);
  EXPECT_FALSE(plain.v_mse_scale);
  EXPECT_FALSE(parse_kv_scheme("turbo", 128).value().v_mse_scale);
  EXPECT_NE(m, plain);  // snapshots and prompt-cache blocks of the two never mix
  EXPECT_NE(kv_scheme_name(m), kv_scheme_name(plain));
  for (const char* bad : {"turbo:k4v3mm", "turbo:k4mv3", "turbo:k4vm", "turbo:k4v3M", "turbom",
                          "8m", "bf16m", "turbo:k4v9m"}) {
    auto s = parse_kv_scheme(bad, 128);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find("[kv]"), std::string::npos) << bad;
    }
  }
  for (const KvKind kind : {KvKind::kAffine, KvKind::kBf16, KvKind::kF16}) {
    KvScheme s = kind == KvKind::kAffine ? KvScheme{kind, 8, 8, 128} : KvScheme{kind, 16, 16, 128};
    s.v_mse_scale = true;
    const Status st = validate_kv_scheme(s);
    ASSERT_FALSE(st.ok()) << (int)kind;
    EXPECT_NE(st.message().find("[kv] the MSE-fitted value scale"), std::string::npos)
        << st.message();
  }
}

}  // namespace
}  // namespace tkv::quant
