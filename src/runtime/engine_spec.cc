// Speculative decoding in the engine loop: after each streamed token a
// sequence's drafter proposes the next tokens; the scheduler lets them ride on
// the sequence's decode as one multi-token chunk with every row's logits (in
// the same ragged batch as everybody else). verify() keeps drafts by the
// sampler's acceptance rule, takes the bonus token from the first rejecting
// row, trims the rejected drafts from the KV and streams the run token by
// token, so ends (eos, stops, max tokens) inside it cut it there.
#include <algorithm>

#include "runtime/engine_loop.h"

namespace tkv::runtime {

void EngineLoop::propose(Sequence& s) {
  if (!s.drafter) return;
  int64_t k = s.spec_k;
  // Room for the bonus token: drafts past max_tokens would be thrown away.
  if (s.req.max_tokens >= 0) k = std::min(k, s.req.max_tokens - s.n_generated() - 1);
  s.draft.clear();
  if (k > 0) s.draft = s.drafter->propose(s.tokens, static_cast<int>(k));
  sched_->set_draft(s.id, static_cast<int64_t>(s.draft.size()));
}

void EngineLoop::verify(Sequence& s, const PlannedChunk& c, const float* logits) {
  const int nv = static_cast<int>(model_->config().n_vocab);
  const auto n_prompt = static_cast<size_t>(s.n_prompt);
  // Row j decides the token after the last one + j drafts; the penalties must
  // see the drafts kept so far, so they join s.tokens while deciding.
  const size_t base = s.tokens.size();
  int64_t kept = 0;
  int32_t bonus = -1;
  for (; kept < c.n_draft; ++kept) {
    bool ok = false;
    const int32_t d = s.draft[static_cast<size_t>(kept)];
    bonus = s.sampler.verify(logits + kept * nv, nv, s.tokens, n_prompt, d, &ok);
    if (!ok) break;
    s.tokens.push_back(d);
  }
  if (kept == c.n_draft) bonus = s.sampler.sample(logits + kept * nv, nv, s.tokens, n_prompt);
  s.tokens.resize(base);

  // The KV holds the last token and every draft: keep the last token and the kept drafts.
  const int64_t rejected = c.n_draft - kept;
  if (rejected > 0) {
    cache_->trim_seq(s.kv, c.first + 1 + kept);
    sched_->rollback(s.id, rejected);
  }
  s.timings.drafted_tokens += c.n_draft;
  s.timings.accepted_tokens += kept;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    stats_.spec_drafted += c.n_draft;
    stats_.spec_accepted += kept;
  }
  // Longer drafts while they all pass, shorter after a first-token miss.
  if (kept == c.n_draft)
    s.spec_k = std::min(s.spec_k + 1, s.req.spec.max_draft);
  else if (kept == 0)
    s.spec_k = std::max(1, s.spec_k / 2);

  for (int64_t j = 0; j <= kept; ++j) {
    const int32_t tok = j < kept ? s.draft[static_cast<size_t>(j)] : bonus;
    if (!on_token(s, tok, logits + j * nv)) return;  // ended inside the run: s is gone
  }
  propose(s);
}

}  // namespace tkv::runtime
