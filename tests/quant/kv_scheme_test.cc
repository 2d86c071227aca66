// KvScheme: validation messages, CLI parser, row layout and sizes. Sizes must equal
// the goldens' bytes_per_token_per_head grid and ratio 32/(kb+vb+1.5) exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "quant/kv_scheme.h"

namespace tkv::quant {
namespace {

TEST(KvScheme, BytesPerTokenMatchGoldenGrid) {
  std::ifstream f(std::string(TKV_SOURCE_DIR) + "/tests/data/goldens/turboquant_tables.json");
  ASSERT_TRUE(f.good());
  const nlohmann::json grid = nlohmann::json::parse(f)["bytes_per_token_per_head"];
  int n = 0;
  for (int k : {2, 4, 5, 8}) {
    for (int v : {2, 3, 4, 5, 8}) {
      for (int d : {64, 128, 256, 512}) {
        const KvScheme s{KvKind::kTurbo, k, v, d};
        ASSERT_TRUE(validate_kv_scheme(s).ok());
        const auto& g = grid[fmt::format("k{}_v{}_d{}", k, v, d)];
        EXPECT_EQ(kv_bytes_per_token_per_head(s), g["bytes_per_token_per_head"].get<int64_t>())
            << kv_scheme_name(s);
        EXPECT_EQ(kv_bytes_per_token_per_head(s), d * k / 8 + d * v / 8 + 6 * d / 32);
        // ratio: 4D/bytes == 32/(k+v+1.5) up to double rounding; golden rounded to 4 decimals.
        EXPECT_NEAR(kv_compression_vs_fp16(s), 32.0 / (k + v + 1.5), 1e-12);
        EXPECT_NEAR(kv_compression_vs_fp16(s), g["ratio_vs_fp16"].get<double>(), 0.5e-4);
        EXPECT_NEAR(kv_bits_per_element(s), (k + v + 1.5) / 2.0, 1e-12);
        ++n;
      }
    }
  }
  EXPECT_EQ(n, (int)grid.size());
}

TEST(KvScheme, LayoutOffsetsAreContiguous) {
  for (const char* text : {"bf16", "f16", "8", "4", "turbo", "turbo:k4v2"}) {
    for (int d : {64, 128, 256, 512}) {
      auto s = parse_kv_scheme(text, d);
      ASSERT_TRUE(s.ok()) << s.status().message();
      const KvRowLayout l = kv_row_layout(*s);
      EXPECT_EQ(l.v_data_offset, l.k_data_offset + l.k_data_bytes);
      EXPECT_EQ(l.k_scale_offset, l.v_data_offset + l.v_data_bytes);
      EXPECT_EQ(l.row_bytes, l.v_zero_offset + l.v_zero_bytes);
      EXPECT_EQ(l.k_scale_offset % 2, 0);  // fp16 planes stay 2-byte aligned
      EXPECT_EQ(l.row_bytes, kv_bytes_per_token_per_head(*s));
    }
  }
  EXPECT_EQ(kv_bytes_per_token_per_head(parse_kv_scheme("bf16", 128).value()), 512);
  // affine 4-bit D=128: 64 + 64 bytes + 4 fp16 arrays of 2 groups = 144.
  EXPECT_EQ(kv_bytes_per_token_per_head(parse_kv_scheme("4", 128).value()), 144);
  EXPECT_DOUBLE_EQ(kv_bits_per_element(parse_kv_scheme("8", 128).value()), 8.5);
}

TEST(KvScheme, ParserForms) {
  auto t = parse_kv_scheme("turbo", 128);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (KvScheme{KvKind::kTurbo, 8, 3, 128}));
  EXPECT_EQ(kv_scheme_name(*t), "turbo:k8v3");
  auto t2 = parse_kv_scheme("turbo:k5v8", 64);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(*t2, (KvScheme{KvKind::kTurbo, 5, 8, 64}));
  EXPECT_EQ(parse_kv_scheme("8", 256).value().kind, KvKind::kAffine);
  EXPECT_EQ(kv_scheme_name(parse_kv_scheme("4", 256).value()), "affine4");
  for (const char* bad : {"", "turbo:", "turbo:k3v3", "turbo:k8v1", "turbo:k8v3x", "turbo:kv", "16",
                          "fp16", "turbo:k08v3x"}) {
    auto r = parse_kv_scheme(bad, 128);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("[kv] unknown KV cache type"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("turbo:k<K>v<V>"), std::string::npos)
        << r.status().message();
  }
  // Symmetric keys: no zero plane, K + 0.5 bits per key element.
  for (const char* text : {"turbo:k8sv4", "turbo:k4srv4m", "turbo:k5sv5", "turbo:k8sv8"}) {
    auto r = parse_kv_scheme(text, 128);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    EXPECT_TRUE(r->k_symmetric) << text;
    EXPECT_EQ(kv_scheme_name(*r), text);
    EXPECT_EQ(kv_row_layout(*r).k_zero_bytes, 0) << text;
    EXPECT_DOUBLE_EQ(kv_bits_per_element(*r), (r->k_bits + r->v_bits + 1.0) / 2.0) << text;
  }
  EXPECT_DOUBLE_EQ(kv_bits_per_element(parse_kv_scheme("turbo:k8sv4", 64).value()), 6.5);
  EXPECT_DOUBLE_EQ(kv_bits_per_element(parse_kv_scheme("turbo:k4srv4m", 64).value()), 4.5);
  auto k2 = parse_kv_scheme("turbo:k2sv3", 128);
  ASSERT_FALSE(k2.ok());
  EXPECT_NE(k2.status().message().find("symmetric keys"), std::string::npos)
      << k2.status().message();
  auto a = parse_kv_scheme("turbo:k8srv4a", 128);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->v_absmax && a->k_symmetric && a->k_rotated && !a->v_mse_scale);
  EXPECT_EQ(kv_scheme_name(*a), "turbo:k8srv4a");
  EXPECT_DOUBLE_EQ(kv_bits_per_element(*a), 6.5);
  auto a8 = parse_kv_scheme("turbo:k8v8a", 128);
  ASSERT_FALSE(a8.ok());
  EXPECT_NE(a8.status().message().find("absmax value codebook"), std::string::npos)
      << a8.status().message();
  for (const char* bad : {"turbo:k8rsv3", "turbo:k8ssv3", "turbo:ksv3", "turbo:k8v3s",
                          "turbo:k8v4am", "turbo:k8v4ma", "turbo:k8va"})
    EXPECT_FALSE(parse_kv_scheme(bad, 128).ok()) << bad;
  auto hd = parse_kv_scheme("turbo", 96);
  ASSERT_FALSE(hd.ok());
  EXPECT_NE(hd.status().message().find("head_dim 96"), std::string::npos) << hd.status().message();
  EXPECT_NE(hd.status().message().find("64, 128, 256, 512"), std::string::npos);
}

TEST(KvScheme, ValidationNamesValueAndSet) {
  const auto msg = [](KvScheme s) { return validate_kv_scheme(s).message(); };
  EXPECT_NE(msg({KvKind::kTurbo, 6, 3, 128}).find("k_bits 6 invalid (valid: 2, 3, 4, 5, 8)"),
            std::string::npos);
  EXPECT_NE(msg({KvKind::kTurbo, 8, 7, 128}).find("v_bits 7 invalid (valid: 1, 2, 3, 4, 5, 8)"),
            std::string::npos);
  EXPECT_NE(msg({KvKind::kAffine, 2, 2, 128}).find("affine k_bits 2"), std::string::npos);
  EXPECT_NE(msg({KvKind::kBf16, 8, 8, 128}).find("bf16"), std::string::npos);
  EXPECT_NE(msg({KvKind::kF16, 16, 8, 128}).find("f16"), std::string::npos);
  EXPECT_FALSE(validate_kv_scheme({KvKind::kTurbo, 4, 3, 128, true}).ok());  // unsigned8 needs k8
  EXPECT_TRUE(validate_kv_scheme({KvKind::kTurbo, 8, 3, 128, true}).ok());
  EXPECT_TRUE(validate_kv_scheme({KvKind::kTurbo, 3, 1, 512}).ok());
}

}  // namespace
}  // namespace tkv::quant
