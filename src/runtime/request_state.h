// RequestState: the channel between the engine thread and whoever holds a
// request's handle. The engine pushes events; the holder pops them (blocking),
// waits for the end, or cancels from any thread. The engine's wake-up lives in
// a shared Mailbox, so a handle that outlives the engine stays safe to use.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "runtime/request.h"

namespace tkv::runtime {

// Wakes the engine loop: new requests or cancellations to look at.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  bool poked = false;
  void poke() {
    {
      std::lock_guard<std::mutex> lk(mu);
      poked = true;
    }
    cv.notify_all();
  }
};

class RequestState {
 public:
  RequestState(std::shared_ptr<Mailbox> mb, bool queue_events)
      : mb_(std::move(mb)), queue_(queue_events) {}

  // Engine side. The final event (finish != kNone) closes the stream.
  void push(Event e);
  // Holder side: next event, blocking; false once the final one was popped
  // (or, for a callback request, once it finished: events went to the callback).
  bool next(Event& e);
  // Blocks until the request finished; its final event.
  Event wait();
  bool done() const;
  void cancel() {
    cancelled_.store(true);
    mb_->poke();
  }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::shared_ptr<Mailbox> mb_;
  const bool queue_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool finished_ = false;  // the final event was pushed
  bool drained_ = false;   // ... and popped by next()
  Event final_;
};

}  // namespace tkv::runtime
