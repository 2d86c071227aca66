// Unicode helpers for the tokenizers: UTF-8 decode/encode with llama.cpp's
// error policy (an invalid byte becomes U+FFFD and consumes one byte),
// per-codepoint category flags (\p{L} \p{N} ... and \s) from the generated
// tables in unicode_tables.cc, and GPT-2's byte <-> printable-codepoint map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::tok::uni {

// Category flags: exactly one category bit per codepoint, plus kWhitespaceFlag.
constexpr uint16_t kUndefined = 0x01;        // Cn (unassigned)
constexpr uint16_t kNumber = 0x02;           // \p{N}
constexpr uint16_t kLetter = 0x04;           // \p{L}
constexpr uint16_t kSeparator = 0x08;        // \p{Z}
constexpr uint16_t kMark = 0x10;             // \p{M}
constexpr uint16_t kPunctuation = 0x20;      // \p{P}
constexpr uint16_t kSymbol = 0x40;           // \p{S}
constexpr uint16_t kControl = 0x80;          // \p{C} except Cn
constexpr uint16_t kWhitespaceFlag = 0x100;  // Unicode White_Space (regex \s)

struct CategoryRange {
  uint32_t start;
  uint16_t flags;
};
extern const CategoryRange kCategoryRanges[];  // sorted by start, first start 0
extern const int kNumCategoryRanges;
extern const uint32_t kWhitespace[];
extern const int kNumWhitespace;

constexpr uint32_t kMaxCodepoint = 0x110000;
constexpr uint32_t kReplacement = 0xFFFD;

// Flags of one codepoint (0 is never returned for cpt < kMaxCodepoint).
uint16_t flags(uint32_t cpt);
inline bool is_letter(uint32_t c) {
  return flags(c) & kLetter;
}
inline bool is_number(uint32_t c) {
  return flags(c) & kNumber;
}
inline bool is_space(uint32_t c) {
  return flags(c) & kWhitespaceFlag;
}

// Length of the UTF-8 sequence a lead byte announces (1 for continuation bytes),
// as llama.cpp's unicode_len_utf8: used to split text into "characters".
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(uint32_t cpt, std::string& out);

// GPT-2 byte-level map: every byte to one printable codepoint, and back.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the codepoint
int unicode_to_byte(uint32_t cpt);              // -1 if cpt is no byte's image

}  // namespace tkv::tok::uni
