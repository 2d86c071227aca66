// Vocab: token table, llama.cpp's text-based special-token detection (EOT, FIM,
// end-of-generation lists in llama-vocab.cpp load()), and the special-token
// partition. The partition is computed in one pass: a trie finds every
// occurrence of every special text, then occurrences are accepted in
// llama.cpp's order (longer texts first, leftmost first, never overlapping an
// accepted one), which yields the same fragments as its repeated splitting.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <numeric>

namespace tkv::tok {
namespace {

uint32_t attr_from_type(int32_t type) {
  switch (type) {
    case 1:
      return kAttrNormal;
    case 2:
      return kAttrUnknown;
    case 3:
      return kAttrControl;
    case 4:
      return kAttrUserDefined;
    case 5:
      return kAttrUnused;
    case 6:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

bool in(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Texts llama.cpp marks as end of turn / FIM repo / FIM separator / end of generation.
const std::initializer_list<std::string_view> kEotTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>"};
const std::initializer_list<std::string_view> kFimPre = {"<|fim_prefix|>",
                                                         "<fim-prefix>",
                                                         "<fim_prefix>",
                                                         "<\xef\xbd\x9c"
                                                         "fim\xe2\x96\x81"
                                                         "begin\xef\xbd\x9c>",
                                                         "<PRE>",
                                                         "\xe2\x96\x81<PRE>",
                                                         "<|code_prefix|>",
                                                         "<|prefix|>"};
const std::initializer_list<std::string_view> kFimSuf = {"<|fim_suffix|>",
                                                         "<fim-suffix>",
                                                         "<fim_suffix>",
                                                         "<\xef\xbd\x9c"
                                                         "fim\xe2\x96\x81hole\xef\xbd\x9c>",
                                                         "<SUF>",
                                                         "\xe2\x96\x81<SUF>",
                                                         "<|code_suffix|>",
                                                         "<|suffix|>"};
const std::initializer_list<std::string_view> kFimMid = {"<|fim_middle|>",
                                                         "<fim-middle>",
                                                         "<fim_middle>",
                                                         "<\xef\xbd\x9c"
                                                         "fim\xe2\x96\x81"
                                                         "end\xef\xbd\x9c>",
                                                         "<MID>",
                                                         "\xe2\x96\x81<MID>",
                                                         "<|code_middle|>",
                                                         "<|middle|>"};
const std::initializer_list<std::string_view> kFimPad = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                         "<PAD>", "[PAD]"};
const std::initializer_list<std::string_view> kFimRep = {"<|fim_repo|>", "<|repo_name|>",
                                                         "<fim-repo>", "<REPO>", "<reponame>"};
const std::initializer_list<std::string_view> kFimSep = {"<|file_sep|>"};
const std::initializer_list<std::string_view> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[e~["};

}  // namespace

Status Vocab::init(VocabData& d) {
  const size_t n = d.tokens.size();
  if (n == 0) return invalid_argument("[tokenizer] empty vocabulary");
  if (!d.scores.empty() && d.scores.size() < n)
    return invalid_argument("[tokenizer] {} scores for {} tokens", d.scores.size(), n);
  if (!d.token_types.empty() && d.token_types.size() < n)
    return invalid_argument("[tokenizer] {} token types for {} tokens", d.token_types.size(), n);
  text_ = std::move(d.tokens);
  score_.assign(n, 0.0f);
  attr_.assign(n, kAttrNormal);
  to_id_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    if (text_[i].empty()) text_[i] = "[EMPTY_" + std::to_string(i) + "]";
    to_id_[text_[i]] = static_cast<int32_t>(i);
    if (!d.scores.empty()) score_[i] = d.scores[i];
    if (!d.token_types.empty()) attr_[i] = attr_from_type(d.token_types[i]);
  }
  auto valid = [&](int32_t id) { return id >= 0 && id < n_tokens() ? id : -1; };
  bos_id = valid(d.bos_id), eos_id = valid(d.eos_id), eot_id = valid(d.eot_id);
  eom_id = valid(d.eom_id), unk_id = valid(d.unk_id);

  // llama.cpp auto-detects these by text and forces the control attribute on them.
  int32_t fim[6] = {-1, -1, -1, -1, -1, -1};
  const std::initializer_list<std::string_view>* fim_lists[6] = {&kFimPre, &kFimSuf, &kFimMid,
                                                                 &kFimPad, &kFimRep, &kFimSep};
  for (const auto& [t, id] : to_id_) {
    bool hit = false;
    if (eot_id < 0 && in(t, kEotTexts)) eot_id = id, hit = true;
    if (eom_id < 0 && t == "<|eom_id|>") eom_id = id, hit = true;
    for (int k = 0; k < 6; ++k)
      if (fim[k] < 0 && in(t, *fim_lists[k])) fim[k] = id, hit = true;
    if (hit) attr_[id] |= kAttrControl;
  }
  std::vector<int32_t> eog = {fim[3], fim[4], fim[5], eos_id, eot_id, eom_id};
  for (const auto& [t, id] : to_id_) {
    if (in(t, kEogTexts)) {
      eog.push_back(id);
      attr_[id] |= kAttrControl;
    }
  }
  for (int32_t id : eog)
    if (id >= 0) eog_ids_.push_back(id);
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
  build_special_trie();
  return Status::ok_status();
}

int32_t Vocab::find(std::string_view t) const {
  auto it = to_id_.find(t);
  return it == to_id_.end() ? -1 : it->second;
}

bool Vocab::is_eog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

int32_t Vocab::child(int32_t node, uint8_t b) const {
  const auto& nx = trie_[node].next;
  auto it = std::lower_bound(nx.begin(), nx.end(), std::make_pair(b, int32_t{-1}));
  return (it != nx.end() && it->first == b) ? it->second : -1;
}

void Vocab::build_special_trie() {
  // Special = control | user-defined | unknown; ranked by text length, longest
  // first (ties by id: llama.cpp's unstable sort leaves them unspecified).
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_tokens(); ++id)
    if (attr_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return text_[a].size() > text_[b].size(); });
  special_rank_.assign(n_tokens(), -1);
  for (size_t r = 0; r < ids.size(); ++r) special_rank_[ids[r]] = static_cast<int32_t>(r);
  trie_.assign(1, TrieNode{});
  for (int32_t id : ids) {
    int32_t node = 0;
    for (char ch : text_[id]) {
      const uint8_t b = static_cast<uint8_t>(ch);
      int32_t nx = child(node, b);
      if (nx < 0) {
        nx = static_cast<int32_t>(trie_.size());
        auto& v = trie_[node].next;
        v.insert(std::lower_bound(v.begin(), v.end(), std::make_pair(b, int32_t{-1})), {b, nx});
        trie_.emplace_back();
      }
      node = nx;
    }
    if (trie_[node].token < 0) trie_[node].token = id;  // duplicate texts: first id wins
  }
}

}  // namespace tkv::tok

namespace tkv::tok {

std::vector<Fragment> Vocab::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  if (text.empty()) return out;
  // Every eligible occurrence as (rank, pos, token).
  struct Cand {
    int32_t rank;
    uint32_t pos;
    int32_t token;
  };
  std::vector<Cand> cands;
  for (size_t p = 0; p < text.size(); ++p) {
    int32_t node = child(0, static_cast<uint8_t>(text[p]));
    for (size_t q = p + 1; node >= 0; ++q) {
      const int32_t tok = trie_[node].token;
      if (tok >= 0 && (parse_special || !(attr_[tok] & (kAttrControl | kAttrUnknown))))
        cands.push_back({special_rank_[tok], static_cast<uint32_t>(p), tok});
      if (q >= text.size()) break;
      node = child(node, static_cast<uint8_t>(text[q]));
    }
  }
  if (cands.empty()) {
    out.push_back({-1, text});
    return out;
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });
  // state per byte: 0 raw text, 1 inside an accepted token, 2 dropped by lstrip/rstrip.
  std::vector<uint8_t> state(text.size(), 0);
  std::vector<std::pair<uint32_t, int32_t>> accepted;  // (pos, token)
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  for (const Cand& c : cands) {
    const size_t len = text_[c.token].size();
    if (!std::all_of(state.begin() + c.pos, state.begin() + c.pos + len,
                     [](uint8_t s) { return s == 0; }))
      continue;
    std::fill(state.begin() + c.pos, state.begin() + c.pos + len, uint8_t{1});
    accepted.push_back({c.pos, c.token});
    if (attr_[c.token] & kAttrLstrip)
      for (size_t i = c.pos; i > 0 && state[i - 1] == 0 && is_space(text[i - 1]); --i)
        state[i - 1] = 2;
    if (attr_[c.token] & kAttrRstrip)
      for (size_t i = c.pos + len; i < text.size() && state[i] == 0 && is_space(text[i]); ++i)
        state[i] = 2;
  }
  std::sort(accepted.begin(), accepted.end());
  size_t p = 0, a = 0;
  while (p < text.size()) {
    if (a < accepted.size() && accepted[a].first == p) {
      out.push_back({accepted[a].second, {}});
      p += text_[accepted[a].second].size();
      ++a;
    } else if (state[p] == 0) {
      size_t e = p;
      while (e < text.size() && state[e] == 0) ++e;
      out.push_back({-1, text.substr(p, e - p)});
      p = e;
    } else {
      ++p;  // stripped whitespace
    }
  }
  return out;
}

}  // namespace tkv::tok
