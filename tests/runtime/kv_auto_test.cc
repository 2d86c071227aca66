// --kv-quant auto[:BITS]: the pick from the measured table per architecture, the fallback
// for an architecture without one and the refusals (KvConfig's spelling: api_config_test).
#include "runtime/kv_auto.h"

#include <gtest/gtest.h>

#include "kvcache/kv_cache.h"
#include "quant/kv_scheme.h"

namespace tkv::runtime {
namespace {

// The budget of an auto spelling, as KvConfig::parse reads it.
double budget(const char* spec) {
  auto b = auto_kv_budget(spec);
  EXPECT_TRUE(b.ok()) << spec << ": " << b.status().message();
  return b.ok() ? b.value() : 0;
}

std::string pick(const char* spec, const char* arch, int head_dim = 128) {
  auto r = pick_auto_kv_scheme(budget(spec), arch, head_dim);
  EXPECT_TRUE(r.ok()) << spec << " " << arch << ": " << r.status().message();
  if (!r.ok()) return "";
  EXPECT_EQ(r.value().scheme.head_dim, head_dim);
  return quant::kv_scheme_name(r.value().scheme);
}

TEST(KvAuto, PicksTheLeastMeasuredKlWithinTheBudget) {
  // 6.25 bits (turbo's size): symmetric 5-bit keys with 5-bit values beat k8v3m where measured
  EXPECT_EQ(pick("auto", "llama"), "turbo:k5srv5a");
  EXPECT_EQ(pick("auto", "qwen2"), "turbo:k5srv5a");
  EXPECT_EQ(pick("auto", "gemma3"), "turbo:k8v3m");        // k5srv5a 0.0308 > k8v3m 0.0260 there
  EXPECT_EQ(pick("auto:4.75", "gemma3"), "turbo:k5rv3");   // k5rv3m measured no better there
  EXPECT_EQ(pick("auto:6.75", "llama"), "turbo:k8srv4a");  // 6.5 bits beats k8v4 at 6.75
  EXPECT_EQ(pick("auto:6.5", "gemma3"), "turbo:k8srv4a");
  EXPECT_EQ(pick("auto:9", "llama"), "affine8");  // 0.00396 < k8srv8's 0.00407
  EXPECT_EQ(pick("auto:8.5", "gemma3"), "turbo:k8srv8");
  EXPECT_EQ(pick("auto:4.75", "llama"), "turbo:k5rv3m");
  EXPECT_EQ(pick("auto:4.5", "llama"), "turbo:k4srv4m");
  EXPECT_EQ(pick("auto:4.5", "qwen2"), "turbo:k4srv4a");
  EXPECT_EQ(pick("auto:4.5", "gemma3"), "turbo:k4srv4m");
  EXPECT_EQ(pick("auto:3.75", "llama"), "turbo:k4rv2");
  EXPECT_EQ(pick("auto:3.75", "qwen2"), "turbo:k4rv2m");
  EXPECT_EQ(pick("auto:3.75", "gemma3"), "turbo:k4v2");  // k4rv2 not measured there
  const auto p = pick_auto_kv_scheme(6.3, "qwen2", 128).value();
  EXPECT_EQ(quant::kv_scheme_name(p.scheme), "turbo:k5srv5a");
  EXPECT_DOUBLE_EQ(p.bits, 5.5);
  EXPECT_DOUBLE_EQ(p.kl, 0.00662);
  EXPECT_NE(p.measured_on.find("Qwen2.5"), std::string::npos);
}

TEST(KvAuto, OnCudaOnlySchemesTheCudaForwardTakes) {
  const auto cuda = [](const char* spec, const char* arch) {
    auto r = pick_auto_kv_scheme(budget(spec), arch, 128, true);
    EXPECT_TRUE(r.ok()) << spec << " " << arch << ": " << r.status().message();
    return r.ok() ? quant::kv_scheme_name(r.value().scheme) : "";
  };
  EXPECT_EQ(cuda("auto", "llama"), "turbo:k8v3m");
  EXPECT_EQ(cuda("auto:6.75", "llama"), "turbo:k8v4");
  EXPECT_EQ(cuda("auto:4.5", "qwen2"), "turbo:k4rv3m");  // not affine 4
  EXPECT_EQ(cuda("auto:9", "gemma3"), "turbo:k8v8");     // not affine 8
  auto r = pick_auto_kv_scheme(3.5, "llama", 128, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("on CUDA"), std::string::npos) << r.status().message();
}

TEST(KvAuto, UnknownArchitectureTakesTheWorstMeasuredKl) {
  const auto p = pick_auto_kv_scheme(4.5, "phi3", 128).value();
  EXPECT_TRUE(p.measured_on.empty());
  EXPECT_EQ(quant::kv_scheme_name(p.scheme),
            "turbo:k4srv4m");  // worst 0.08948 (gemma3) < k4srv4a's 0.09411
  EXPECT_DOUBLE_EQ(p.kl, 0.08948);
  // k4rv2 is measured on llama only: not a fallback candidate.
  EXPECT_EQ(pick("auto:3.75", "phi3"), "turbo:k4v2");
}

TEST(KvAuto, RefusesABudgetBelowEveryScheme) {
  auto r = pick_auto_kv_scheme(3.5, "llama", 128);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("3.75"), std::string::npos) << r.status().message();
  for (const char* bad : {"auto:", "auto:x", "auto:4.5b", "auto:nan"})
    EXPECT_FALSE(auto_kv_budget(bad).ok()) << bad;
  EXPECT_EQ(auto_kv_budget("auto").value(), kAutoKvDefaultBits);
}

TEST(KvAuto, ResolveLeavesOtherSchemesAlone) {
  const quant::KvScheme k4v3 = kv::parse_kv_quant("turbo:k4v3").value();
  EXPECT_EQ(resolve_kv_scheme(k4v3, 0, "llama", 64, "m").value(), k4v3);
  const quant::KvScheme p = resolve_kv_scheme(k4v3, 6.75, "gemma3", 256, "m").value();
  EXPECT_EQ(quant::kv_scheme_name(p), "turbo:k8srv4a");
  EXPECT_EQ(p.head_dim, 256);
  EXPECT_FALSE(is_auto_kv_scheme("automatic"));
}

}  // namespace
}  // namespace tkv::runtime
