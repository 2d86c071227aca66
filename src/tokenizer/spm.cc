// SentencePiece-style BPE (tokenizer.ggml.model "llama", e.g. Gemma): spaces
// become U+2581, the text is split into UTF-8 characters, and adjacent symbols
// whose concatenation is a vocabulary entry merge highest score first (leftmost
// on ties), as llama.cpp's llm_tokenizer_spm_session; leftovers use <0xXX>.
#include <queue>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace tkv::tok {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

class SpmTokenizer final : public VocabTokenizer {
 public:
  Status init(VocabData& d);
  std::string token_to_piece(int32_t id, bool render_special) const override;

 protected:
  void encode_fragment(std::string_view text, bool prev_special,
                       std::vector<int32_t>& out) const override;

 private:
  void push_bytes(std::string_view s, std::vector<int32_t>& out) const;
  bool add_space_prefix_ = true;
  int32_t byte_ids_[256];
};

Status SpmTokenizer::init(VocabData& d) {
  add_space_prefix_ = d.add_space_prefix != 0;  // llama.cpp's default for SPM is true
  if (d.bos_id < 0) d.bos_id = 1;               // llama.cpp's SPM defaults
  if (d.eos_id < 0) d.eos_id = 2;
  if (d.unk_id < 0) d.unk_id = 0;
  TKV_RETURN_IF_ERROR(init_common(d, /*default_add_bos=*/true));
  for (int b = 0; b < 256; ++b) {
    int32_t id = vocab_.find(fmt::format("<0x{:02X}>", b));
    if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = id;
  }
  return Status::ok_status();
}

void SpmTokenizer::push_bytes(std::string_view s, std::vector<int32_t>& out) const {
  for (char ch : s) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(ch)];
    // llama.cpp aborts on a byte with no token; we emit <unk> (or nothing) instead.
    if (id >= 0) {
      out.push_back(id);
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);
    }
  }
}

void SpmTokenizer::encode_fragment(std::string_view raw, bool prev_special,
                                   std::vector<int32_t>& out) const {
  std::string text;
  if (add_space_prefix_ && prev_special) text += kSpace;
  for (char ch : raw) {
    if (ch == ' ') {
      text += kSpace;
    } else {
      text += ch;
    }
  }
  struct Sym {
    int prev, next;
    uint32_t off, n;
  };
  std::vector<Sym> syms;
  for (uint32_t off = 0; off < text.size();) {
    const uint32_t n =
        std::min<uint32_t>(uni::utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    syms.push_back({static_cast<int>(syms.size()) - 1, -1, off, n});
    off += n;
    if (off < text.size()) syms.back().next = static_cast<int>(syms.size());
  }
  struct Bigram {
    float score;
    int left, right;
    uint32_t n;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto sv = [&](uint32_t off, uint32_t n) { return std::string_view(text).substr(off, n); };
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const uint32_t n = syms[l].n + syms[r].n;
    if (int32_t id = vocab_.find(sv(syms[l].off, n)); id >= 0)
      queue.push({vocab_.score(id), l, r, n});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.n) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i >= 0 && !syms.empty(); i = syms[i].next) {
    const std::string_view s = sv(syms[i].off, syms[i].n);
    if (int32_t id = vocab_.find(s); id >= 0) {
      out.push_back(id);
    } else {
      push_bytes(s, out);
    }
  }
}

std::string SpmTokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_.n_tokens()) return "";
  const uint32_t attr = vocab_.attr(id);
  if (!render_special && (attr & (kAttrUnknown | kAttrControl))) return "";
  const std::string& text = vocab_.text(id);
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    std::string out;
    for (size_t p = 0; p < text.size();) {
      if (text.compare(p, kSpace.size(), kSpace) == 0) {
        out += ' ';
        p += kSpace.size();
      } else {
        out += text[p++];
      }
    }
    return out;
  }
  if (attr & kAttrByte) return byte_piece(text);
  return "";
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(VocabData& d) {
  auto t = std::make_unique<SpmTokenizer>();
  TKV_RETURN_IF_ERROR(t->init(d));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace tkv::tok
