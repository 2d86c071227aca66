// Distribution statistics for evaluation (see kl.h). Everything is computed in
// double from fp32 logits; the base log-probabilities are rounded to fp32 the same
// way on both sides so that a scheme identical to the base scores KL = 0 exactly.
#include "eval/kl.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tkv::eval {

void RunningStat::add(double x) {
  ++n_;
  const double d = x - mean_;
  mean_ += d / static_cast<double>(n_);
  m2_ += d * (x - mean_);
}

double RunningStat::stddev() const {
  return n_ > 1 ? std::sqrt(m2_ / static_cast<double>(n_ - 1)) : 0.0;
}

double RunningStat::ci95() const {
  return n_ > 1 ? 1.96 * stddev() / std::sqrt(static_cast<double>(n_)) : 0.0;
}

double log_sum_exp(const float* logits, int n_vocab) {
  float mx = logits[0];
  for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double s = 0;
  for (int i = 0; i < n_vocab; ++i) s += std::exp(static_cast<double>(logits[i]) - mx);
  return mx + std::log(s);
}

int32_t argmax(const float* logits, int n_vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
}

namespace {
// log p of one token, rounded to fp32 exactly as it is stored in a base file.
inline float logp_f32(const float* logits, int32_t id, double lse) {
  return static_cast<float>(static_cast<double>(logits[id]) - lse);
}

// Mass of the tokens whose mark is 0, summed in index order (same order both sides).
double unmarked_mass(const float* logits, int n_vocab, double lse,
                     const std::vector<uint8_t>& mark) {
  double s = 0;
  for (int i = 0; i < n_vocab; ++i)
    if (!mark[static_cast<size_t>(i)]) s += std::exp(static_cast<double>(logits[i]) - lse);
  return s;
}
}  // namespace

TruncatedDist truncate_dist(const float* logits, int n_vocab, int32_t target,
                            const TruncationParams& tp) {
  TruncatedDist d;
  const double lse = log_sum_exp(logits, n_vocab);
  d.target = target;
  d.argmax = argmax(logits, n_vocab);
  d.target_logp = logp_f32(logits, target, lse);
  const int k_cap = tp.k_max > 0 ? std::min(tp.k_max, n_vocab) : n_vocab;
  std::vector<int32_t> idx(static_cast<size_t>(n_vocab));
  std::iota(idx.begin(), idx.end(), 0);
  auto by_logit = [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::nth_element(idx.begin(), idx.begin() + (k_cap - 1), idx.end(), by_logit);
  std::sort(idx.begin(), idx.begin() + k_cap, by_logit);
  double cum = 0;
  std::vector<uint8_t> mark(static_cast<size_t>(n_vocab), 0);
  for (int k = 0; k < k_cap; ++k) {
    if (k >= tp.k_min && cum >= tp.mass) break;
    const int32_t id = idx[static_cast<size_t>(k)];
    d.ids.push_back(id);
    d.logp.push_back(logp_f32(logits, id, lse));
    mark[static_cast<size_t>(id)] = 1;
    cum += std::exp(static_cast<double>(logits[id]) - lse);
  }
  d.tail_mass = unmarked_mass(logits, n_vocab, lse, mark);
  return d;
}

PositionScore score_position(const TruncatedDist& base, const float* logits, int n_vocab,
                             std::vector<uint8_t>* scratch) {
  PositionScore s;
  const double lse = log_sum_exp(logits, n_vocab);
  scratch->assign(static_cast<size_t>(n_vocab), 0);
  double kl = 0, kept = 0;
  for (size_t k = 0; k < base.ids.size(); ++k) {
    const int32_t id = base.ids[k];
    (*scratch)[static_cast<size_t>(id)] = 1;
    const double lp = base.logp[k];
    const double lq = logp_f32(logits, id, lse);
    const double p = std::exp(lp);
    kept += p;
    kl += p * (lp - lq);
  }
  if (base.tail_mass > 0) {
    const double q_tail = std::max(unmarked_mass(logits, n_vocab, lse, *scratch), 1e-300);
    kl += base.tail_mass * (std::log(base.tail_mass) - std::log(q_tail));
  }
  s.kl = kl;
  s.nll = -(static_cast<double>(logits[base.target]) - lse);
  s.same_top1 = argmax(logits, n_vocab) == base.argmax;
  s.kept_mass = kept;
  return s;
}

double kl_exact(const float* p_logits, const float* q_logits, int n_vocab) {
  const double lp = log_sum_exp(p_logits, n_vocab), lq = log_sum_exp(q_logits, n_vocab);
  double kl = 0;
  for (int i = 0; i < n_vocab; ++i) {
    const double a = p_logits[i] - lp, b = q_logits[i] - lq;
    kl += std::exp(a) * (a - b);
  }
  return kl;
}

void ScoreAccumulator::add(const PositionScore& s) {
  kl.add(s.kl);
  nll.add(s.nll);
  top1.add(s.same_top1 ? 1.0 : 0.0);
  kept_mass.add(s.kept_mass);
}

double ScoreAccumulator::ppl() const {
  return std::exp(nll.mean());
}

double ScoreAccumulator::ppl_ci95() const {
  return ppl() * nll.ci95();
}

}  // namespace tkv::eval
