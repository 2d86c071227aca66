// What every route shares: the engine, the options, the metrics, the admission
// count (choices submitted and not yet finished, for 429) and the live
// generations (cancelled when a drain times out).
#pragma once
#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <set>

#include "server/kv_events.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/slots.h"

namespace tkv::server {

class Generation;

struct ServerState {
  // Set once the model is loaded; until then every route but /health answers 503.
  std::atomic<turbokv::Engine*> engine{nullptr};
  turbokv::Engine& eng() const { return *engine.load(); }
  bool ready() const { return engine.load() != nullptr; }
  ServerOptions opts;
  // Shared with the requests' callbacks, which run on the engine thread and may
  // outlive the server (the engine ends open requests when it is destroyed).
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  // --parallel slots (slots.h); shared with the requests' callbacks like metrics.
  std::shared_ptr<SlotTable> slots = std::make_shared<SlotTable>();
  // --kv-events (kv_events.h): its counters go to /metrics; null without it.
  std::shared_ptr<KvEventPublisher> kv_events;
  std::time_t started = std::time(nullptr);
  std::atomic<int> in_flight{0};  // choices admitted and not finished
  std::atomic<bool> draining{false};

  std::mutex live_mu;
  std::set<Generation*> live;

  explicit ServerState(ServerOptions o) : opts(std::move(o)) {}
  // Choices the engine's batch plus the wait queue may hold.
  int capacity() const { return eng().config().max_seqs + opts.max_queue; }
};

}  // namespace tkv::server
