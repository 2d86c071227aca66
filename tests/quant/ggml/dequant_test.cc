// dequantize_row / get_rows against gguf-py's numpy dequantizers, bit for bit,
// on the fixtures written by scripts/make-ggml-fixtures.py (real model rows for
// types the models hold, seeded random blocks for the others). Tolerance is
// 0 ulp: fp16 -> fp32 is exact and every product is exact in fp32 (<= 24
// significant bits), so the only rounding is one IEEE add/sub, the same on both sides.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/matmul/matmul.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_types.h"
#include "quant/half.h"

namespace tkv {
namespace {

struct Fixture {
  uint32_t type_id = 0;
  uint32_t n_rows = 0, n_elems = 0;
  std::string source;
  std::vector<uint8_t> blocks;  // [n_rows, row_bytes]
  std::vector<float> expected;  // [n_rows, n_elems]
};

uint32_t read_u32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}

// Loads tests/fixtures/ggml/<name>.bin (format in scripts/make-ggml-fixtures.py).
::testing::AssertionResult load_fixture(const std::string& name, Fixture* f) {
  const std::string path = std::string(TKV_SOURCE_DIR) + "/tests/fixtures/ggml/" + name + ".bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) return ::testing::AssertionFailure() << "cannot open " << path;
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (b.size() < 24 || std::memcmp(b.data(), "TKVG", 4) != 0 || read_u32(b, 4) != 1) {
    return ::testing::AssertionFailure() << path << ": bad header";
  }
  f->type_id = read_u32(b, 8);
  f->n_rows = read_u32(b, 12);
  f->n_elems = read_u32(b, 16);
  const uint32_t src_len = read_u32(b, 20);
  const ggml::TypeTraits* t = ggml::type_traits(f->type_id);
  if (t == nullptr) return ::testing::AssertionFailure() << path << ": unknown type " << f->type_id;
  const size_t raw = f->n_rows * ggml::row_bytes(t->type, f->n_elems);
  const size_t vals = size_t{f->n_rows} * f->n_elems * sizeof(float);
  if (b.size() != 24 + src_len + raw + vals)
    return ::testing::AssertionFailure() << path << ": size mismatch";
  f->source.assign(reinterpret_cast<const char*>(b.data() + 24), src_len);
  f->blocks.assign(b.begin() + 24 + src_len, b.begin() + 24 + src_len + raw);
  f->expected.resize(vals / sizeof(float));
  std::memcpy(f->expected.data(), b.data() + 24 + src_len + raw, vals);
  return ::testing::AssertionSuccess();
}

// Distance in ulps between two finite floats of the same sign region (bit-pattern order).
int64_t ulp_distance(float a, float b) {
  auto key = [](float x) {
    const int64_t u = f32_bits(x);
    return (u & 0x80000000) ? -(u & 0x7fffffff) : u;
  };
  return std::llabs(key(a) - key(b));
}

// Compares got vs expected exactly; reports mismatch count, max ulp and where.
void expect_bit_exact(const std::vector<float>& got, const std::vector<float>& want,
                      uint32_t n_elems, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t n_bad = 0, worst = 0;
  int64_t max_ulp = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i]))
        << what << ": non-finite " << got[i] << " at row " << i / n_elems << " col " << i % n_elems;
    if (f32_bits(got[i]) == f32_bits(want[i])) continue;
    ++n_bad;
    const int64_t u = ulp_distance(got[i], want[i]);
    if (u > max_ulp || n_bad == 1) max_ulp = u, worst = i;
  }
  EXPECT_EQ(n_bad, 0u) << what << ": " << n_bad << " of " << got.size() << " differ; max "
                       << max_ulp << " ulp at row " << worst / n_elems << " col " << worst % n_elems
                       << " (got " << got[worst] << ", want " << want[worst] << ")";
}

class DequantFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(DequantFixture, DequantizeRowMatchesGgufPy) {
  Fixture f;
  ASSERT_TRUE(load_fixture(GetParam(), &f));
  const ggml::Type type = ggml::type_traits(f.type_id)->type;
  const size_t rb = ggml::row_bytes(type, f.n_elems);
  std::vector<float> got(f.expected.size(), std::nanf(""));
  for (uint32_t r = 0; r < f.n_rows; ++r) {
    kernels::dequantize_row(type, f.blocks.data() + r * rb, got.data() + size_t{r} * f.n_elems,
                            f.n_elems);
  }
  expect_bit_exact(got, f.expected, f.n_elems, GetParam() + " (" + f.source + ")");
}

TEST_P(DequantFixture, GetRowsGathersInAnyOrder) {
  Fixture f;
  ASSERT_TRUE(load_fixture(GetParam(), &f));
  const ggml::Type type = ggml::type_traits(f.type_id)->type;
  const kernels::WeightView w{f.blocks.data(), type, f.n_elems, f.n_rows};
  std::vector<int32_t> ids;  // reversed, then row 0 again: order and repeats must not matter
  for (int32_t r = static_cast<int32_t>(f.n_rows) - 1; r >= 0; --r) ids.push_back(r);
  ids.push_back(0);
  std::vector<float> got(ids.size() * f.n_elems, std::nanf("")), want;
  kernels::get_rows(w, ids.data(), static_cast<int64_t>(ids.size()), got.data());
  for (int32_t id : ids) {
    want.insert(want.end(), f.expected.begin() + size_t(id) * f.n_elems,
                f.expected.begin() + size_t(id + 1) * f.n_elems);
  }
  expect_bit_exact(got, want, f.n_elems, GetParam() + " get_rows");
}

INSTANTIATE_TEST_SUITE_P(Ggml, DequantFixture,
                         ::testing::Values("f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"));

// Q8_K has no gguf-py dequantizer: d * q with d = 2^-3 is exact, so the expected
// value is known without rounding.
TEST(Dequant, Q8KIsScaleTimesQuant) {
  ggml::BlockQ8_K b[2] = {};
  for (int j = 0; j < ggml::kQK_K; ++j) {
    b[0].qs[j] = static_cast<int8_t>(j - 128);
    b[1].qs[j] = static_cast<int8_t>(127 - j % 200);
  }
  b[0].d = 0.125f;
  b[1].d = -4.0f;
  std::vector<float> got(2 * ggml::kQK_K);
  kernels::dequantize_row(ggml::Type::kQ8_K, b, got.data(), 2 * ggml::kQK_K);
  for (int i = 0; i < 2 * ggml::kQK_K; ++i) {
    const ggml::BlockQ8_K& blk = b[i / ggml::kQK_K];
    ASSERT_EQ(got[i], blk.d * static_cast<float>(blk.qs[i % ggml::kQK_K])) << "at " << i;
  }
}

}  // namespace
}  // namespace tkv
