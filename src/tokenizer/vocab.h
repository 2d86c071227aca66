// Vocabulary shared by both tokenizer kinds: token texts, scores and llama.cpp
// token attributes, special-token ids, and the special-token partition that
// splits raw text around control / user-defined token texts before BPE
// (llama.cpp tokenizer_st_partition: longest token text first, leftmost match).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {

// llama.cpp token attributes (bit set), derived from tokenizer.ggml.token_type.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
  kAttrNormalized = 1 << 6,
  kAttrLstrip = 1 << 7,
  kAttrRstrip = 1 << 8,
  kAttrSingleWord = 1 << 9,
};

// Everything from tokenizer.ggml.* a tokenizer needs; filled from a GGUF or by
// hand in tests.
struct VocabData {
  std::string model;  // "gpt2" | "llama"
  std::string pre;    // tokenizer.ggml.pre ("" if absent)
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty: all 0
  std::vector<int32_t> token_types;  // GGUF token types 1..6; empty: all normal
  std::vector<std::string> merges;   // "left right", rank = index (gpt2 only)
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1, pad_id = -1;
  int32_t add_bos = -1, add_eos = -1, add_space_prefix = -1;  // -1: not in metadata
  std::string chat_template;
};

Result<VocabData> vocab_data_from_gguf(const io::GgufFile& gguf);
// Builds the tokenizer for data.model; error on unknown model / pre-tokenizer.
Result<std::unique_ptr<Tokenizer>> make_tokenizer(VocabData data);

// Hash for string-keyed maps that look up std::string_view without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// A piece of input after special-token partition: raw text or one token.
struct Fragment {
  int32_t token = -1;     // >= 0: a special token
  std::string_view text;  // raw text when token < 0
};

class Vocab {
 public:
  Status init(VocabData& data);  // consumes tokens/scores/types; applies llama.cpp's EOG rules

  int32_t n_tokens() const { return static_cast<int32_t>(text_.size()); }
  const std::string& text(int32_t id) const { return text_[id]; }
  float score(int32_t id) const { return score_[id]; }
  uint32_t attr(int32_t id) const { return attr_[id]; }
  int32_t find(std::string_view text) const;  // -1 if absent
  bool is_eog(int32_t id) const;

  // Splits text around special-token texts (control ones only if parse_special;
  // user-defined ones always), exactly as llama.cpp's partition.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1;

 private:
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t token = -1;
  };
  int32_t child(int32_t node, uint8_t b) const;
  void build_special_trie();

  std::vector<std::string> text_;
  std::vector<float> score_;
  std::vector<uint32_t> attr_;
  StringMap<int32_t> to_id_;
  std::vector<int32_t> eog_ids_;       // sorted
  std::vector<int32_t> special_rank_;  // per token: priority (0 = first), -1 if not special
  std::vector<TrieNode> trie_;
};

}  // namespace tkv::tok
