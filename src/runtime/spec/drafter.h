// Speculative decoding's drafters: cheap guesses at a sequence's next tokens,
// verified by the target model in one multi-token forward step (engine_spec.cc).
// A drafter is per sequence and deterministic (its proposal distribution is
// one-hot), which the acceptance rule (sampling::Sampler::verify) relies on.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"

namespace tkv::runtime::spec {

enum class Kind { kNone, kNgram, kDraft };  // kDraft: the engine's draft model

struct SpecOptions {
  Kind kind = Kind::kNone;
  int max_draft = 8;  // most draft tokens verified in one step (the adaptive k's ceiling)
  int ngram_max = 3;  // prompt lookup: longest suffix matched first ...
  int ngram_min = 1;  // ... down to this length
};
inline constexpr int kMaxDraft = 32;
inline constexpr int kMaxNgram = 8;

// Every field against its range; the message names the field, value and range.
Status validate(const SpecOptions& o);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to max_k (>= 1) tokens guessed to follow tokens (prompt + output so far);
  // empty when there is no guess.
  virtual std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int max_k) = 0;
};

// Prompt lookup (Saxena 2023; llama.cpp's lookup decoding): the most recent
// earlier occurrence of the last n tokens, n from ngram_max down to ngram_min,
// and the tokens that followed it.
class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int ngram_max, int ngram_min) : max_n_(ngram_max), min_n_(ngram_min) {}
  std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int max_k) override;

 private:
  int max_n_, min_n_;
};

// The drafter o asks for; nullptr for Kind::kNone.
std::unique_ptr<Drafter> make_drafter(const SpecOptions& o);

}  // namespace tkv::runtime::spec
