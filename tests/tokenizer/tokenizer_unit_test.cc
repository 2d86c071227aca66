// Tokenizer pieces without a model file: UTF-8 policy, Unicode categories,
// GPT-2 byte map, pre-tokenizer splits (expected splits are those of the
// original regexes, worked out by hand), special-token partition, and a tiny
// SentencePiece vocabulary with byte fallback.
#include <gtest/gtest.h>

#include "tokenizer/chat_template.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace tkv::tok {
namespace {

std::vector<std::string> split(std::string_view text, PreType pre) {
  const auto cpts = uni::decode_utf8(text);
  std::vector<std::string> words;
  size_t i = 0;
  for (size_t len : pre_split(cpts, pre)) {
    std::string w;
    for (size_t e = i + len; i < e; ++i) uni::append_utf8(cpts[i], w);
    words.push_back(w);
  }
  return words;
}
using Words = std::vector<std::string>;

TEST(Unicode, DecodePolicyMatchesLlamaCpp) {
  // Invalid lead/continuation bytes become U+FFFD and consume one byte.
  EXPECT_EQ(uni::decode_utf8("a\xff"
                             "b"),
            (std::vector<uint32_t>{'a', 0xFFFD, 'b'}));
  EXPECT_EQ(uni::decode_utf8("\xc3"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(uni::decode_utf8("\xe2\x96\x81"), (std::vector<uint32_t>{0x2581}));
  EXPECT_EQ(uni::decode_utf8("\xf0\x9f\x98\x80"), (std::vector<uint32_t>{0x1F600}));
}

TEST(Unicode, Categories) {
  EXPECT_TRUE(uni::is_letter('a'));
  EXPECT_TRUE(uni::is_letter(0x65E5));  // 日
  EXPECT_TRUE(uni::is_number('7'));
  EXPECT_TRUE(uni::is_number(0x00B2));  // ² (No)
  EXPECT_TRUE(uni::is_space(0x3000));
  EXPECT_FALSE(uni::is_space(0x200B));  // zero width space is Cf, not White_Space
  EXPECT_EQ(uni::flags(0x0378) & 0xFF, uni::kUndefined);
  EXPECT_EQ(uni::flags(0x1F600) & 0xFF, uni::kSymbol);
}

TEST(Unicode, ByteMapIsABijection) {
  for (int b = 0; b < 256; ++b) {
    const auto cpts = uni::decode_utf8(uni::byte_to_unicode(static_cast<uint8_t>(b)));
    ASSERT_EQ(cpts.size(), 1u);
    EXPECT_EQ(uni::unicode_to_byte(cpts[0]), b);
  }
  EXPECT_EQ(uni::byte_to_unicode(' '), "\xc4\xa0");  // 'Ġ'
  EXPECT_EQ(uni::byte_to_unicode('A'), "A");
}

TEST(PreTokenize, Gpt2) {
  EXPECT_EQ(split("Hello world's  end\n\n x", PreType::kGpt2),
            (Words{"Hello", " world", "'s", " ", " end", "\n\n", " x"}));
  EXPECT_EQ(split("a  ", PreType::kGpt2), (Words{"a", "  "}));
  EXPECT_EQ(split("x 123 4.5", PreType::kGpt2), (Words{"x", " 123", " 4", ".", "5"}));
}

TEST(PreTokenize, SmollmIsolatesDigits) {
  EXPECT_EQ(split("ab 123", PreType::kSmollm), (Words{"ab", " ", "1", "2", "3"}));
}

TEST(PreTokenize, Llama3AndQwen2) {
  EXPECT_EQ(split("1234567 I'M", PreType::kLlama3), (Words{"123", "456", "7", " I", "'M"}));
  EXPECT_EQ(split("12 x\n\n  y", PreType::kQwen2), (Words{"1", "2", " x", "\n\n", " ", " y"}));
  EXPECT_EQ(split("(hi)!!\n", PreType::kQwen2), (Words{"(hi", ")!!\n"}));
}

VocabData tiny_spm() {
  VocabData d;
  d.model = "llama";
  d.tokens = {"<unk>",
              "<s>",
              "</s>",
              "<ctl>",
              "<ud>",
              "\xe2\x96\x81",
              "a",
              "b",
              "ab",
              "\xe2\x96\x81"
              "ab"};
  d.scores = {0, 0, 0, 0, 0, -1, -2, -2, -1, -0.5f};
  d.token_types = {2, 3, 3, 3, 4, 1, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    d.tokens.push_back(fmt::format("<0x{:02X}>", b));
    d.scores.push_back(0);
    d.token_types.push_back(6);
  }
  d.bos_id = 1, d.eos_id = 2, d.add_space_prefix = 1;
  return d;
}

TEST(Partition, ControlOnlyWithParseSpecialUserDefinedAlways) {
  VocabData d = tiny_spm();
  Vocab v;
  ASSERT_TRUE(v.init(d).ok());
  auto f = v.partition("x<ctl>y<ud>", true);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].text, "x");
  EXPECT_EQ(f[1].token, 3);
  EXPECT_EQ(f[2].text, "y");
  EXPECT_EQ(f[3].token, 4);
  f = v.partition("x<ctl>y<ud>", false);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].text, "x<ctl>y");
  EXPECT_EQ(f[1].token, 4);
}

TEST(Spm, MergesByScoreWithSpacePrefixAndByteFallback) {
  auto r = make_tokenizer(tiny_spm());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& tok = *r.value();
  // " ab" -> "▁ab" (score -0.5 beats "ab" -1); 'c' has no token -> <0x63>.
  const int32_t c_byte = 10 + 0x63;
  EXPECT_EQ(tok.encode("ab c", true, false), (std::vector<int32_t>{1, 9, 5, c_byte}));
  EXPECT_EQ(tok.decode(tok.encode("ab c", false, false)), " ab c");  // space prefix stays in pieces
  EXPECT_EQ(tok.encode("", true, false), (std::vector<int32_t>{1}));
}

TEST(ChatTemplate, ChatmlDefaultSystemFromJinjaLiteral) {
  const std::string jinja =
      "{%- else %}{{- '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}{%- endif %}";
  const ChatTemplate ct = ChatTemplate::detect(jinja, false);
  EXPECT_EQ(ct.format, ChatFormat::kChatml);
  EXPECT_EQ(ct.default_system, "Be brief.");
  auto r = ct.render({{"user", "hi"}}, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(),
            "<|im_start|>system\nBe "
            "brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(ChatTemplate::detect("{{ messages }}", false).render({{"user", "hi"}}, true).ok());
}

}  // namespace
}  // namespace tkv::tok
