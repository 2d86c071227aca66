// Next-token distribution statistics for quality evaluation: log-softmax,
// truncated ("top-k + tail bin") base distributions, KL(base || scheme), NLL,
// top-1 agreement and their 95 % confidence intervals (normal approximation,
// as llama.cpp's perplexity tool reports them, but at 1.96 sigma).
#pragma once
#include <cstdint>
#include <vector>

namespace tkv::eval {

// Running mean / variance (Welford) of a per-position quantity.
class RunningStat {
 public:
  void add(double x);
  int64_t count() const { return n_; }
  double mean() const { return n_ > 0 ? mean_ : 0.0; }
  double stddev() const;  // sample standard deviation
  double ci95() const;    // 1.96 * stddev / sqrt(n): half-width of the 95 % CI of the mean
 private:
  int64_t n_ = 0;
  double mean_ = 0, m2_ = 0;
};

// log(sum(exp(logits))) in double, max-shifted.
double log_sum_exp(const float* logits, int n_vocab);  // logits: [n_vocab]
int32_t argmax(const float* logits, int n_vocab);      // first index of the maximum

// The base (bf16-KV) distribution at one position, truncated: the most probable
// tokens until their mass reaches `mass` (at least k_min, at most k_max of them),
// with every other token merged into one tail bin. KL against it is the KL of the
// two distributions coarsened to that partition: a lower bound on the full KL
// (data-processing inequality), equal to it when the tail is empty.
struct TruncatedDist {
  int32_t target = -1;       // the token that actually follows (for NLL)
  int32_t argmax = -1;       // base top-1
  float target_logp = 0;     // base log p(target)
  double tail_mass = 0;      // base probability of the tokens not kept
  std::vector<int32_t> ids;  // [k] kept token ids, descending probability
  std::vector<float> logp;   // [k] their base log-probabilities
};

struct TruncationParams {
  double mass = 0.9999;  // >= 1: keep k_max tokens
  int k_min = 32;
  int k_max = 8192;  // 0: the whole vocabulary (exact KL)
};

TruncatedDist truncate_dist(const float* logits, int n_vocab, int32_t target,
                            const TruncationParams& tp);

// Per-position comparison of a scheme's logits against the stored base.
struct PositionScore {
  double kl = 0;   // KL(base || scheme) over the base's partition, nats
  double nll = 0;  // -log p_scheme(target)
  bool same_top1 = false;
  double kept_mass = 0;  // base mass kept individually (1 - tail_mass)
};
// scratch is reused between calls (a [n_vocab] mark array).
PositionScore score_position(const TruncatedDist& base, const float* logits, int n_vocab,
                             std::vector<uint8_t>* scratch);

// Exact KL(p || q) over the full vocabulary from two logit rows (tests, small vocabularies).
double kl_exact(const float* p_logits, const float* q_logits, int n_vocab);

// Accumulates PositionScores into the reported figures.
struct ScoreAccumulator {
  RunningStat kl, nll, top1, kept_mass;
  void add(const PositionScore& s);
  double ppl() const;       // exp(mean NLL)
  double ppl_ci95() const;  // delta method: ppl * ci95(NLL)
};

}  // namespace tkv::eval
