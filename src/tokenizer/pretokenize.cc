// Hand-written scanners equivalent to the pre-tokenizer regexes llama.cpp uses
// (unicode.cpp: unicode_regex_split_custom_gpt2 / _llama3 / _qwen2, and the
// std::regex passes for "\p{N}", "[\p{P}...]+", "\p{N}+", "[0-9][0-9][0-9]").
// Positions are codepoint indices; a pass never looks outside its fragment.
#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace tkv::tok {
namespace {

constexpr uint32_t kOut = 0xFFFFFFFF;  // "no codepoint": outside the fragment

// View of one fragment [begin, end) of the codepoint array.
struct Frag {
  const std::vector<uint32_t>& c;
  size_t begin, end;
  uint32_t cpt(size_t i) const { return i < end ? c[i] : kOut; }
  uint16_t fl(size_t i) const { return i < end ? uni::flags(c[i]) : 0; }
};

constexpr uint16_t kWs = uni::kWhitespaceFlag, kL = uni::kLetter, kN = uni::kNumber;

bool is_rn(uint32_t c) {
  return c == '\r' || c == '\n';
}
uint32_t ascii_lower(uint32_t c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

// 's 't 'm 'd (2 cpts) or 're 've 'll (3 cpts); 0 if none. Case-folded if ci.
size_t contraction(const Frag& f, size_t pos, bool ci) {
  if (f.cpt(pos) != '\'' || pos + 1 >= f.end) return 0;
  const uint32_t a = ci ? ascii_lower(f.cpt(pos + 1)) : f.cpt(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= f.end) return 0;
  const uint32_t b = ci ? ascii_lower(f.cpt(pos + 2)) : f.cpt(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

size_t count_ws(const Frag& f, size_t pos) {
  size_t n = 0;
  while (f.fl(pos + n) & kWs) ++n;
  return n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Returns the end of the word starting at pos.
size_t gpt2_word(const Frag& f, size_t pos) {
  if (size_t n = contraction(f, pos, false)) return pos + n;
  const uint32_t c0 = f.cpt(pos);
  uint16_t f2 = c0 == ' ' ? f.fl(pos + 1) : f.fl(pos);
  for (uint16_t cls : {kL, kN}) {
    if (f2 & cls) {
      pos += (c0 == ' ');
      while (f.fl(pos) & cls) ++pos;
      return pos;
    }
  }
  if (!(f2 & (kWs | kL | kN)) && f2) {
    pos += (c0 == ' ');
    while (!(f2 & (kWs | kL | kN)) && f2) f2 = f.fl(++pos);
    return pos;
  }
  const size_t n = count_ws(f, pos);
  if (n > 1 && f.cpt(pos + n) != kOut) return pos + n - 1;  // \s+(?!\S)
  if (n > 0) return pos + n;
  return pos + 1;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama-3: 3, Qwen2: 1)
size_t llama3_word(const Frag& f, size_t pos, size_t max_digits) {
  if (size_t n = contraction(f, pos, true)) return pos + n;
  const uint32_t c0 = f.cpt(pos);
  const uint16_t f0 = f.fl(pos);
  if (!(is_rn(c0) || (f0 & kN)) && ((f0 & kL) || (f.fl(pos + 1) & kL))) {
    ++pos;
    while (f.fl(pos) & kL) ++pos;
    return pos;
  }
  if (f0 & kN) {
    const size_t start = pos;
    while ((f.fl(pos) & kN) && pos - start < max_digits) ++pos;
    return pos;
  }
  uint16_t f2 = c0 == ' ' ? f.fl(pos + 1) : f0;
  if (!(f2 & (kWs | kL | kN)) && f0) {  // llama.cpp tests f0 here, not f2
    pos += (c0 == ' ');
    while (!(f2 & (kWs | kL | kN)) && f2) f2 = f.fl(++pos);
    while (is_rn(f.cpt(pos))) ++pos;
    return pos;
  }
  size_t n = 0, last_rn = 0;
  while (f.fl(pos + n) & kWs) {
    if (is_rn(f.cpt(pos + n))) last_rn = pos + n + 1;
    ++n;
  }
  if (last_rn > 0) return last_rn;                          // \s*[\r\n]+
  if (n > 1 && f.cpt(pos + n) != kOut) return pos + n - 1;  // \s+(?!\S)
  if (n > 0) return pos + n;
  return pos + 1;
}

// One pass of a word scanner that covers every codepoint.
template <typename WordFn>
std::vector<size_t> scan_pass(const std::vector<uint32_t>& c, const std::vector<size_t>& offs,
                              WordFn word) {
  std::vector<size_t> out;
  out.reserve(offs.size() * 2);
  size_t begin = 0;
  for (size_t len : offs) {
    Frag f{c, begin, begin + len};
    for (size_t pos = begin; pos < f.end;) {
      const size_t e = word(f, pos);
      out.push_back(e - pos);
      pos = e;
    }
    begin += len;
  }
  return out;
}

// One regex-search pass: `match(f, pos)` gives a match length (0: none);
// unmatched stretches between matches stay fragments of their own.
template <typename MatchFn>
std::vector<size_t> match_pass(const std::vector<uint32_t>& c, const std::vector<size_t>& offs,
                               MatchFn match) {
  std::vector<size_t> out;
  out.reserve(offs.size() * 2);
  size_t begin = 0;
  for (size_t len : offs) {
    Frag f{c, begin, begin + len};
    size_t gap = begin;
    for (size_t pos = begin; pos < f.end;) {
      const size_t m = match(f, pos);
      if (m == 0) {
        ++pos;
        continue;
      }
      if (pos > gap) out.push_back(pos - gap);
      out.push_back(m);
      pos += m;
      gap = pos;
    }
    if (f.end > gap) out.push_back(f.end - gap);
    begin += len;
  }
  return out;
}

// [\p{P}\$\+<=>\^~\|] as llama.cpp's collapsed regex sees it: ASCII
// punctuation minus '`', plus $+<=>^~|, plus non-ASCII category P.
bool default_punct(uint32_t c) {
  if (c < 128)
    return c != '`' && ((c >= '!' && c <= '/') || (c >= ':' && c <= '@') ||
                        (c >= '[' && c <= '^') || c == '_' || (c >= '{' && c <= '~'));
  const uint16_t fl = uni::flags(c);
  return !(fl & kWs) && (fl & uni::kPunctuation);
}

}  // namespace

bool pre_type_from_name(std::string_view name, PreType* out) {
  if (name == "default" || name.empty()) {
    *out = PreType::kDefault;
  } else if (name == "gpt2" || name == "gpt-2" || name == "mpt" || name == "olmo" ||
             name == "jais") {
    *out = PreType::kGpt2;
  } else if (name == "smollm" || name == "starcoder" || name == "refact" || name == "command-r" ||
             name == "codeshell" || name == "exaone" || name == "minerva-7b") {
    *out = PreType::kSmollm;
  } else if (name == "qwen2" || name == "stablelm2" || name == "hunyuan") {
    *out = PreType::kQwen2;
  } else if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3" ||
             name == "smaug-bpe" || name == "dbrx") {
    *out = PreType::kLlama3;
  } else {
    return false;
  }
  return true;
}

std::vector<size_t> pre_split(const std::vector<uint32_t>& c, PreType pre) {
  std::vector<size_t> offs;
  if (c.empty()) return offs;
  offs.push_back(c.size());
  auto one_number = [](const Frag& f, size_t pos) -> size_t { return (f.fl(pos) & kN) ? 1 : 0; };
  switch (pre) {
    case PreType::kSmollm:
      offs = match_pass(c, offs, one_number);
      [[fallthrough]];
    case PreType::kGpt2:
      return scan_pass(c, offs, gpt2_word);
    case PreType::kQwen2:
      return scan_pass(c, offs, [](const Frag& f, size_t p) { return llama3_word(f, p, 1); });
    case PreType::kLlama3:
      return scan_pass(c, offs, [](const Frag& f, size_t p) { return llama3_word(f, p, 3); });
    case PreType::kDefault:
      break;
  }
  offs = match_pass(c, offs, [](const Frag& f, size_t pos) {
    size_t p = pos;
    while (p < f.end && default_punct(f.c[p])) ++p;
    return p - pos;
  });
  offs = scan_pass(c, offs, gpt2_word);
  offs = match_pass(c, offs, [](const Frag& f, size_t pos) {
    size_t p = pos;
    while (f.fl(p) & kN) ++p;
    return p - pos;
  });
  auto digit = [](uint32_t x) { return x >= '0' && x <= '9'; };
  return match_pass(c, offs, [&](const Frag& f, size_t pos) -> size_t {
    return (pos + 2 < f.end && digit(f.c[pos]) && digit(f.c[pos + 1]) && digit(f.c[pos + 2])) ? 3
                                                                                              : 0;
  });
}

std::vector<std::string> pretokenize_byte_level(std::string_view text, PreType pre) {
  const std::vector<uint32_t> cpts = uni::decode_utf8(text);
  const std::vector<size_t> offs = pre_split(cpts, pre);
  std::vector<std::string> words;
  words.reserve(offs.size());
  size_t i = 0;
  std::string utf8;
  for (size_t len : offs) {
    std::string w;
    for (size_t e = i + len; i < e; ++i) {
      utf8.clear();
      uni::append_utf8(cpts[i], utf8);
      for (char ch : utf8) w += uni::byte_to_unicode(static_cast<uint8_t>(ch));
    }
    words.push_back(std::move(w));
  }
  return words;
}

}  // namespace tkv::tok
