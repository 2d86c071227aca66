// n choices of one request through one event queue (see generation.h).
#include "server/generation.h"

namespace tkv::server {

using Clock = std::chrono::steady_clock;

std::shared_ptr<Generation> Generation::admit(ServerState& s, MaybeError& err, int n) {
  if (s.draining) {
    err = ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"};
    return nullptr;
  }
  const int before = s.in_flight.fetch_add(n);
  if (before + n > s.capacity()) {
    s.in_flight -= n;
    err = ApiError{429,
                   "the server is busy: " + std::to_string(before) +
                       " choices in flight, the queue holds " + std::to_string(s.capacity()) +
                       " (--parallel + --max-queue); retry later",
                   "rate_limit_error", "", "queue_full"};
    return nullptr;
  }
  return std::shared_ptr<Generation>(new Generation(s, n));
}

Generation::Generation(ServerState& s, int n)
    : s_(s), n_(n), q_(std::make_shared<Queue>()), handles_(n), done_(n, false) {
  q_->last_token.resize(n);
  std::lock_guard<std::mutex> lk(s_.live_mu);
  s_.live.insert(this);
}

Generation::~Generation() {
  cancel();
  s_.in_flight -= n_;
  std::lock_guard<std::mutex> lk(s_.live_mu);
  s_.live.erase(this);
}

MaybeError Generation::submit(int index) {
  turbokv::Request r = base_;
  r.spec = s_.opts.spec;  // speculative and plain requests share the engine's batch
  r.sampling.seed = base_.sampling.seed + static_cast<uint64_t>(index);  // choices differ
  // Choice 0 on a slot: the tokens its KV holds go to the slot when it ends
  // (none after an error: that KV is not trusted).
  std::shared_ptr<std::vector<int32_t>> slot_tokens;
  if (index == 0 && slot_ >= 0)
    slot_tokens = std::make_shared<std::vector<int32_t>>(r.prompt_tokens);
  // On the engine thread, keep it short. Metrics are counted here, not by the
  // reader: a request cancelled after its client left has no reader any more.
  r.on_token = [q = q_, index, m = s_.metrics, np = prompt_tokens(), slots = s_.slots, slot = slot_,
                slot_tokens](const turbokv::Event& e) {
    // Counted before the reader can see the event, so a response is never ahead of /metrics.
    if (e.is_final()) m->on_finish(turbokv::finish_reason_name(e.finish), e.timings, np);
    if (slot_tokens) {
      if (e.token >= 0) slot_tokens->push_back(e.token);
      if (e.is_final())
        slots->release(slot, e.finish == turbokv::FinishReason::kError ? std::vector<int32_t>()
                                                                       : std::move(*slot_tokens));
    }
    {
      std::lock_guard<std::mutex> lk(q->mu);
      if (e.token >= 0) {
        const auto now = Clock::now();
        auto& last = q->last_token[index];
        m->on_token(
            last == Clock::time_point{} ? -1.0 : std::chrono::duration<double>(now - last).count());
        last = now;
      }
      q->events.push_back(ChoiceEvent{index, e});
    }
    q->cv.notify_one();
  };
  auto h = s_.eng().submit(r);
  if (!h.ok()) {
    const bool bad = h.status().code() == StatusCode::kInvalidArgument;
    return ApiError{bad ? 400 : 500, h.status().message(),
                    bad ? "invalid_request_error" : "server_error", "", ""};
  }
  handles_[index] = h.value();
  return std::nullopt;
}

MaybeError Generation::start(const turbokv::Request& r, int slot) {
  base_ = r;
  slot_ = slot;
  std::lock_guard<std::mutex> lk(handles_mu_);
  MaybeError e = submit(0);
  if (e && !base_.load_session.empty()) {
    // The slot's restored snapshot is gone or changed since: prefill instead.
    base_.load_session.clear();
    e = submit(0);
  }
  if (e) {
    if (slot_ >= 0) s_.slots->unbusy(slot_);
    return e;
  }
  s_.metrics->on_submit(prompt_tokens());
  if (n_ == 1) rest_submitted_ = true;
  return std::nullopt;
}

bool Generation::next(ChoiceEvent& out, std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lk(q_->mu);
    if (!q_->cv.wait_for(lk, timeout, [&] { return !q_->events.empty(); })) return false;
    out = std::move(q_->events.front());
    q_->events.pop_front();
  }
  if (out.index == 0) {
    // Choice 0's first event: its prompt pages are published now, so the other
    // choices find them in the prefix cache.
    std::lock_guard<std::mutex> lk(handles_mu_);
    if (!rest_submitted_) {
      rest_submitted_ = true;
      for (int i = 1; i < n_; ++i) {
        if (auto e = submit(i)) {
          ChoiceEvent fail{i, {}};
          fail.ev.finish = turbokv::FinishReason::kError;
          fail.ev.error = e->message;
          std::lock_guard<std::mutex> qk(q_->mu);
          q_->events.push_back(std::move(fail));
        }
      }
    }
  }
  if (out.ev.is_final() && !done_[out.index]) {
    done_[out.index] = true;
    ++n_done_;
  }
  return true;
}

void Generation::cancel() {
  std::lock_guard<std::mutex> lk(handles_mu_);
  for (auto& h : handles_) h.cancel();
  if (!rest_submitted_) {  // never submitted: they end here
    rest_submitted_ = true;
    std::lock_guard<std::mutex> qk(q_->mu);
    for (int i = 1; i < n_; ++i) {
      ChoiceEvent c{i, {}};
      c.ev.finish = turbokv::FinishReason::kCancelled;
      q_->events.push_back(std::move(c));
    }
    q_->cv.notify_one();
  }
}

}  // namespace tkv::server
