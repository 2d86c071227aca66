// Token-for-token parity with llama.cpp (fixtures from
// scripts/peer/make-tokenizer-fixtures) on the real GGUF vocabularies, decode
// round trips and chat renderings. A model whose GGUF is absent is skipped
// (CI has SmolLM2 only). Exact equality is the contract: no tolerance.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {
namespace {

struct Model {
  std::string key, file;
};
void PrintTo(const Model& m, std::ostream* os) {
  *os << m.key;
}
const Model kSmol{"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"};
const Model kGemma{"gemma3", "gemma-3-270m-q4_k_m.gguf"};
const Model kQwen{"qwen25", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"};

std::string model_path(const Model& m) {
  const char* dir = std::getenv("TKV_MODEL_DIR");
  const char* home = std::getenv("HOME");
  return (dir ? std::string(dir) : std::string(home ? home : "") + "/.cache/turbokv/models") + "/" +
         m.file;
}
std::string fixture(const std::string& name) {
  return std::string(TKV_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + name;
}

// Loading a 262k vocabulary takes a while: one tokenizer per model per process.
const Tokenizer* load(const Model& m, std::string* why) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  if (auto it = cache.find(m.key); it != cache.end()) return it->second.get();
  const std::string path = model_path(m);
  if (!std::filesystem::exists(path)) {
    *why = path + " absent (scripts/fetch-models)";
    return nullptr;
  }
  auto g = io::GgufFile::open(path);
  if (!g.ok()) {
    *why = g.status().to_string();
    return nullptr;
  }
  auto t = Tokenizer::from_gguf(*g.value());
  if (!t.ok()) {
    *why = t.status().to_string();
    return nullptr;
  }
  return (cache[m.key] = std::move(t.value())).get();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}
std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s)
    o += (c >= 0x20 && c < 0x7F) ? std::string(1, static_cast<char>(c))
                                 : fmt::format("\\x{:02x}", c);
  return o;
}

// Index of the first difference, or -1.
long first_diff(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return a.size() == b.size() ? -1 : static_cast<long>(std::min(a.size(), b.size()));
}

class ModelTest : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    std::string why;
    tok_ = load(GetParam(), &why);
    if (!tok_) GTEST_SKIP() << why;
  }
  const Tokenizer* tok_ = nullptr;
};

TEST_P(ModelTest, TrickyStringsMatchLlamaCpp) {
  const auto j = nlohmann::json::parse(read_file(fixture(GetParam().key + ".cases.json")));
  int n = 0;
  for (const auto& c : j.at("cases")) {
    const std::string text = unhex(c.at("text_hex").get<std::string>());
    const bool add_special =
        tok_->add_bos() && !c.at("no_bos").get<bool>();  // llama-tokenize's rule
    const bool parse_special = c.at("parse_special").get<bool>();
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    const auto got = tok_->encode(text, add_special, parse_special);
    EXPECT_EQ(got, want) << "text \"" << printable(text) << "\" add_special=" << add_special
                         << " parse_special=" << parse_special << " first diff at "
                         << first_diff(got, want);
    ++n;
  }
  EXPECT_GT(n, 60);
}

TEST_P(ModelTest, WikitextMatchesLlamaCpp) {
  const auto meta = nlohmann::json::parse(read_file(fixture(GetParam().key + ".cases.json")));
  const std::string bin = read_file(fixture(GetParam().key + ".wiki.bin"));
  std::vector<int32_t> want(bin.size() / 4);
  std::memcpy(want.data(), bin.data(), want.size() * 4);
  ASSERT_EQ(want.size(), meta.at("wiki_n_tokens").get<size_t>());
  std::string text = read_file(std::string(TKV_SOURCE_DIR) + "/data/wikitext-2-raw-test.txt");
  ASSERT_FALSE(text.empty()) << "wikitext missing under " << TKV_SOURCE_DIR << "/data";
  text.resize(std::min(text.size(), meta.at("wiki_text_bytes").get<size_t>()));
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = tok_->encode(text, tok_->add_bos(), false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[tokenizer] %s: %zu tokens from %zu bytes in %.3f s = %.0f tok/s, %.1f MB/s\n",
              GetParam().key.c_str(), got.size(), text.size(), s, got.size() / s,
              text.size() / s / 1e6);
  const long d = first_diff(got, want);
  EXPECT_EQ(d, -1) << "got " << got.size() << " tokens, llama.cpp " << want.size()
                   << "; first diff at " << d
                   << (d >= 0 && d < static_cast<long>(std::min(got.size(), want.size()))
                           ? fmt::format(" (ours {} '{}', theirs {} '{}')", got[d],
                                         printable(tok_->token_to_piece(got[d])), want[d],
                                         printable(tok_->token_to_piece(want[d])))
                           : std::string());
  // Decoding llama.cpp's ids gives the text back (every byte of it is representable).
  EXPECT_EQ(tok_->decode(want), text) << "decode(llama.cpp ids) != wikitext";
}

TEST_P(ModelTest, DecodeEncodeRoundTrip) {
  const std::vector<std::string> texts = {"Hello world",
                                          " leading",
                                          "  \n\n\t  x",
                                          "don't I'm",
                                          "12345678901",
                                          "café 日本語 😀 مرحبا",
                                          "def f(x):\n    return x\n",
                                          "a\r\nb"};
  for (const std::string& t : texts) {
    EXPECT_EQ(tok_->decode(tok_->encode(t, false, false)), t) << printable(t);
    // With BOS (if any): control tokens render to "" unless render_special.
    EXPECT_EQ(tok_->decode(tok_->encode(t, true, false)), t) << printable(t);
  }
}

TEST_P(ModelTest, SpecialIdsAndEog) {
  EXPECT_GE(tok_->eos_id(), 0);
  EXPECT_TRUE(tok_->is_eog(tok_->eos_id()));
  const auto ids =
      tok_->encode(GetParam().key == "gemma3" ? "<end_of_turn>" : "<|im_end|>", false, true);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_TRUE(tok_->is_eog(ids[0]));
  EXPECT_EQ(tok_->token_to_piece(ids[0]), "");
  EXPECT_EQ(tok_->token_to_piece(ids[0], true),
            GetParam().key == "gemma3" ? "<end_of_turn>" : "<|im_end|>");
  EXPECT_FALSE(tok_->is_eog(tok_->encode("hello", false, false)[0]));
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTest, ::testing::Values(kSmol, kGemma, kQwen),
                         [](const auto& p) { return p.param.key; });

const std::vector<ChatMessage> kTwoTurns = {
    {"user", "Hi!"}, {"assistant", "Hello. How can I help?"}, {"user", "Tell me a joke."}};

TEST(ChatTemplateModels, SmolLM2ChatmlWithDefaultSystem) {
  std::string why;
  const Tokenizer* t = load(kSmol, &why);
  if (!t) GTEST_SKIP() << why;
  auto r = t->apply_chat_template(kTwoTurns, true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // What SmolLM2's Jinja template renders (system turn injected when absent).
  EXPECT_EQ(
      r.value(),
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n"
      "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello. How can I help?<|im_end|>\n"
      "<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n");
  auto s = t->apply_chat_template({{"system", "Be terse."}, {"user", "Hi!"}}, false);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value(),
            "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n");
  // The rendering tokenizes with <|im_start|> / <|im_end|> as single control tokens.
  const auto ids = t->encode(r.value(), false, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 5);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 4);
}

TEST(ChatTemplateModels, Qwen25ChatmlWithDefaultSystem) {
  std::string why;
  const Tokenizer* t = load(kQwen, &why);
  if (!t) GTEST_SKIP() << why;
  auto r = t->apply_chat_template(kTwoTurns, true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(
      r.value(),
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\n"
      "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello. How can I help?<|im_end|>\n"
      "<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateModels, GemmaTurns) {
  std::string why;
  const Tokenizer* t = load(kGemma, &why);
  if (!t) GTEST_SKIP() << why;
  std::vector<ChatMessage> msgs = {{"system", "Be terse."}};
  msgs.insert(msgs.end(), kTwoTurns.begin(), kTwoTurns.end());
  auto r = t->apply_chat_template(msgs, true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(),
            "<start_of_turn>user\nBe terse.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello. How "
            "can I help?<end_of_turn>\n"
            "<start_of_turn>user\nTell me a joke.<end_of_turn>\n<start_of_turn>model\n");
  const auto ids = t->encode(r.value(), true, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], t->bos_id());
}

}  // namespace
}  // namespace tkv::tok
