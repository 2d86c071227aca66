// One OpenAI request's n choices on the engine: events from all of them come
// through one queue (each request's on_token callback pushes there on the
// engine thread), so one HTTP thread serves the whole request. n > 1: choice 0
// is submitted first and the others only after its first event, when its
// prompt's pages are in the prefix cache: they reuse them instead of
// prefilling the prompt again (a fork from one prefill). With a slot
// (slots.h), choice 0's prompt + output become the slot's tokens when it ends.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "server/api_error.h"
#include "server/state.h"

namespace tkv::server {

struct ChoiceEvent {
  int index = 0;
  turbokv::Event ev;
};

class Generation {
 public:
  // Admits n choices (429 when the queue is full) and registers for drains.
  static std::shared_ptr<Generation> admit(ServerState& s, MaybeError& err, int n);
  ~Generation();  // cancels unfinished choices, gives back the admission
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits choice 0 (the rest follow its first event); the engine's refusal as
  // an ApiError. slot >= 0: a slot acquired for it (released here on a refusal,
  // else by choice 0's final event); r.load_session: the slot's restored snapshot.
  MaybeError start(const turbokv::Request& r, int slot = -1);
  // The next event of any choice, waiting up to timeout; false on a timeout or
  // after the last choice's final event (finished() tells which).
  bool next(ChoiceEvent& out, std::chrono::milliseconds timeout);
  bool finished() const { return n_done_ == n_; }
  void cancel();
  int n() const { return n_; }
  int64_t prompt_tokens() const { return static_cast<int64_t>(base_.prompt_tokens.size()); }

 private:
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<ChoiceEvent> events;
    std::vector<std::chrono::steady_clock::time_point> last_token;
  };
  Generation(ServerState& s, int n);
  MaybeError submit(int index);

  ServerState& s_;
  const int n_;
  turbokv::Request base_;
  std::shared_ptr<Queue> q_;
  std::mutex handles_mu_;
  std::vector<turbokv::RequestHandle> handles_;
  bool rest_submitted_ = false;
  int n_done_ = 0;
  std::vector<bool> done_;
  int slot_ = -1;
};

}  // namespace tkv::server
