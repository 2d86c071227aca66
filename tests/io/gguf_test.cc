// GGUF reader: round trips of in-memory v2/v3 images with every metadata type,
// typed getters, alignment, hostile images (truncation at every byte, bad magic,
// huge counts, bad ids, bad shapes, data past the end, overlap, random byte flips),
// the gguf-py-written fuzz seeds, and the real SmolLM2 file when present.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "gguf_builder.h"

namespace tkv::io {
namespace {

using testing::GgufBuilder;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Every scalar type, string, numeric/bool/string arrays, a nested array, two tensors.
GgufBuilder full_builder(uint32_t version) {
  GgufBuilder g(version);
  g.kv("t.u8", 0, uint8_t{200})
      .kv("t.i8", 1, int8_t{-100})
      .kv("t.u16", 2, uint16_t{60000})
      .kv("t.i16", 3, int16_t{-30000});
  g.kv("t.u32", 4, uint32_t{4000000000u}).kv("t.i32", 5, int32_t{-2000000000}).kv("t.f32", 6, 1.5f);
  g.kv("t.bool", 7, uint8_t{1})
      .kv_string("general.architecture", "llama")
      .kv("t.u64", 10, uint64_t{1} << 60);
  g.kv("t.i64", 11, int64_t{-(int64_t{1} << 60)}).kv("t.f64", 12, 0.1);
  g.kv_array("t.arr_i32", 5, std::vector<int32_t>{1, -2, 3})
      .kv_array("t.arr_f32", 6, std::vector<float>{0.5f, -0.25f});
  g.kv_array("t.arr_bool", 7, std::vector<uint8_t>{0, 1, 1})
      .kv_array("t.arr_u64", 10, std::vector<uint64_t>{});
  g.kv_string_array("t.strings", {"a", "", "héllo"});
  // [[1,2],[strings "x"]]: array of arrays, skipped safely.
  std::vector<uint8_t> nested;
  GgufBuilder::put(&nested, uint32_t{9});
  GgufBuilder::put(&nested, uint64_t{2});
  GgufBuilder::put(&nested, uint32_t{0});
  GgufBuilder::put(&nested, uint64_t{2});
  nested.push_back(1);
  nested.push_back(2);
  GgufBuilder::put(&nested, uint32_t{8});
  GgufBuilder::put(&nested, uint64_t{1});
  GgufBuilder::put_string(&nested, "x");
  g.kv_raw("t.nested", 9, nested);
  g.tensor("norm", {3}, 0, f32_bytes({1.f, 2.f, 3.f}));
  std::vector<uint8_t> q8(2 * 34);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 7);
  g.tensor("embd", {32, 2}, 8, q8);
  return g;
}

class GgufVersion : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersion, RoundTripEveryType) {
  const std::vector<uint8_t> img = full_builder(GetParam()).build();
  auto r = GgufFile::parse(img.data(), img.size(), "full");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), GetParam());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.get_u64("t.u8").value(), 200u);
  EXPECT_EQ(f.get_i64("t.i8").value(), -100);
  EXPECT_EQ(f.get_u64("t.u16").value(), 60000u);
  EXPECT_EQ(f.get_i64("t.i16").value(), -30000);
  EXPECT_EQ(f.get_u64("t.u32").value(), 4000000000u);
  EXPECT_EQ(f.get_i64("t.i32").value(), -2000000000);
  EXPECT_EQ(f.get_f64("t.f32").value(), 1.5);
  EXPECT_EQ(f.get_bool("t.bool").value(), true);
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f.get_u64("t.u64").value(), uint64_t{1} << 60);
  EXPECT_EQ(f.get_i64("t.i64").value(), -(int64_t{1} << 60));
  EXPECT_EQ(f.get_f64("t.f64").value(), 0.1);
  EXPECT_EQ(f.get_number_array("t.arr_i32").value(), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(f.get_number_array("t.arr_f32").value(), (std::vector<double>{0.5, -0.25}));
  EXPECT_EQ(f.get_number_array("t.arr_bool").value(), (std::vector<double>{0, 1, 1}));
  EXPECT_TRUE(f.get_number_array("t.arr_u64").value().empty());
  EXPECT_EQ(f.get_string_array("t.strings").value(), (std::vector<std::string>{"a", "", "héllo"}));
  const GgufValue* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->elem_type, GgufType::kArray);
  EXPECT_EQ(nested->array_len, 2u);

  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* norm = f.find_tensor("norm");
  const GgufTensorInfo* embd = f.find_tensor("embd");
  ASSERT_TRUE(norm && embd);
  EXPECT_EQ(norm->type, ggml::Type::kF32);
  EXPECT_EQ(norm->n_bytes, 12u);
  float v[3];
  std::memcpy(v, norm->data, 12);
  EXPECT_EQ(v[2], 3.f);
  EXPECT_EQ(embd->type, ggml::Type::kQ8_0);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(embd->n_elems(), 64);
  EXPECT_EQ(embd->n_bytes, 68u);
  EXPECT_EQ(embd->offset, 32u);  // 12 bytes of norm, padded to 32
  EXPECT_EQ((embd->data - img.data()) % 32, 0);
  EXPECT_EQ(embd->data[67], static_cast<uint8_t>(67 * 7));
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(V2V3, GgufVersion, ::testing::Values(2u, 3u));

TEST(Gguf, GetterErrors) {
  const std::vector<uint8_t> img = full_builder(3).build();
  auto r = GgufFile::parse(img.data(), img.size(), "g");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.get_u64("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.get_u64("t.i8").status().code(), StatusCode::kInvalidArgument);   // negative
  EXPECT_EQ(f.get_u64("t.f32").status().code(), StatusCode::kInvalidArgument);  // float
  EXPECT_EQ(f.get_i64("t.u64").value(), int64_t{1} << 60);                      // fits
  EXPECT_EQ(f.get_f64("t.i32").value(), -2000000000.0);                         // ints widen
  EXPECT_EQ(f.get_bool("t.u8").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.get_string("t.strings").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.get_string_array("t.arr_i32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.get_number_array("t.strings").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.get_string("t.u8").status().message().find("[gguf] g: key 't.u8' has type u8"),
            std::string::npos)
      << f.get_string("t.u8").status().message();
  EXPECT_EQ(f.get_u64_or("missing", 7), 7u);
  EXPECT_EQ(f.get_u64_or("t.u32", 7), 4000000000u);
  EXPECT_EQ(f.get_string_or("t.u8", "d"), "d");
  EXPECT_EQ(f.get_f64_or("t.f64", 2.0), 0.1);
  EXPECT_EQ(f.get_bool_or("missing", true), true);
}

TEST(Gguf, I64GetterRejectsHugeUnsigned) {
  const std::vector<uint8_t> img = GgufBuilder().kv("big", 10, ~uint64_t{0}).build();
  auto r = GgufFile::parse(img.data(), img.size());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->get_i64("big").status().code(), StatusCode::kInvalidArgument);
}

TEST(Gguf, CustomAlignment) {
  GgufBuilder g;
  g.alignment(64)
      .tensor("a", {5}, 0, f32_bytes({1, 2, 3, 4, 5}))
      .tensor("b", {1}, 0, f32_bytes({9}));
  const std::vector<uint8_t> img = g.build();
  auto r = GgufFile::parse(img.data(), img.size());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->alignment(), 64u);
  EXPECT_EQ((*r)->find_tensor("b")->offset, 64u);
  EXPECT_EQ(((*r)->find_tensor("a")->data - img.data()) % 64, 0);
}

// Every strict prefix of a valid image (which ends at its last tensor byte) must fail cleanly.
TEST(Gguf, TruncationAtEveryByteFails) {
  const std::vector<uint8_t> img = full_builder(3).build();
  ASSERT_TRUE(GgufFile::parse(img.data(), img.size()).ok());
  for (size_t n = 0; n < img.size(); ++n) {
    std::vector<uint8_t> cut(
        img.begin(),
        img.begin() + static_cast<std::ptrdiff_t>(n));  // exact-size copy: ASan sees overreads
    auto r = GgufFile::parse(cut.data(), cut.size(), "cut");
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(r.status().message().rfind("[gguf] cut: ", 0), 0u) << r.status().message();
  }
}

// Random byte flips must never crash, hang or read out of bounds (ASan/UBSan presets check the last
// two).
TEST(Gguf, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> img = full_builder(3).build();
  std::mt19937 rng(1234);
  int n_ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> m = img;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    auto r = GgufFile::parse(m.data(), m.size());
    if (r.ok()) {
      ++n_ok;
      for (const GgufTensorInfo& t : (*r)->tensors()) {
        ASSERT_GE(t.data, m.data());
        ASSERT_LE(t.data + t.n_bytes, m.data() + m.size()) << t.name;
      }
    } else {
      ASSERT_EQ(r.status().message().rfind("[gguf] ", 0), 0u);
    }
  }
  RecordProperty("parsed_ok", n_ok);
}

struct Hostile {
  const char* name;
  std::vector<uint8_t> image;
  const char* expect;  // substring of the error
};

std::vector<uint8_t> patched(std::vector<uint8_t> b, size_t at, uint64_t v, size_t n) {
  std::memcpy(b.data() + at, &v, n);
  return b;
}

std::vector<Hostile> hostile_cases() {
  const std::vector<uint8_t> ok = full_builder(3).build();
  const std::vector<uint8_t> f32 = f32_bytes({1, 2, 3, 4});
  std::vector<Hostile> c;
  c.push_back({"empty", {}, "truncated: magic"});
  c.push_back({"bad magic", patched(ok, 0, 0x46554746, 4), "bad magic"});
  c.push_back({"version 1", patched(ok, 4, 1, 4), "version 1 is not supported"});
  c.push_back({"version 4", patched(ok, 4, 4, 4), "unsupported GGUF version 4"});
  c.push_back({"big endian", patched(ok, 4, 0x03000000, 4), "big-endian"});
  c.push_back({"huge n_tensors", patched(ok, 8, uint64_t{1} << 62, 8), "tensor count"});
  c.push_back({"huge n_kv", patched(ok, 16, ~uint64_t{0}, 8), "metadata count"});
  c.push_back({"key len > file", patched(ok, 24, uint64_t{1} << 40, 8), "string length"});
  c.push_back({"bad value type", GgufBuilder().kv("k", 13, uint8_t{0}).build(),
               "unknown value type id 13"});
  c.push_back({"bad array elem type",
               GgufBuilder().kv_array("k", 77, std::vector<uint8_t>{}).build(),
               "element type id 77"});
  c.push_back(
      {"huge array",
       GgufBuilder().kv_raw("k", 9, {4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}).build(),
       "cannot fit"});
  c.push_back({"string len > file",
               GgufBuilder().kv_raw("k", 8, {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}).build(),
               "string length"});
  c.push_back({"bool 2", GgufBuilder().kv("k", 7, uint8_t{2}).build(), "neither 0 nor 1"});
  c.push_back({"dup key", GgufBuilder().kv("k", 0, uint8_t{1}).kv("k", 0, uint8_t{2}).build(),
               "duplicate key"});
  c.push_back({"empty key", GgufBuilder().kv("", 0, uint8_t{1}).build(), "empty key"});
  c.push_back({"alignment 48", GgufBuilder().kv("general.alignment", 4, uint32_t{48}).build(),
               "not a power of two"});
  c.push_back({"alignment 0", GgufBuilder().kv("general.alignment", 4, uint32_t{0}).build(),
               "not a power of two"});
  // A fuzzer-found case: alignment 1 let a Q8_0 block (fp16 scale) sit at an odd address.
  c.push_back(
      {"alignment 1", GgufBuilder().kv("general.alignment", 4, uint32_t{1}).build(), "below 8"});
  c.push_back({"alignment u64", GgufBuilder().kv("general.alignment", 10, uint64_t{32}).build(),
               "expected u32"});
  c.push_back({"n_dims 5", GgufBuilder().tensor("t", {1, 1, 1, 1, 4}, 0, f32).build(), "n_dims 5"});
  c.push_back({"negative dim", GgufBuilder().tensor("t", {4, -1}, 0, f32).build(), "negative"});
  c.push_back({"dims overflow",
               GgufBuilder().tensor("t", {int64_t{1} << 40, int64_t{1} << 40}, 0, f32).build(),
               "overflows"});
  c.push_back({"bytes overflow", GgufBuilder().tensor("t", {int64_t{1} << 62}, 0, f32).build(),
               "byte size of"});
  c.push_back({"huge tensor", GgufBuilder().tensor("t", {int64_t{1} << 40}, 0, f32).build(),
               "past the end"});
  c.push_back({"bad ggml type", GgufBuilder().tensor("t", {4}, 99, f32).build(),
               "unknown ggml type id 99"});
  c.push_back({"row % block", GgufBuilder().tensor("t", {33}, 2, std::vector<uint8_t>(36)).build(),
               "not a multiple of the q4_0 block"});
  c.push_back({"data past end", GgufBuilder().tensor("t", {8}, 0, f32).build(), "past the end"});
  c.push_back({"offset past end", GgufBuilder().tensor("t", {4}, 0, f32, uint64_t{1} << 50).build(),
               "past the end"});
  c.push_back({"misaligned", GgufBuilder().tensor("t", {1}, 0, f32, 4).build(),
               "not a multiple of the alignment"});
  c.push_back({"overlap",
               GgufBuilder().tensor("a", {4}, 0, f32).tensor("b", {4}, 0, f32, 0).build(),
               "overlap"});
  c.push_back({"dup tensor",
               GgufBuilder().tensor("a", {1}, 0, f32).tensor("a", {1}, 0, f32).build(),
               "duplicate tensor"});
  std::vector<uint8_t> deep;  // 20 levels of array-of-array
  for (int i = 0; i < 20; ++i) {
    GgufBuilder::put(&deep, uint32_t{9});
    GgufBuilder::put(&deep, uint64_t{1});
  }
  GgufBuilder::put(&deep, uint32_t{0});
  GgufBuilder::put(&deep, uint64_t{0});
  c.push_back({"deep nesting", GgufBuilder().kv_raw("k", 9, deep).build(), "nested deeper"});
  return c;
}

TEST(Gguf, HostileImagesGiveClearErrors) {
  for (const Hostile& h : hostile_cases()) {
    auto r = GgufFile::parse(h.image.data(), h.image.size(), "hostile");
    ASSERT_FALSE(r.ok()) << h.name << " parsed";
    const std::string& msg = r.status().message();
    EXPECT_EQ(msg.rfind("[gguf] hostile: ", 0), 0u) << h.name << ": " << msg;
    EXPECT_NE(msg.find(h.expect), std::string::npos)
        << h.name << ": '" << msg << "' lacks '" << h.expect << "'";
  }
}

TEST(Gguf, OpenMissingFile) {
  auto r = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("[gguf] /nonexistent/model.gguf: ", 0), 0u)
      << r.status().message();
}

// Seeds of the fuzz corpus were written by gguf-py's GGUFWriter (tests/fuzz/make_seeds.py):
// an independent writer, so parsing them cross-checks the reader.
TEST(Gguf, ParsesGgufPyWrittenSeeds) {
  const std::filesystem::path dir =
      std::filesystem::path(TKV_SOURCE_DIR) / "tests/fuzz/corpus/gguf_fuzz";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    auto r = GgufFile::open(e.path().string());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)->get_string("general.architecture").value(), "llama") << e.path();
    EXPECT_FALSE((*r)->tensors().empty()) << e.path();
    ++n;
  }
  EXPECT_GE(n, 3);
}

std::string models_dir() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/turbokv/models";
}

TEST(GgufReal, SmolLM2) {
  const std::string path = models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " absent (scripts/fetch-models smollm2)";
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f.get_u64("llama.block_count").value(), 30u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model").value(), "gpt2");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").value().size(), 49152u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges").value().size(), 48900u);
  EXPECT_EQ(f.get_number_array("tokenizer.ggml.token_type").value().size(), 49152u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, ggml::Type::kQ8_0);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{576, 49152}));
  // Row 0 of the embedding must be the bytes gguf-py extracted into the q8_0 fixture.
  std::ifstream in(std::string(TKV_SOURCE_DIR) + "/tests/fixtures/ggml/q8_0.bin", std::ios::binary);
  std::vector<uint8_t> fx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(fx.size(), 24u);
  uint32_t src_len;
  std::memcpy(&src_len, fx.data() + 20, 4);
  const std::string src(reinterpret_cast<const char*>(fx.data() + 24), src_len);
  ASSERT_NE(src.find("SmolLM2-135M-Instruct.Q4_1.gguf:token_embd.weight rows 0,"),
            std::string::npos)
      << src;
  const size_t row_bytes = ggml::row_bytes(ggml::Type::kQ8_0, 576);
  ASSERT_GE(fx.size(), 24 + src_len + row_bytes);
  EXPECT_EQ(std::memcmp(embd->data, fx.data() + 24 + src_len, row_bytes), 0);
}

// The other local models: architecture, layer count and tensor count as gguf-py reports them.
struct RealModel {
  const char* file;
  const char* arch;
  uint64_t n_layers;
  size_t n_tensors;
  size_t n_vocab;
};

class GgufRealModel : public ::testing::TestWithParam<RealModel> {};

TEST_P(GgufRealModel, HeaderAndTensors) {
  const RealModel m = GetParam();
  const std::string path = models_dir() + "/" + m.file;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (scripts/fetch-models)";
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.get_string("general.architecture").value(), m.arch);
  EXPECT_EQ(f.get_u64(std::string(m.arch) + ".block_count").value(), m.n_layers);
  EXPECT_EQ(f.tensors().size(), m.n_tensors);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").value().size(), m.n_vocab);
  const uint8_t* data_section = f.tensors()[0].data - f.tensors()[0].offset;
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.n_bytes,
              ggml::row_bytes(t.type, t.shape[0]) * static_cast<size_t>(t.n_elems() / t.shape[0]))
        << t.name;
    EXPECT_EQ(t.data - t.offset, data_section) << t.name;  // one data section for all tensors
  }
}

INSTANTIATE_TEST_SUITE_P(Local, GgufRealModel,
                         ::testing::Values(RealModel{"gemma-3-270m-q4_k_m.gguf", "gemma3", 18, 236,
                                                     262144},
                                           RealModel{"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                                                     "qwen2", 28, 339, 151936}),
                         [](const auto& p) { return std::string(p.param.arch); });

}  // namespace
}  // namespace tkv::io
