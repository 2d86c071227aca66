// turbokv serve: an OpenAI-compatible HTTP server over one turbokv::Engine (the
// public API only). Every request of every route shares the engine's one
// continuous batch. Lifecycle: bind() (port 0 picks a free one), run() on one
// thread; set_engine() once the model is loaded (until then /health and every
// other route answer 503); shutdown() from any thread (a signal thread): stop
// accepting, let in-flight requests finish for drain_timeout_s, cancel the
// rest, run() returns. The engine must outlive the server.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "turbokv/engine.h"

namespace tkv::server {

class KvEventPublisher;  // kv_events.h

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;               // empty: no auth; else every route but /health needs it
  std::string model_id;              // the id /v1/models lists and responses name
  int http_threads = 128;            // connections served at once (a streaming client holds one)
  int max_queue = 256;               // choices beyond the engine's batch that may wait; more: 429
  size_t max_body_bytes = 8u << 20;  // larger bodies: 413
  double drain_timeout_s = 30;       // SIGTERM: in-flight requests get this long
  turbokv::SpecParams spec;          // speculative decoding for every request (--spec)
  // --slot-save-path: a canonical absolute directory for slot snapshots; empty:
  // POST /slots/{id} save and restore answer 501.
  std::string slot_save_path;
};

class Server {
 public:
  explicit Server(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port; returns the bound port or why it could not.
  Result<int> bind();
  // The loaded engine: requests are served from now on.
  void set_engine(turbokv::Engine& eng);
  // --kv-events: the publisher the engine feeds; /metrics shows its counters.
  void set_kv_events(std::shared_ptr<KvEventPublisher> pub);
  // Serves until shutdown(); returns once every connection has ended.
  void run();
  // From any thread: stop accepting, drain, then cancel what is left.
  void shutdown();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tkv::server
