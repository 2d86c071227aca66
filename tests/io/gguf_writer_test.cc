// GgufWriter: what it writes reads back through GgufFile (every metadata type,
// arrays copied from a parsed value, tensor shapes, types, aligned offsets and
// the streamed bytes), and a failed write leaves neither the file nor FILE.tmp.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tests/io/gguf_builder.h"

namespace tkv::io {
namespace {

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + name;
}

// Byte i of tensor `index` is (index * 31 + i) & 0xff: any misplaced chunk shows.
Status pattern(size_t index, uint64_t offset, uint8_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(index * 31 + offset + i);
  return {};
}

TEST(GgufWriter, RoundTripsMetadataAndTensors) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  w.set_u64("big", uint64_t{1} << 60);
  w.set_f32("llama.rope.freq_base", 500000.0f);
  w.set_bool("flag", true);
  w.set_u32("llama.block_count", 2);  // replaces, not duplicates
  // Arrays through set_value, as copied from another file.
  testing::GgufBuilder b;
  b.kv_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  b.kv_array<int32_t>("tokenizer.ggml.token_type", 5, {1, -2, 3});
  b.kv_array<float>("tokenizer.ggml.scores", 6, {0.5f, -1.25f, 3.0f});
  b.kv("tokenizer.ggml.bos_token_id", 4, uint32_t{1});
  const std::vector<uint8_t> src_bytes = b.build();
  auto src = GgufFile::parse(src_bytes.data(), src_bytes.size());
  ASSERT_TRUE(src.ok()) << src.status().message();
  for (const auto& [k, v] : src.value()->metadata()) ASSERT_TRUE(w.set_value(k, v).ok()) << k;
  ASSERT_TRUE(w.add_tensor("a", {64, 3}, ggml::Type::kQ8_0).ok());  // 2 blocks x 3 rows x 34 B
  ASSERT_TRUE(w.add_tensor("b", {5}, ggml::Type::kF32).ok());
  ASSERT_TRUE(w.add_tensor("c", {256, 2}, ggml::Type::kQ4_K).ok());
  const std::string path = tmp("writer_rt.gguf");
  // A chunk smaller than a tensor: the writer must cut it at block boundaries.
  ASSERT_TRUE(w.write(path, pattern, {}, 100).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const GgufFile& f = *g.value();
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f.get_u64("llama.block_count").value(), 2u);
  EXPECT_EQ(f.get_u64("big").value(), uint64_t{1} << 60);
  EXPECT_EQ(f.get_f64("llama.rope.freq_base").value(), 500000.0);
  EXPECT_TRUE(f.get_bool("flag").value());
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").value(),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->elem_type, GgufType::kInt32);
  EXPECT_EQ(f.get_number_array("tokenizer.ggml.token_type").value(),
            (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(f.get_number_array("tokenizer.ggml.scores").value(),
            (std::vector<double>{0.5, -1.25, 3.0}));
  EXPECT_EQ(f.get_u64("tokenizer.ggml.bos_token_id").value(), 1u);
  ASSERT_EQ(f.tensors().size(), 3u);
  const size_t sizes[] = {204, 20, 288};
  for (size_t i = 0; i < 3; ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    ASSERT_EQ(t.n_bytes, sizes[i]) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    for (size_t k = 0; k < t.n_bytes; ++k)
      ASSERT_EQ(t.data[k], static_cast<uint8_t>(i * 31 + k)) << t.name << " byte " << k;
  }
  EXPECT_EQ(f.tensors()[2].type, ggml::Type::kQ4_K);
  EXPECT_EQ(f.tensors()[2].shape, (std::vector<int64_t>{256, 2}));
}

TEST(GgufWriter, RefusesBadTensors) {
  GgufWriter w;
  EXPECT_NE(w.add_tensor("x", {100, 2}, ggml::Type::kQ4_0).message().find("multiple of q4_0"),
            std::string::npos);
  EXPECT_FALSE(w.add_tensor("x", {0}, ggml::Type::kF32).ok());
  EXPECT_FALSE(w.add_tensor("x", {}, ggml::Type::kF32).ok());
  ASSERT_TRUE(w.add_tensor("x", {32}, ggml::Type::kF32).ok());
  EXPECT_NE(w.add_tensor("x", {32}, ggml::Type::kF32).message().find("duplicate tensor 'x'"),
            std::string::npos);
}

TEST(GgufWriter, FailedWriteLeavesNoFile) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("x", {1024}, ggml::Type::kF32).ok());
  const std::string path = tmp("writer_fail.gguf");
  std::filesystem::remove(path);
  auto fail = [](size_t, uint64_t off, uint8_t*, size_t) -> Status {
    return off > 0 ? invalid_argument("[test] source failed") : Status();
  };
  const Status st = w.write(path, fail, {}, 1024);
  EXPECT_NE(st.message().find("source failed"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const Status bad_dir = w.write("/nonexistent-dir/x.gguf", pattern);
  EXPECT_NE(bad_dir.message().find("[gguf] write /nonexistent-dir/x.gguf.tmp: cannot create"),
            std::string::npos)
      << bad_dir.message();
}

}  // namespace
}  // namespace tkv::io
