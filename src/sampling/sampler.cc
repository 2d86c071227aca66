// Sampler implementation: filters applied in llama.cpp's default order
// (penalties → top-k → top-p → min-p → temperature → draw); token_logprobs.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace tkv::sampling {

Status validate(const SamplerParams& p) {
  auto bad = [](const char* name, double v, const char* range) {
    return invalid_argument("[sampling] {} {} out of range (valid: {})", name, v, range);
  };
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return bad("temperature", p.temperature, "finite, >= 0; 0 = greedy");
  if (p.top_k < 0) return bad("top-k", p.top_k, ">= 0; 0 = off");
  if (!(p.top_p > 0 && p.top_p <= 1)) return bad("top-p", p.top_p, "0 < top-p <= 1; 1 = off");
  if (!(p.min_p >= 0 && p.min_p <= 1)) return bad("min-p", p.min_p, "0 <= min-p <= 1; 0 = off");
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0)
    return bad("repeat-penalty", p.repeat_penalty, "finite, > 0; 1 = off");
  if (p.repeat_last_n < -1)
    return bad("repeat-last-n", p.repeat_last_n, ">= -1; -1 = whole history, 0 = off");
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2))
    return bad("frequency-penalty", p.frequency_penalty, "-2 to 2; 0 = off");
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2))
    return bad("presence-penalty", p.presence_penalty, "-2 to 2; 0 = off");
  return Status();
}

int32_t argmax(const float* logits, int n_vocab) {
  int32_t best = 0;
  for (int i = 1; i < n_vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

void Sampler::distribution(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                           size_t n_prompt) {
  work_.assign(logits, logits + n_vocab);
  if (p_.repeat_penalty != 1.0f && p_.repeat_last_n != 0) {
    const size_t n = p_.repeat_last_n < 0
                         ? history.size()
                         : std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
    std::unordered_set<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= n_vocab) continue;
      float& l = work_[static_cast<size_t>(t)];
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    }
  }
  if ((p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f) && n_prompt < history.size()) {
    counts_.clear();
    for (size_t i = n_prompt; i < history.size(); ++i) ++counts_[history[i]];
    for (const auto& [t, c] : counts_) {
      if (t < 0 || t >= n_vocab) continue;
      work_[static_cast<size_t>(t)] -=
          p_.frequency_penalty * static_cast<float>(c) + p_.presence_penalty;
    }
  }
  ids_.clear();
  w_.clear();
  if (p_.temperature <= 0.0f) {
    ids_.push_back(argmax(work_.data(), n_vocab));
    w_.push_back(wsum_ = 1.0);
    return;
  }

  cand_.resize(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i)
    cand_[static_cast<size_t>(i)] = {work_[static_cast<size_t>(i)], i};
  size_t k = cand_.size();
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < k) {
    k = static_cast<size_t>(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(k), cand_.end(),
                      by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(k);
  // Probabilities at temperature 1 for the top-p / min-p filters (llama.cpp order).
  std::vector<double> prob(k);
  const double mx = cand_[0].first;
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += (prob[i] = std::exp(cand_[i].first - mx));
  for (auto& p : prob) p /= sum;
  size_t keep = k;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      cum += prob[i];
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    size_t m = 1;
    while (m < keep && prob[m] >= p_.min_p * prob[0]) ++m;
    keep = m;
  }
  // Temperature.
  wsum_ = 0;
  for (size_t i = 0; i < keep; ++i) {
    ids_.push_back(cand_[i].second);
    w_.push_back(std::exp((cand_[i].first - mx) / p_.temperature));
    wsum_ += w_.back();
  }
}

int32_t Sampler::sample(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                        size_t n_prompt) {
  distribution(logits, n_vocab, history, n_prompt);
  if (p_.temperature <= 0.0f) return ids_[0];  // greedy draws nothing from the RNG
  std::uniform_real_distribution<double> u(0.0, wsum_);
  double r = u(rng_);
  for (size_t i = 0; i < ids_.size(); ++i) {
    r -= w_[i];
    if (r <= 0) return ids_[i];
  }
  return ids_.back();
}

int32_t Sampler::verify(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                        size_t n_prompt, int32_t draft, bool* accepted) {
  distribution(logits, n_vocab, history, n_prompt);
  *accepted = false;
  if (p_.temperature <= 0.0f) {
    *accepted = ids_[0] == draft;
    return ids_[0];
  }
  double w_draft = 0;
  for (size_t i = 0; i < ids_.size(); ++i)
    if (ids_[i] == draft) w_draft = w_[i];
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  if (w_draft > 0 && u01(rng_) * wsum_ < w_draft) {
    *accepted = true;
    return draft;
  }
  // Rejected: the residual max(p - q, 0) is p with draft's mass removed.
  const double rest = wsum_ - w_draft;
  if (!(rest > 0)) {  // rounding only: draft held all the mass, u01 < 1 accepts it
    *accepted = true;
    return draft;
  }
  std::uniform_real_distribution<double> u(0.0, rest);
  double r = u(rng_);
  int32_t last = -1;
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i] == draft) continue;
    last = ids_[i];
    r -= w_[i];
    if (r <= 0) return ids_[i];
  }
  return last;
}

float token_logprobs(const float* logits, int n_vocab, int32_t token, int top_n,
                     std::vector<TokenLogprob>* top) {
  float mx = logits[0];
  for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_z = mx + std::log(sum);
  auto lp = [&](int32_t t) { return static_cast<float>(logits[t] - log_z); };
  if (top) {
    top->clear();
    const int k = std::min(top_n, n_vocab);
    if (k > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
      for (int i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      for (int i = 0; i < k; ++i)
        top->push_back({ids[static_cast<size_t>(i)], lp(ids[static_cast<size_t>(i)])});
    }
  }
  return token >= 0 && token < n_vocab ? lp(token) : 0.0f;
}

}  // namespace tkv::sampling
