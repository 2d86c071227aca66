// Drafters (see drafter.h).
#include "runtime/spec/drafter.h"

#include <algorithm>

namespace tkv::runtime::spec {

Status validate(const SpecOptions& o) {
  if (o.kind == Kind::kNone) return Status();
  if (o.max_draft < 1 || o.max_draft > kMaxDraft)
    return invalid_argument("[spec] max draft {} out of range (valid: 1 to {})", o.max_draft,
                            kMaxDraft);
  if (o.ngram_max < 1 || o.ngram_max > kMaxNgram)
    return invalid_argument("[spec] ngram max {} out of range (valid: 1 to {})", o.ngram_max,
                            kMaxNgram);
  if (o.ngram_min < 1 || o.ngram_min > o.ngram_max)
    return invalid_argument("[spec] ngram min {} out of range (valid: 1 to ngram max = {})",
                            o.ngram_min, o.ngram_max);
  return Status();
}

std::vector<int32_t> NgramDrafter::propose(const std::vector<int32_t>& tokens, int max_k) {
  const auto len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const int32_t* suffix = tokens.data() + len - n;
    // Most recent first: a match at i must leave a token after it (i + n < len).
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      const int64_t from = i + n, to = std::min(len, from + max_k);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

std::unique_ptr<Drafter> make_drafter(const SpecOptions& o) {
  // kDraft: the engine attaches a DraftModelDrafter at submit (it owns the model).
  if (o.kind == Kind::kNgram) return std::make_unique<NgramDrafter>(o.ngram_max, o.ngram_min);
  return nullptr;
}

}  // namespace tkv::runtime::spec
