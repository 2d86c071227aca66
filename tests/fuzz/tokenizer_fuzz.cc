// libFuzzer target: both tokenizer families on arbitrary bytes. Two small
// vocabularies are built in memory at start-up: byte-level BPE (gpt2 model,
// smollm pre-tokenizer, a few merges, ChatML control tokens) and SentencePiece
// BPE with byte fallback (llama model). Byte 0 of the input picks the
// tokenizer and the add_special / parse_special flags; the rest is the text.
// Every id must be in range; byte-level BPE must round-trip ASCII text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "io/gguf.h"
#include "tests/io/gguf_builder.h"
#include "tokenizer/tokenizer.h"

namespace {
using tkv::io::testing::GgufBuilder;
constexpr uint32_t kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7;

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100...
std::string byte_char(int b) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::vector<uint8_t> bpe_vocab() {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b)), types.push_back(1);
  const std::vector<std::string> merges = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r"};
  for (const std::string& m : merges) {
    tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
    types.push_back(1);
  }
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    tokens.push_back(s), types.push_back(3);
  GgufBuilder g;
  g.kv_string("general.architecture", "llama")
      .kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string("tokenizer.ggml.pre", "smollm")
      .kv_string_array("tokenizer.ggml.tokens", tokens)
      .kv_array("tokenizer.ggml.token_type", kI32, types)
      .kv_string_array("tokenizer.ggml.merges", merges)
      .kv("tokenizer.ggml.bos_token_id", kU32, uint32_t(tokens.size() - 3))
      .kv("tokenizer.ggml.eos_token_id", kU32, uint32_t(tokens.size() - 1));
  return g.build();
}

std::vector<uint8_t> spm_vocab() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex), types.push_back(6), scores.push_back(0);
  }
  const char* pieces[] = {"\xe2\x96\x81",
                          "a",
                          "b",
                          "e",
                          "h",
                          "t",
                          "\xe2\x96\x81t",
                          "he",
                          "\xe2\x96\x81the",
                          "\xe2\x96\x81"
                          "a",
                          "ab"};
  float score = -1;
  for (const char* p : pieces) tokens.push_back(p), types.push_back(1), scores.push_back(score--);
  GgufBuilder g;
  g.kv_string("general.architecture", "llama")
      .kv_string("tokenizer.ggml.model", "llama")
      .kv_string_array("tokenizer.ggml.tokens", tokens)
      .kv_array("tokenizer.ggml.token_type", kI32, types)
      .kv_array("tokenizer.ggml.scores", kF32, scores)
      .kv("tokenizer.ggml.bos_token_id", kU32, uint32_t{1})
      .kv("tokenizer.ggml.eos_token_id", kU32, uint32_t{2})
      .kv("tokenizer.ggml.unknown_token_id", kU32, uint32_t{0})
      .kv("tokenizer.ggml.add_bos_token", kBool, uint8_t{1});
  return g.build();
}

std::unique_ptr<tkv::tok::Tokenizer> make(const std::vector<uint8_t>& image) {
  auto f = tkv::io::GgufFile::parse(image.data(), image.size(), "vocab");
  if (!f.ok()) std::abort();
  auto t = tkv::tok::Tokenizer::from_gguf(*f.value());
  if (!t.ok()) std::abort();
  return std::move(t.value());
}

std::vector<uint8_t> g_bpe_image, g_spm_image;
std::unique_ptr<tkv::tok::Tokenizer> g_bpe, g_spm;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tkv::set_log_level(tkv::LogLevel::kError);
  g_bpe_image = bpe_vocab();
  g_spm_image = spm_vocab();
  g_bpe = make(g_bpe_image);
  g_spm = make(g_spm_image);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool spm = data[0] & 1, add_special = data[0] & 2, parse_special = data[0] & 4;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const tkv::tok::Tokenizer& t = spm ? *g_spm : *g_bpe;
  const std::vector<int32_t> ids = t.encode(text, add_special, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= t.n_vocab()) std::abort();
  const std::string back = t.decode(ids, data[0] & 8);
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (!spm && !add_special && !parse_special && ascii && back != text) std::abort();
  return 0;
}
