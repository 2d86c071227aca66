// Token sampling: repetition penalty, temperature, top-k, top-p, min-p, with a
// seeded RNG (same seed + same logits = same tokens). temperature <= 0 is greedy.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "base/status.h"

namespace tkv::sampling {

struct SamplerParams {
  float temperature = 0.8f;
  int top_k = 40;       // <= 0: off
  float top_p = 0.95f;  // >= 1: off
  float min_p = 0.05f;  // <= 0: off
  float repeat_penalty =
      1.0f;  // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

// Checks every field against its valid range (temperature finite >= 0, top-k >= 0,
// top-p in (0, 1], min-p in [0, 1], repeat-penalty finite > 0, repeat-last-n >= -1);
// the message names the field, its value and the range. Shared by the CLI and the server.
Status validate(const SamplerParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}
  // history: tokens so far (prompt + generated), for the repetition penalty.
  int32_t sample(const float* logits, int n_vocab, const std::vector<int32_t>& history);
  const SamplerParams& params() const { return p_; }

 private:
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::vector<float> work_;
};

int32_t argmax(const float* logits, int n_vocab);

}  // namespace tkv::sampling
