// UTF-8 codec, category lookup and the GPT-2 byte map (see unicode.h).
// The decoder follows llama.cpp's unicode_cpt_from_utf8: a lead byte with the
// wrong continuation bytes (or truncated) yields U+FFFD and skips one byte.
#include "tokenizer/unicode.h"

#include <array>

namespace tkv::tok::uni {
namespace {

std::vector<uint16_t> build_flag_table() {
  std::vector<uint16_t> t(kMaxCodepoint, kUndefined);
  for (int i = 0; i < kNumCategoryRanges; ++i) {
    const uint32_t end = i + 1 < kNumCategoryRanges ? kCategoryRanges[i + 1].start : kMaxCodepoint;
    for (uint32_t c = kCategoryRanges[i].start; c < end; ++c) t[c] = kCategoryRanges[i].flags;
  }
  for (int i = 0; i < kNumWhitespace; ++i) t[kWhitespace[i]] |= kWhitespaceFlag;
  return t;
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> to_byte;  // GPT-2 images are all < 0x144
  ByteMap() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cpt = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      append_utf8(cpt, to_unicode[b]);
      to_byte[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

bool is_cont(std::string_view s, size_t i) {
  return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
}

}  // namespace

uint16_t flags(uint32_t cpt) {
  static const std::vector<uint16_t> table = build_flag_table();
  return cpt < kMaxCodepoint ? table[cpt] : kUndefined;
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const uint32_t b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && is_cont(s, i + 1)) {
      out.push_back(((b0 & 0x1F) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3F));
      i += 2;
    } else if ((b0 & 0xF0) == 0xE0 && is_cont(s, i + 1) && is_cont(s, i + 2)) {
      out.push_back(((b0 & 0x0F) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3F) << 6) |
                    (static_cast<uint8_t>(s[i + 2]) & 0x3F));
      i += 3;
    } else if ((b0 & 0xF8) == 0xF0 && is_cont(s, i + 1) && is_cont(s, i + 2) && is_cont(s, i + 3)) {
      out.push_back(((b0 & 0x07) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3F) << 12) |
                    ((static_cast<uint8_t>(s[i + 2]) & 0x3F) << 6) |
                    (static_cast<uint8_t>(s[i + 3]) & 0x3F));
      i += 4;
    } else {
      out.push_back(kReplacement);
      i += 1;
    }
  }
  return out;
}

void append_utf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

const std::string& byte_to_unicode(uint8_t b) {
  return byte_map().to_unicode[b];
}

int unicode_to_byte(uint32_t cpt) {
  return cpt < 512 ? byte_map().to_byte[cpt] : -1;
}

}  // namespace tkv::tok::uni
