// Byte-level BPE (tokenizer.ggml.model "gpt2"): pre-tokenize, map bytes to
// GPT-2's printable codepoints, then merge adjacent symbols by merge rank
// (lowest rank first, leftmost on ties) as llama.cpp's llm_tokenizer_bpe_session.
// Symbols that are no token fall back to their single bytes' tokens, if any.
#include <queue>
#include <unordered_map>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace tkv::tok {
namespace {

class BpeTokenizer final : public VocabTokenizer {
 public:
  Status init(VocabData& d);
  std::string token_to_piece(int32_t id, bool render_special) const override;

 protected:
  void encode_fragment(std::string_view text, bool prev_special,
                       std::vector<int32_t>& out) const override;

 private:
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;
  int rank(std::string_view left, std::string_view right, std::string& key) const;

  PreType pre_ = PreType::kDefault;
  bool ignore_merges_ = false;
  StringMap<int> ranks_;  // key: left + '\0' + right
};

Status BpeTokenizer::init(VocabData& d) {
  if (!pre_type_from_name(d.pre, &pre_))
    return invalid_argument("[tokenizer] unknown pre-tokenizer '{}'", d.pre);
  if (d.merges.empty())
    return invalid_argument("[tokenizer] gpt2 tokenizer without tokenizer.ggml.merges");
  ranks_.reserve(d.merges.size() * 2);
  for (size_t i = 0; i < d.merges.size(); ++i) {
    const std::string& m = d.merges[i];
    const size_t sp = m.find(' ', 1);  // as llama.cpp: a leading space belongs to the left part
    std::string key =
        sp == std::string::npos ? std::string(1, '\0') : m.substr(0, sp) + '\0' + m.substr(sp + 1);
    ranks_.emplace(std::move(key), static_cast<int>(i));
  }
  ignore_merges_ = pre_ == PreType::kLlama3;  // llama.cpp sets ignore_merges for llama-bpe
  if (d.bos_id < 0) d.bos_id = 11;            // llama.cpp's gpt2 defaults
  if (d.eos_id < 0) d.eos_id = 11;
  return init_common(d, /*default_add_bos=*/pre_ == PreType::kLlama3);
}

int BpeTokenizer::rank(std::string_view left, std::string_view right, std::string& key) const {
  key.assign(left);
  key += '\0';
  key.append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t>& out) const {
  for (const std::string& w : pretokenize_byte_level(text, pre_)) encode_word(w, out);
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (int32_t id = vocab_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct Sym {
    int prev, next;
    uint32_t off, n;
  };
  std::vector<Sym> syms;
  for (uint32_t off = 0; off < word.size();) {
    const uint32_t n =
        std::min<uint32_t>(uni::utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
    syms.push_back({static_cast<int>(syms.size()) - 1, -1, off, n});
    off += n;
    if (off < word.size()) syms.back().next = static_cast<int>(syms.size());
  }
  struct Bigram {
    int rank, left, right;
    uint32_t n;  // byte length of left+right when queued
  };
  auto later = [](const Bigram& a, const Bigram& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(later)> queue(later);
  std::string key;
  auto sv = [&](const Sym& s) { return std::string_view(word).substr(s.off, s.n); };
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    if (int rk = rank(sv(syms[l]), sv(syms[r]), key); rk >= 0)
      queue.push({rk, l, r, syms[l].n + syms[r].n});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    // Stale if either side was merged away or grew since it was queued.
    if (l.n == 0 || r.n == 0 || l.next != b.right || l.n + r.n != b.n) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i >= 0 && !syms.empty(); i = syms[i].next) {
    const std::string_view s = sv(syms[i]);
    if (int32_t id = vocab_.find(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : s)  // llama.cpp looks up each raw byte of the symbol as a token text
      if (int32_t id = vocab_.find(std::string_view(&ch, 1)); id >= 0) out.push_back(id);
  }
}

std::string BpeTokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_.n_tokens()) return "";
  const uint32_t attr = vocab_.attr(id);
  if (!render_special && (attr & (kAttrUnknown | kAttrControl))) return "";
  const std::string& text = vocab_.text(id);
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    std::string out;
    for (uint32_t c : uni::decode_utf8(text)) {
      const int b = uni::unicode_to_byte(c);
      if (b >= 0) {
        out += static_cast<char>(b);
      } else {  // not a byte image: llama.cpp's marker text
        std::string u;
        uni::append_utf8(c, u);
        out += "[UNK_BYTE_0x";
        for (char ch : u) out += fmt::format("{:02x}", static_cast<uint8_t>(ch));
        out += text + "]";
      }
    }
    return out;
  }
  if (attr & kAttrByte) return byte_piece(text);
  return "";
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(VocabData& d) {
  auto t = std::make_unique<BpeTokenizer>();
  TKV_RETURN_IF_ERROR(t->init(d));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace tkv::tok
