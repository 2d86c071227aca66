// Shared by the prefix-sharing model tests: a SmolLM2 engine with prefix
// sharing on, and a long prompt of varied, repetitive prose.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/engine.h"
#include "tests/model/test_models.h"

namespace tkv::prefix_test {

inline std::unique_ptr<runtime::Engine> engine(const std::string& scheme) {
  runtime::EngineOptions o;
  o.model_path = testing::smollm2_path();
  o.n_threads = 2;
  o.cache.scheme = kv::parse_kv_quant(scheme).value();
  o.cache.max_tokens = 8192;
  o.cache.max_seqs = 4;
  o.cache.prefix_namespace = kv::make_prefix_namespace(o.model_path, o.cache, o.key_center);
  auto e = runtime::Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

// The first n tokens of a long text.
inline std::vector<int32_t> text_tokens(runtime::Engine& e, size_t n) {
  std::string text;
  for (int i = 0; text.size() < n * 8; ++i)
    text += fmt::format("Entry {}: the harbour at {} counted {} boats and the tide rose {} cm. ", i,
                        i % 7, i * 3 + 1, (i * 37) % 101);
  auto t = e.tokenizer().encode(text, true, false);
  EXPECT_GE(t.size(), n);
  t.resize(std::min(t.size(), n));
  return t;
}

}  // namespace tkv::prefix_test
