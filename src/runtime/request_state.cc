// RequestState implementation (see request_state.h) and the finish names.
#include "runtime/request_state.h"

namespace tkv::runtime {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::kNone:
      return "running";
    case Finish::kLength:
      return "length";
    case Finish::kEos:
      return "eos";
    case Finish::kStopString:
      return "stop string";
    case Finish::kStopToken:
      return "stop token";
    case Finish::kCancelled:
      return "cancelled";
    case Finish::kContextFull:
      return "context full";
    case Finish::kError:
      return "error";
  }
  return "?";
}

void RequestState::push(Event e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_) return;
    if (e.finish != Finish::kNone) {
      finished_ = true;
      final_ = e;
    }
    if (queue_) events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool RequestState::next(Event& e) {
  std::unique_lock<std::mutex> lk(mu_);
  if (drained_) return false;
  cv_.wait(lk, [&] { return !events_.empty() || finished_; });
  if (events_.empty()) {  // a callback request: nothing queued
    drained_ = true;
    return false;
  }
  e = std::move(events_.front());
  events_.pop_front();
  if (e.finish != Finish::kNone) drained_ = true;
  return true;
}

Event RequestState::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return finished_; });
  return final_;
}

bool RequestState::done() const {
  std::lock_guard<std::mutex> lk(mu_);
  return finished_;
}

}  // namespace tkv::runtime
