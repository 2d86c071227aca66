// One step of the engine loop: plan (scheduler), free what was dropped or
// preempted, build the ragged batch, run Model::forward, then sample and
// stream per sequence (see engine_loop.h).
#include <algorithm>

#include "base/timer.h"
#include "runtime/engine_loop.h"

namespace tkv::runtime {

// Admission: a KV sequence for id. Returns the tokens already in the KV: the
// longest cached prefix of s.tokens (whole pages, never the last token, whose
// logits the first step needs). Scoring requests compute every position.
int64_t EngineLoop::admit(SeqId id) {
  Sequence& s = *seqs_.at(id);
  auto kv = cache_->create_seq();
  if (!kv.ok()) return -1;
  s.kv = kv.value();
  if (s.admit_ms < 0) s.admit_ms = now_ms();
  if (s.req.loaded && !s.scoring()) {  // a session snapshot first (engine_session.cc)
    const int64_t loaded = load_session(s);
    if (loaded > 0) {
      s.timings.cached_tokens += loaded;
      return loaded;
    }
  }
  if (prompt_dir_ && !s.scoring()) {  // a longer entry on disk (engine_prompt_cache.cc)
    const int64_t loaded = load_prompt_cache(s);
    if (loaded > 0) {
      s.timings.cached_tokens += loaded;
      return loaded;
    }
  }
  if (!opts_.prefix_cache || s.scoring()) return 0;
  const int64_t reused =
      cache_->attach_prefix(s.kv, s.tokens.data(), static_cast<int64_t>(s.tokens.size()));
  if (reused > 0) {
    s.timings.cached_tokens += reused;
    std::lock_guard<std::mutex> lk(stats_mu_);
    ++stats_.prefix_hits;
    stats_.prefix_tokens_reused += reused;
  }
  return reused;
}

// Indexes the full pages of what s's KV holds, so later requests (and this one,
// recomputed after a preemption) can reuse them.
void EngineLoop::publish(const Sequence& s) {
  // The KV can hold more than tokens: drafts kept by verify() but not streamed
  // because the sequence stopped inside the run.
  if (opts_.prefix_cache && !s.scoring() && s.kv >= 0)
    cache_->publish_prefix(s.kv, s.tokens.data(),
                           std::min(cache_->seq_len(s.kv), static_cast<int64_t>(s.tokens.size())));
}

bool EngineLoop::step() {
  const StepPlan p = sched_->plan([this](SeqId id) { return admit(id); });
  for (SeqId id : p.dropped) finish(id, Finish::kCancelled);
  for (SeqId id : p.preempted) {
    Sequence& s = *seqs_.at(id);
    publish(s);
    cache_->free_seq(s.kv);
    s.kv = -1;
    ++s.timings.preemptions;
  }
  if (p.chunks.empty()) return !p.dropped.empty() || !p.preempted.empty();
  run_chunks(p);
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.steps;
  stats_.attention_ms = ws_.attention_ms;  // with steps: a step's count includes its attention
  return true;
}

void EngineLoop::run_chunks(const StepPlan& p) {
  batch_.clear();
  for (const PlannedChunk& c : p.chunks) {
    Sequence& s = *seqs_.at(c.id);
    // A scoring chunk never straddles logits_from (its ChunkRule splits there).
    const model::LogitsWanted w = s.scoring()
                                      ? (c.first >= s.req.logits_from ? model::LogitsWanted::kAll
                                                                      : model::LogitsWanted::kNone)
                                  : c.completes ? model::LogitsWanted::kLast
                                                : model::LogitsWanted::kNone;
    if (c.n_draft > 0) {  // a speculative decode: the last token + drafts, every row's logits
      s.verify_tokens.assign(1, s.tokens[static_cast<size_t>(c.first)]);
      s.verify_tokens.insert(s.verify_tokens.end(), s.draft.begin(), s.draft.begin() + c.n_draft);
      batch_.add(s.kv, s.verify_tokens.data(), c.n, model::LogitsWanted::kAll);
      continue;
    }
    batch_.add(s.kv, s.tokens.data() + c.first, c.n, w);
    // A decode feeds the one token sampled last step; anything else is prefill.
    const bool decode =
        c.n == 1 && s.n_generated() > 0 && c.first + 1 == static_cast<int64_t>(s.tokens.size());
    if (!decode) s.timings.prefill_tokens += c.n;
  }
  const Status st = model_->forward(batch_, ws_, *cache_, *pool_);
  if (!st.ok()) {
    // The cache state of these sequences is unknown now: end them, keep the engine.
    for (const PlannedChunk& c : p.chunks) finish(c.id, Finish::kError, st.message());
    return;
  }
  sched_->done(p);
  const int64_t nv = model_->config().n_vocab;
  for (size_t i = 0; i < p.chunks.size(); ++i) {
    const PlannedChunk& c = p.chunks[i];
    Sequence& s = *seqs_.at(c.id);
    if (s.req.on_progress && c.n > 1 && c.n_draft == 0)  // prefill chunks only
      s.req.on_progress(c.first + c.n, static_cast<int64_t>(s.tokens.size()));
    if (s.scoring()) {
      if (c.first >= s.req.logits_from) s.req.on_logits(c.first, c.n, ws_.slice_logits(i, nv));
      if (c.completes) finish(c.id, Finish::kLength);
    } else if (c.n_draft > 0) {
      verify(s, c, ws_.slice_logits(i, nv));
    } else if (c.completes) {
      if (c.n > 1 || s.n_generated() == 0) publish(s);  // the prompt is in: share it now
      const float* logits = ws_.slice_logits(i, nv);
      const auto n_prompt = static_cast<size_t>(s.n_prompt);
      if (on_token(s, s.sampler.sample(logits, static_cast<int>(nv), s.tokens, n_prompt), logits))
        propose(s);
    }
  }
}

// A token was sampled for s: stream it, or end the sequence.
bool EngineLoop::on_token(Sequence& s, int32_t tok, const float* logits) {
  const double now = now_ms();
  if (s.first_token_ms < 0) {
    s.first_token_ms = now;
    s.timings.ttft_ms = now - s.submit_ms;
    s.timings.prefill_ms = now - s.admit_ms;
  }
  s.tokens.push_back(tok);
  if (!s.req.ignore_eos && tok_->is_eog(tok)) {
    finish(s.id, Finish::kEos);
    return false;
  }
  if (std::find(s.req.stop_tokens.begin(), s.req.stop_tokens.end(), tok) !=
      s.req.stop_tokens.end()) {
    finish(s.id, Finish::kStopToken);
    return false;
  }
  const bool go_on = s.stop.add(tok_->token_to_piece(tok));
  Event e;
  e.token = tok;
  e.text = std::move(s.text);
  if (s.req.logprobs >= 0)
    e.logprob = sampling::token_logprobs(logits, static_cast<int>(model_->config().n_vocab), tok,
                                         s.req.logprobs, &e.top_logprobs);
  s.text.clear();
  emit(s, std::move(e));
  Finish end = Finish::kNone;
  if (!go_on) {
    end = Finish::kStopString;
  } else if (s.req.max_tokens >= 0 && s.n_generated() >= s.req.max_tokens) {
    end = Finish::kLength;
  } else if (static_cast<int64_t>(s.tokens.size()) > opts_.context) {
    // The KV holds every token but the last: one more would pass the context.
    end = Finish::kContextFull;
  }
  if (end != Finish::kNone) {
    finish(s.id, end);
    return false;
  }
  sched_->append(s.id);
  return true;
}

void EngineLoop::emit(Sequence& s, Event e) {
  if (s.req.on_event) s.req.on_event(e);
  s.state->push(std::move(e));
}

// Ends id: the held-back text and timings go out in the final event, its KV
// sequence is freed (a finished prompt is where publish_prefix plugs in, before
// free_seq) and the scheduler forgets it.
void EngineLoop::finish(SeqId id, Finish why, const std::string& error) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence& s = *it->second;
  const double now = now_ms();
  if (!s.scoring()) s.stop.flush();
  Event e;
  e.finish = why;
  e.error = error;
  e.text = std::move(s.text);
  s.timings.queue_ms = (s.admit_ms >= 0 ? s.admit_ms : now) - s.submit_ms;
  s.timings.generated_tokens = s.n_generated();
  s.timings.decode_tokens = std::max<int64_t>(0, s.n_generated() - 1);
  s.timings.decode_ms = s.first_token_ms >= 0 ? now - s.first_token_ms : 0;
  e.timings = s.timings;
  if (!s.req.save_session.empty() && !s.scoring()) {
    if (why != Finish::kError)
      save_session(s, &e);
    else
      e.session_error = "[kv-store] " + s.req.save_session + ": not written after an error";
  }
  if (s.kv >= 0) {
    if (why != Finish::kError && prompt_dir_ && !s.scoring()) store_prompt_cache(s);
    if (why != Finish::kError) publish(s);  // after an error the KV is not trusted
    cache_->free_seq(s.kv);
  }
  sched_->finish(id);
  emit(s, std::move(e));
  seqs_.erase(it);
}

}  // namespace tkv::runtime
