// The msgpack of serve --kv-events against bytes written out by hand from
// vLLM's msgspec structs (vllm/distributed/kv_events.py, see
// src/server/kv_events_msgpack.cc): array_like events and, after vLLM PR
// #42892, tagged maps; the batch [ts, events, data_parallel_rank] in both.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/kv_events.h"

namespace tkv::server {
namespace {

using turbokv::KvEvent;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}
std::string str(const std::string& s) {  // fixstr (< 32 bytes)
  return bytes({0xa0 | static_cast<int>(s.size())}) + s;
}

std::vector<KvEvent> sample_events() {
  KvEvent a;  // block 0 and 1 of a chain: no parent
  a.block_hashes = {1, 0xffffffffffffffffULL};
  a.token_ids = {1, 2, 300, 70000};
  a.block_size = 2;
  KvEvent b;  // a block after block 5
  b.block_hashes = {7};
  b.parent_block_hash = 5;
  b.token_ids = {3, 4};
  b.block_size = 2;
  KvEvent r;
  r.kind = KvEvent::Kind::kBlockRemoved;
  r.block_hashes = {1};
  KvEvent c;
  c.kind = KvEvent::Kind::kAllBlocksCleared;
  return {a, b, r, c};
}

const std::string kTs = bytes({0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0});  // float64 1.5
const std::string kMaxU64 = bytes({0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});

TEST(KvEventsMsgpack, ArrayLikeEventsAsVllmEncodesThem) {
  const std::string want =
      bytes({0x93}) + kTs + bytes({0x94}) +
      // ["BlockStored", [1, 2^64-1], nil, [1, 2, 300, 70000], 2, nil, "CPU", nil]
      bytes({0x98}) + str("BlockStored") + bytes({0x92, 0x01}) + kMaxU64 + bytes({0xc0}) +
      bytes({0x94, 0x01, 0x02, 0xcd, 0x01, 0x2c, 0xce, 0x00, 0x01, 0x11, 0x70}) +
      bytes({0x02, 0xc0}) + str("CPU") + bytes({0xc0}) +
      // ["BlockStored", [7], 5, [3, 4], 2, nil, "CPU", nil]
      bytes({0x98}) + str("BlockStored") + bytes({0x91, 0x07, 0x05, 0x92, 0x03, 0x04, 0x02, 0xc0}) +
      str("CPU") + bytes({0xc0}) +
      // ["BlockRemoved", [1], "CPU"]
      bytes({0x93}) + str("BlockRemoved") + bytes({0x91, 0x01}) + str("CPU") +
      // ["AllBlocksCleared"]
      bytes({0x91}) + str("AllBlocksCleared") +
      // data_parallel_rank
      bytes({0x00});
  EXPECT_EQ(encode_kv_event_batch(1.5, sample_events(), "CPU", false), want);
}

TEST(KvEventsMsgpack, TaggedMapEventsAfterVllmPr42892) {
  std::vector<KvEvent> ev = sample_events();
  ev.erase(ev.begin());  // the second BlockStored, the removal, the clear
  const std::string want =
      bytes({0x93}) + kTs + bytes({0x93}) + bytes({0x88}) + str("type") + str("BlockStored") +
      str("block_hashes") + bytes({0x91, 0x07}) + str("parent_block_hash") + bytes({0x05}) +
      str("token_ids") + bytes({0x92, 0x03, 0x04}) + str("block_size") + bytes({0x02}) +
      str("lora_id") + bytes({0xc0}) + str("medium") + str("GPU") + str("lora_name") +
      bytes({0xc0}) + bytes({0x83}) + str("type") + str("BlockRemoved") + str("block_hashes") +
      bytes({0x91, 0x01}) + str("medium") + str("GPU") + bytes({0x81}) + str("type") +
      str("AllBlocksCleared") + bytes({0x03});
  EXPECT_EQ(encode_kv_event_batch(1.5, ev, "GPU", true, 3), want);
}

TEST(KvEventsMsgpack, EmptyBatch) {
  EXPECT_EQ(encode_kv_event_batch(1.5, {}, "CPU", false),
            bytes({0x93}) + kTs + bytes({0x90, 0x00}));
}

TEST(KvEventsEndpoint, AcceptsTcpAndIpc) {
  for (const char* ep : {"tcp://127.0.0.1:5557", "tcp://0.0.0.0:0", "tcp://[::1]:5557",
                         "tcp://localhost:65535", "ipc:///tmp/turbokv-kv-events"})
    EXPECT_TRUE(check_kv_events_endpoint(ep, "--kv-events").ok()) << ep;
}

TEST(KvEventsEndpoint, RefusesWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"127.0.0.1:5557", "no scheme"},
      {"udp://127.0.0.1:5557", "scheme 'udp' is not supported"},
      {"inproc://x", "scheme 'inproc' is not supported"},
      {"tcp://*:5557", "name the address to bind"},
      {"tcp://:5557", "name the address to bind"},
      {"tcp://127.0.0.1", "port must be"},
      {"tcp://127.0.0.1:65536", "port must be"},
      {"tcp://127.0.0.1:x", "port must be"},
      {"ipc://", "empty ipc path"},
  };
  for (const auto& [ep, why] : bad) {
    const Status st = check_kv_events_endpoint(ep, "--kv-events");
    EXPECT_FALSE(st.ok()) << ep;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("--kv-events '" + ep + "'"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tkv::server
