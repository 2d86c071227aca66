// serve --kv-events: the engine's prefix-cache events (include/turbokv/kv_events.h)
// published over ZMQ in vLLM's wire format, so KV-aware routers that read vLLM
// (NVIDIA Dynamo, llm-d, sglang-router) decode them unchanged. Frames: topic,
// sequence number (8 bytes, big-endian), msgpack KVEventBatch; an optional
// ROUTER socket replays buffered batches from a sequence number on. The engine
// thread only queues (bounded; a full queue drops the batch and counts it); a
// publisher thread encodes and sends. Followed: vllm/distributed/kv_events.py.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "turbokv/kv_events.h"
#include "turbokv/status.h"

namespace tkv::server {

struct KvEventsOptions {
  std::string endpoint;         // PUB: tcp://HOST:PORT (PORT 0: a free one) or ipc://PATH
  std::string replay_endpoint;  // ROUTER for late joiners; empty = none
  bool map_events = false;      // events as tagged maps (vLLM after PR #42892), else arrays
  std::string topic;            // first frame of every message (vLLM's default: empty)
  std::string medium = "CPU";   // where the blocks live (vLLM: "GPU", "CPU")
  size_t max_queue = 4096;      // batches waiting for the publisher thread
  size_t replay_batches = 10000;
};

// tcp://HOST:PORT (HOST named: an address or 0.0.0.0, never "*"; PORT 0 to
// 65535) or ipc://PATH; else an error naming flag and the valid forms.
Status check_kv_events_endpoint(const std::string& endpoint, const std::string& flag);

// One KVEventBatch as msgpack: [ts, [event, ...], data_parallel_rank], each event
// a tagged array ["BlockStored", block_hashes, parent_block_hash, token_ids,
// block_size, lora_id, medium, lora_name] or, with map_events, a map with the
// tag under "type" and the same fields by name.
std::string encode_kv_event_batch(double ts, const std::vector<turbokv::KvEvent>& events,
                                  const std::string& medium, bool map_events, int dp_rank = 0);

struct KvEventsStats {
  int64_t batches_published = 0, events_published = 0;
  int64_t batches_dropped = 0, events_dropped = 0;  // the queue was full
  int64_t replays = 0;                              // replay requests answered
};

class KvEventPublisher {
 public:
  // Binds the sockets (errors name the endpoint) and starts the thread.
  static Result<std::shared_ptr<KvEventPublisher>> start(const KvEventsOptions& o);
  ~KvEventPublisher();  // sends what is queued, then closes the sockets
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // The bound endpoints (a PORT 0 resolved).
  const std::string& endpoint() const;
  const std::string& replay_endpoint() const;
  // From the engine thread: queues one step's events; never waits for I/O.
  void submit(std::vector<turbokv::KvEvent>&& events);
  KvEventsStats stats() const;

  struct Impl;

 private:
  explicit KvEventPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tkv::server
