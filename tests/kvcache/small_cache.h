// Small caches without a model for the kv-store and prompt-cache tests: 3 layers,
// 2 kv heads, head_dim 64, 16-token pages, filled with deterministic K/V.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kvcache/kv_cache.h"

namespace tkv::kv {

inline KvShape small_shape() {
  KvShape s;
  s.n_layers = 3;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.layer_window = {0, 0, 0};
  return s;
}

inline std::unique_ptr<KvCache> make(const std::string& scheme, int64_t quant_start = 0) {
  CacheOptions o;
  o.scheme = parse_kv_quant(scheme).value();
  o.page_size = 16;
  o.max_tokens = 512;
  o.max_seqs = 4;
  o.max_chunk_tokens = 512;
  o.quant_start = quant_start;
  o.budget_bytes = size_t{256} << 20;
  auto r = create_cache(small_shape(), o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

// Writes n tokens of deterministic K/V into a new sequence of c.
inline int fill(KvCache& c, int64_t n, uint32_t seed) {
  const KvShape& s = c.shape();
  const int seq = c.create_seq().value();
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> k(static_cast<size_t>(n * s.n_kv_heads * s.head_dim)), v(k.size());
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  EXPECT_TRUE(c.reserve(seq, n).ok());
  for (int l = 0; l < s.n_layers; ++l) c.write(l, seq, 0, n, k.data(), v.data());
  c.commit(seq, n);
  return seq;
}

}  // namespace tkv::kv
