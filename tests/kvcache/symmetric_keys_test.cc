// Symmetric keys (KvScheme::k_symmetric, --kv-quant turbo:k<K>s[r]v<V>[m]) end to end: a
// paged cache written with them attends (fused kernel, the implied zero -2^(K-1)) as close
// to the fp32 reference on the unquantized K/V as the asymmetric keys of the same width,
// with 0.5 bit per key element less (no zero plane); the KvConfig spelling round-trips.
// (Bits of the encode: kvcodec_test; the fused-vs-reference bound: attention_fused_test
// and quant_cache_test.)
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "quant/kv_scheme.h"
#include "tests/kvcache/attend_through_cache.h"
#include "turbokv/kv_config.h"

namespace tkv::kv {
namespace {

TEST(SymmetricKeys, ConfigSpelling) {
  auto c = turbokv::KvConfig::parse("turbo:k4srv4m");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c.value().symmetric_keys);
  EXPECT_TRUE(c.value().rotated_keys);
  EXPECT_TRUE(c.value().fitted_value_scale);
  EXPECT_EQ(c.value().to_string(), "turbo:k4srv4m");
  EXPECT_FALSE(turbokv::KvConfig::parse("turbo:k8v4").value().symmetric_keys);
  auto bad = turbokv::KvConfig::parse("turbo:k2sv3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("symmetric keys"), std::string::npos)
      << bad.status().message();
}

TEST(SymmetricKeys, AsAccurateAsAffineKeysInFewerBits) {
  const AttnData x = gaussian_attn_data(29);
  // 8-bit values so the key error shows; rotated and plain keys.
  for (const char* pair : {"4v8", "4rv8", "5v8", "8v8", "8rv4"}) {
    const std::string affine = std::string("turbo:k") + pair;
    const std::string sym = "turbo:k" + std::string(1, pair[0]) + "s" + (pair + 1);  // k4sv8
    const double ea = attend_rms_rel_error(x, affine), es = attend_rms_rel_error(x, sym);
    const double ba = quant::kv_bits_per_element(quant::parse_kv_scheme(affine, x.d).value());
    const double bs = quant::kv_bits_per_element(quant::parse_kv_scheme(sym, x.d).value());
    std::printf("%s %.4g (%.2f bits), %s %.4g (%.2f bits)\n", affine.c_str(), ea, ba, sym.c_str(),
                es, bs);
    EXPECT_DOUBLE_EQ(bs, ba - 0.25) << sym;
    EXPECT_LT(es, 1.1 * ea) << sym;
  }
}

}  // namespace
}  // namespace tkv::kv
