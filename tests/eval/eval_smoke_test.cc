// Smoke evaluation on SmolLM2 (skips if the model or corpus is absent): serving-kl
// with 2 short prompts over bf16 and three TurboQuant schemes. Checks the figures
// are finite, a bf16 re-run against the stored base scores KL = 0 exactly, KL grows
// as value bits fall (k8v8 < k8v3 < k8v2), and the JSON rows (and the committed
// docs/eval/curve.json) follow the curve schema.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "eval/eval.h"

namespace tkv::eval {
namespace {

std::string model_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/turbokv/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

turbokv::EngineConfig engine_config() {
  turbokv::EngineConfig c;
  c.model_path = model_path();
  c.threads = 2;
  c.context = 1024;
  c.max_seqs = 1;
  return c;
}

const SchemeResult* find(const EvalReport& r, const std::string& scheme) {
  for (const auto& row : r.rows)
    if (row.scheme == scheme) return &row;
  return nullptr;
}

TEST(EvalSmoke, ServingKlOnSmolLm2) {
  const std::string data = std::string(TKV_SOURCE_DIR) + "/data/wikitext-2-raw-test.txt";
  if (!std::filesystem::exists(model_path()))
    GTEST_SKIP() << "SmolLM2 not found at " << model_path();
  if (!std::filesystem::exists(data)) GTEST_SKIP() << "corpus not found at " << data;
  EvalOptions o;
  o.protocol = Protocol::kServingKl;
  o.data_path = data;
  o.engine = engine_config();
  o.model_label = "SmolLM2-135M";
  o.n_prompts = 2;
  o.prefix_tokens = 48;
  o.decode_steps = 12;
  o.trunc = {1.0, 32, 0};  // whole rows: exact KL
  o.progress = false;
  o.base_path = testing::TempDir() + "/tkv_eval_smoke.tkvbase";
  std::filesystem::remove(o.base_path);
  o.schemes = {"bf16", "turbo:k8v8", "turbo:k8v3", "turbo:k8v2"};
  auto r = run_eval(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Second invocation reuses the base file: bf16 is really re-run and must match it bit for bit.
  o.schemes = {"bf16"};
  auto again = run_eval(o);
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_EQ(again.value().rows.size(), 1u);
  EXPECT_EQ(again.value().rows[0].kl, 0.0) << "bf16 re-run differs from its own base";
  EXPECT_EQ(again.value().rows[0].top1, 1.0);

  for (const auto& row : r.value().rows) {
    SCOPED_TRACE(row.scheme);
    EXPECT_EQ(row.n_scored, 24);
    for (double x : {row.kl, row.ppl, row.top1, row.bits_per_elem, row.kl_ci95, row.ppl_ci95})
      EXPECT_TRUE(std::isfinite(x));
    EXPECT_GE(row.kl, 0.0);
    EXPECT_GT(row.ppl, 1.0);
  }
  const SchemeResult *b = find(r.value(), "bf16"), *v8 = find(r.value(), "turbo:k8v8"),
                     *v3 = find(r.value(), "turbo:k8v3"), *v2 = find(r.value(), "turbo:k8v2");
  ASSERT_TRUE(b && v8 && v3 && v2);
  EXPECT_EQ(b->kl, 0.0);
  EXPECT_GT(v8->kl, 0.0);
  EXPECT_LT(v8->kl, v3->kl);
  EXPECT_LT(v3->kl, v2->kl);
  EXPECT_LT(v3->bits_per_elem, v8->bits_per_elem);

  const nlohmann::json j = report_to_json(r.value());
  EXPECT_EQ(check_curve_schema(j), "");
  const std::string committed = std::string(TKV_SOURCE_DIR) + "/docs/eval/curve.json";
  if (std::filesystem::exists(committed)) {
    std::ifstream f(committed);
    const nlohmann::json doc = nlohmann::json::parse(f, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << committed << " is not JSON";
    EXPECT_EQ(check_curve_schema(doc), "") << committed;
  }
}

}  // namespace
}  // namespace tkv::eval
