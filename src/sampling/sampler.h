// Token sampling: repetition penalty, OpenAI frequency/presence penalties,
// temperature, top-k, top-p, min-p, with a seeded RNG (same seed + same logits =
// same tokens). temperature <= 0 is greedy. verify() is speculative decoding's
// acceptance rule over the same distribution. Also the log-probabilities a
// server reports per token (token_logprobs).
#pragma once
#include <cstdint>
#include <random>
#include <unordered_map>
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
  // OpenAI semantics, over the generated tokens only (not the prompt):
  // logit -= frequency_penalty * count + presence_penalty * (count > 0).
  float frequency_penalty = 0.0f;  // 0: off; [-2, 2]
  float presence_penalty = 0.0f;   // 0: off; [-2, 2]
  uint64_t seed = 0;
};

// Checks every field against its valid range (temperature finite >= 0, top-k >= 0,
// top-p in (0, 1], min-p in [0, 1], repeat-penalty finite > 0, repeat-last-n >= -1,
// frequency/presence penalties in [-2, 2]);
// the message names the field, its value and the range. Shared by the CLI and the server.
Status validate(const SamplerParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}
  // history: tokens so far, the prompt's first n_prompt of them then the
  // generated ones (the repetition penalty looks at both, the frequency and
  // presence penalties at the generated ones only).
  int32_t sample(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                 size_t n_prompt);
  // Speculative decoding with a deterministic drafter (its q is one-hot at
  // draft): with p the distribution sample() draws from, draft is kept with
  // probability p(draft), else a token is drawn from p without draft,
  // renormalised, so the returned token follows p exactly (Leviathan et al.
  // 2023). Greedy: kept iff draft is the argmax. *accepted says which happened.
  int32_t verify(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                 size_t n_prompt, int32_t draft, bool* accepted);
  const SamplerParams& params() const { return p_; }

 private:
  // p as candidate tokens ids_ with unnormalised weights w_ (sum wsum_): the
  // one argmax token when greedy.
  void distribution(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                    size_t n_prompt);
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::vector<float> work_;
  std::unordered_map<int32_t, int> counts_;
  std::vector<int32_t> ids_;
  std::vector<double> w_;
  double wsum_ = 0;
};

int32_t argmax(const float* logits, int n_vocab);

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// The log-softmax of the raw logits (before penalties, temperature and
// truncation) at `token`, and the top_n most likely tokens (highest first,
// ties by lower id) into *top (cleared; top_n <= 0 leaves it empty).
float token_logprobs(const float* logits, int n_vocab, int32_t token, int top_n,
                     std::vector<TokenLogprob>* top);

}  // namespace tkv::sampling
