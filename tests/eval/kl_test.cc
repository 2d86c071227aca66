// Unit tests of the evaluation statistics (src/eval/kl.h) and the base-logits
// file (base_logits.h): exact KL against closed forms, the truncated KL as a lower
// bound that becomes exact with the whole vocabulary, CI maths, file round trip.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "eval/base_logits.h"
#include "eval/eval.h"
#include "eval/kl.h"

namespace tkv::eval {
namespace {

std::vector<float> random_logits(int n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

TEST(RunningStat, MatchesClosedForm) {
  RunningStat s;
  for (double x : {1.0, 2.0, 3.0, 4.0}) s.add(x);
  // mean 2.5, sample variance 5/3: exact in double up to a few ulps.
  EXPECT_NEAR(s.mean(), 2.5, 1e-15);
  EXPECT_NEAR(s.stddev(), std::sqrt(5.0 / 3.0), 1e-15);
  EXPECT_NEAR(s.ci95(), 1.96 * std::sqrt(5.0 / 3.0) / 2.0, 1e-15);
}

TEST(Kl, TwoTokenClosedForm) {
  // p = (1/2, 1/2), q = (1/4, 3/4): KL = 0.5 ln 2 + 0.5 ln(2/3).
  const float p[2] = {0.f, 0.f};
  const float q[2] = {0.f, std::log(3.f)};
  const double want = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  // log(3) rounded to fp32 moves q by <= 2^-24 relative: bound 1e-7.
  EXPECT_NEAR(kl_exact(p, q, 2), want, 1e-7);
  EXPECT_EQ(kl_exact(p, p, 2), 0.0);
}

TEST(Kl, FullVocabTruncationIsExact) {
  const int nv = 5000;
  const auto p = random_logits(nv, 3.f, 1), dq = random_logits(nv, 0.3f, 2);
  std::vector<float> q(p);
  for (int i = 0; i < nv; ++i) q[static_cast<size_t>(i)] += dq[static_cast<size_t>(i)];
  const TruncatedDist d = truncate_dist(p.data(), nv, 7, {1.0, 32, 0});
  ASSERT_EQ(static_cast<int>(d.ids.size()), nv);
  std::vector<uint8_t> scratch;
  const PositionScore s = score_position(d, q.data(), nv, &scratch);
  const double exact = kl_exact(p.data(), q.data(), nv);
  // Stored log-probs are fp32: each term is off by <= 2^-24 * |log p| (|log p| < 40 here), weighted
  // by p.
  const double tol = 40.0 * std::ldexp(1.0, -24) * 2;
  EXPECT_NEAR(s.kl, exact, tol) << "truncated " << s.kl << " exact " << exact;
  EXPECT_GT(exact, 0.0);
  EXPECT_TRUE(std::isfinite(s.nll));
}

TEST(Kl, TruncationIsALowerBoundAndCloseAtHighMass) {
  const int nv = 20000;
  const auto p = random_logits(nv, 4.f, 3), dq = random_logits(nv, 0.2f, 4);
  std::vector<float> q(p);
  for (int i = 0; i < nv; ++i) q[static_cast<size_t>(i)] += dq[static_cast<size_t>(i)];
  const double exact = kl_exact(p.data(), q.data(), nv);
  std::vector<uint8_t> scratch;
  for (double mass : {0.5, 0.9, 0.999}) {
    const TruncatedDist d = truncate_dist(p.data(), nv, 0, {mass, 1, 0});
    const PositionScore s = score_position(d, q.data(), nv, &scratch);
    // kept_mass sums exp(fp32 log p): each p is off by <= 2^-24 * |log p| (< 40) relative.
    EXPECT_NEAR(s.kept_mass + d.tail_mass, 1.0, 40.0 * std::ldexp(1.0, -24));
    // Data-processing inequality (plus the fp32 rounding bound of the test above).
    EXPECT_LE(s.kl, exact + 1e-5) << "mass " << mass;
    // With perturbations of one size on every token the lost part is about tail_mass * KL (10x for
    // spread).
    if (mass >= 0.999) {
      EXPECT_GT(s.kl, exact * (1.0 - 10 * d.tail_mass) - 1e-5);
    }
  }
}

TEST(Kl, IdenticalLogitsScoreZero) {
  const int nv = 3000;
  const auto p = random_logits(nv, 2.f, 5);
  const TruncatedDist d = truncate_dist(p.data(), nv, 11, {0.99, 32, 512});
  std::vector<uint8_t> scratch;
  const PositionScore s = score_position(d, p.data(), nv, &scratch);
  EXPECT_EQ(s.kl, 0.0);
  EXPECT_TRUE(s.same_top1);
  EXPECT_NEAR(s.nll, -static_cast<double>(d.target_logp), 1e-5);  // fp32-rounded log p
}

TEST(BaseLogits, RoundTripAndKeyCheck) {
  const std::string path = testing::TempDir() + "/tkv_base_roundtrip.tkvbase";
  const int nv = 1000;
  std::vector<TruncatedDist> ds;
  for (uint32_t i = 0; i < 3; ++i) {
    const auto l = random_logits(nv, 2.f, 10 + i);
    ds.push_back(truncate_dist(l.data(), nv, static_cast<int32_t>(i), {0.9, 4, 100}));
  }
  {
    auto w = BaseLogitsWriter::create(path, "key-a", nv, {0.9, 4, 100});
    ASSERT_TRUE(w.ok());
    for (const auto& d : ds) ASSERT_TRUE(w.value()->append(d).ok());
    ASSERT_TRUE(w.value()->finish().ok());
  }
  EXPECT_FALSE(BaseLogitsReader::open(path, "key-b", nv).ok());
  auto r = BaseLogitsReader::open(path, "key-a", nv);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value()->n_positions(), 3);
  for (const auto& d : ds) {
    TruncatedDist got;
    ASSERT_TRUE(r.value()->next(&got).ok());
    EXPECT_EQ(got.ids, d.ids);
    EXPECT_EQ(got.logp, d.logp);
    EXPECT_EQ(got.tail_mass, d.tail_mass);
    EXPECT_EQ(got.target, d.target);
  }
  TruncatedDist extra;
  EXPECT_FALSE(r.value()->next(&extra).ok());
  // A truncated file is rejected when opened, before any record is used.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  EXPECT_FALSE(BaseLogitsReader::open(path, "key-a", nv).ok());
}

TEST(CurveSchema, AcceptsValidRejectsBroken) {
  nlohmann::json row = {{"engine", "turbokv"},
                        {"model", "m"},
                        {"protocol", "serving-kl"},
                        {"scheme", "bf16"},
                        {"bits_per_elem", 16.0},
                        {"kl", 0.0},
                        {"ppl", 10.0},
                        {"top1", 1.0}};
  EXPECT_EQ(check_curve_schema({{"rows", {row}}}), "");
  nlohmann::json bad = row;
  bad.erase("kl");
  EXPECT_NE(check_curve_schema({{"rows", {bad}}}), "");
  bad = row;
  bad["ppl"] = std::nan("");
  EXPECT_NE(check_curve_schema({{"rows", {bad}}}), "");
  EXPECT_NE(check_curve_schema({{"rowz", {row}}}), "");
}

}  // namespace
}  // namespace tkv::eval
