// Bad model inputs give clear errors naming the problem: missing file,
// non-GGUF file, truncated GGUF, unsupported architecture.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "model/model.h"
#include "runtime/engine.h"
#include "tests/io/gguf_builder.h"
#include "tests/model/test_models.h"

namespace tkv {
namespace {

std::string write_tmp(const std::string& name, const std::string& bytes) {
  const std::string p = ::testing::TempDir() + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

TEST(ModelLoad, MissingFile) {
  runtime::EngineOptions o;
  o.model_path = "/nonexistent/model.gguf";
  auto e = runtime::Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("model file not found"), std::string::npos)
      << e.status().message();
}

TEST(ModelLoad, NotAGguf) {
  auto m = model::Model::load(write_tmp("notgguf.bin", std::string(4096, 'x')));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("[gguf]"), std::string::npos) << m.status().message();
}

TEST(ModelLoad, TruncatedRealModel) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 not fetched";
  std::ifstream in(testing::smollm2_path(), std::ios::binary);
  std::string head(1 << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  auto m = model::Model::load(write_tmp("trunc.gguf", head));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("[gguf]"), std::string::npos) << m.status().message();
}

TEST(ModelLoad, UnsupportedArchitectureIsNamed) {
  io::testing::GgufBuilder b;
  b.kv_string("general.architecture", "mamba");
  const auto bytes = b.build();
  auto m = model::Model::load(write_tmp("mamba.gguf", std::string(bytes.begin(), bytes.end())));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("unsupported architecture 'mamba'"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("llama"), std::string::npos)
      << "should list the supported ones";
}

TEST(ModelLoad, MissingHparamIsNamed) {
  io::testing::GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  b.kv("llama.block_count", 4 /*u32*/, uint32_t{2});
  const auto bytes = b.build();
  auto m = model::Model::load(write_tmp("nohp.gguf", std::string(bytes.begin(), bytes.end())));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("embedding_length"), std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace tkv
