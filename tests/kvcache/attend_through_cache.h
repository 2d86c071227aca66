// Attention through a paged KV cache against the fp32 reference on the unquantized K/V, for
// the tests of a scheme's accuracy (rotated keys, the fitted value scale): Gaussian K/V/Q of
// one layer, written into a cache of the scheme, attended by the fused kernel.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention/attention.h"
#include "kvcache/kv_cache.h"
#include "ops/attention.h"

namespace tkv::kv {

struct AttnData {
  int n = 300, nkv = 2, group = 4, d = 128;
  std::vector<float> k, v, q;  // [n, nkv, d], [n, nkv, d], [n, nkv * group, d]
};

// k, v ~ N(0, 1), q ~ N(0, 0.3^2), drawn in that order.
inline AttnData gaussian_attn_data(uint32_t seed) {
  AttnData x;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t row = static_cast<size_t>(x.nkv) * x.d;
  x.k.resize(row * x.n);
  x.v.resize(row * x.n);
  x.q.resize(static_cast<size_t>(x.n) * x.nkv * x.group * x.d);
  for (auto& f : x.k) f = nd(rng);
  for (auto& f : x.v) f = nd(rng);
  for (auto& f : x.q) f = 0.3f * nd(rng);
  return x;
}

// {fused attention through a cache of `scheme` (16-token pages), the fp32 reference}, causal
// over the whole sequence; empty vectors after a failure (reported with EXPECT).
inline std::pair<std::vector<float>, std::vector<float>> attend_through_cache(
    const AttnData& x, const std::string& scheme, int64_t quant_start = 0) {
  KvShape shape{1, x.nkv, x.d, {0}};
  CacheOptions o;
  o.scheme = parse_kv_quant(scheme).value();
  o.page_size = 16;
  o.max_tokens = x.n + 16;
  o.max_chunk_tokens = x.n;
  o.quant_start = quant_start;
  auto cache = create_cache(shape, o);
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  if (!cache.ok()) return {};
  KvCache& kv = *cache.value();
  if (quant_start == 0) {
    EXPECT_EQ(kv.scheme_name(), scheme);
  }
  const int seq = kv.create_seq().value();
  EXPECT_TRUE(kv.reserve(seq, x.n).ok());
  kv.write(0, seq, 0, x.n, x.k.data(), x.v.data());
  kv.commit(seq, x.n);
  const int nh = x.nkv * x.group;
  std::vector<float> out(x.q.size()), ref(x.q.size());
  kernels::AttnArgs a{x.q.data(), out.data(), x.n, nh, 0, 0, 1.0f / std::sqrt((float)x.d)};
  ThreadPool pool(2);
  const Status st = ops::attention(a, kv.view(0, seq, x.n), ops::AttnMode::kFused, nullptr, pool);
  EXPECT_TRUE(st.ok()) << st.message();
  kernels::AttnArgs r = a;
  r.out = ref.data();
  kernels::attention_f32_ref(x.k.data(), x.v.data(), x.n, x.nkv, x.d, r);
  return {std::move(out), std::move(ref)};
}

// RMS of (fused - reference) over RMS of the reference, through a cache of `scheme`.
inline double attend_rms_rel_error(const AttnData& x, const std::string& scheme) {
  const auto [out, ref] = attend_through_cache(x, scheme);
  if (out.empty()) return INFINITY;
  double err = 0, mag = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (double)(out[i] - ref[i]) * (out[i] - ref[i]);
    mag += (double)ref[i] * ref[i];
  }
  return std::sqrt(err / mag);
}

}  // namespace tkv::kv
