// --kv-quant auto[:BITS]: the pick from the measured table per architecture, the fallback
// for an architecture without one and the refusals (KvConfig's spelling: api_config_test).
#include "runtime/kv_auto.h"

#include <gtest/gtest.h>

namespace tkv::runtime {
namespace {

std::string pick(const char* spec, const char* arch, int head_dim = 128) {
  auto r = pick_auto_kv_scheme(spec, arch, head_dim);
  EXPECT_TRUE(r.ok()) << spec << " " << arch << ": " << r.status().message();
  return r.ok() ? r.value().scheme : "";
}

TEST(KvAuto, PicksTheLeastMeasuredKlWithinTheBudget) {
  EXPECT_EQ(pick("auto", "llama"), "turbo:k8v3m");  // 6.25 bits: turbo's size, fitted V scale
  EXPECT_EQ(pick("auto", "gemma3"), "turbo:k8v3m");
  EXPECT_EQ(pick("auto:4.75", "gemma3"), "turbo:k5rv3");  // k5rv3m measured no better there
  EXPECT_EQ(pick("auto:6.75", "llama"), "turbo:k8v4");
  EXPECT_EQ(pick("auto:9", "llama"), "8");  // 0.00396 < k8v8's 0.00407
  EXPECT_EQ(pick("auto:4.75", "llama"), "turbo:k5rv3m");
  EXPECT_EQ(pick("auto:4.5", "llama"), "turbo:k4rv3m");  // rotated 4-bit keys beat affine 4
  EXPECT_EQ(pick("auto:4.5", "qwen2"), "4");             // ... not on Qwen2.5 (keys centered)
  EXPECT_EQ(pick("auto:4.5", "gemma3"), "turbo:k4v3m");  // QK-norm: rotation gains nothing
  EXPECT_EQ(pick("auto:3.75", "llama"), "turbo:k4rv2");
  EXPECT_EQ(pick("auto:3.75", "qwen2"), "turbo:k4rv2m");
  EXPECT_EQ(pick("auto:3.75", "gemma3"), "turbo:k4v2");  // k4rv2 not measured there
  const auto p = pick_auto_kv_scheme("auto:6.3", "qwen2", 128).value();
  EXPECT_EQ(p.scheme, "turbo:k8v3m");
  EXPECT_DOUBLE_EQ(p.bits, 6.25);
  EXPECT_DOUBLE_EQ(p.kl, 0.0154);
  EXPECT_NE(p.measured_on.find("Qwen2.5"), std::string::npos);
}

TEST(KvAuto, UnknownArchitectureTakesTheWorstMeasuredKl) {
  const auto p = pick_auto_kv_scheme("auto:4.5", "phi3", 128).value();
  EXPECT_TRUE(p.measured_on.empty());
  EXPECT_EQ(p.scheme, "turbo:k4v3");  // worst 0.10717 (gemma3) < k4rv3's 0.1086, 4's 0.334
  EXPECT_DOUBLE_EQ(p.kl, 0.10717);
  // k4rv2 is measured on llama only: not a fallback candidate.
  EXPECT_EQ(pick_auto_kv_scheme("auto:3.75", "phi3", 128).value().scheme, "turbo:k4v2");
}

TEST(KvAuto, RefusesABudgetBelowEveryScheme) {
  auto r = pick_auto_kv_scheme("auto:3.5", "llama", 128);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("3.75"), std::string::npos) << r.status().message();
  for (const char* bad : {"auto:", "auto:x", "auto:4.5b", "auto:nan"})
    EXPECT_FALSE(pick_auto_kv_scheme(bad, "llama", 128).ok()) << bad;
}

TEST(KvAuto, ResolveLeavesOtherSchemesAlone) {
  EXPECT_EQ(resolve_kv_scheme("turbo:k4v3", "llama", 64, "m").value(), "turbo:k4v3");
  EXPECT_EQ(resolve_kv_scheme("auto:6.75", "gemma3", 256, "m").value(), "turbo:k8v4");
  EXPECT_FALSE(is_auto_kv_scheme("automatic"));
}

}  // namespace
}  // namespace tkv::runtime
