// msgpack of vLLM's KVEventBatch (see kv_events.h). Followed:
// vllm/distributed/kv_events.py of vLLM 0.11 to 0.2x (msgspec, omit_defaults):
// EventBatch [ts: float64, events, data_parallel_rank]; BlockStored fields
// block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
// lora_name (later fields have defaults and are omitted when unset);
// BlockRemoved block_hashes, medium; AllBlocksCleared none. array_like events
// are [tag, fields...]; after vLLM PR #42892 they are maps {"type": tag, ...};
// the outer batch stays an array in both.
#include <msgpack.hpp>

#include "server/kv_events.h"

namespace tkv::server {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, const std::string& s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// A field: its name first when the event is a map.
void key(Packer& pk, bool map, const char* name) {
  if (map) pack_str(pk, name);
}

void pack_hashes(Packer& pk, const std::vector<uint64_t>& h) {
  pk.pack_array(static_cast<uint32_t>(h.size()));
  for (uint64_t x : h) pk.pack_uint64(x);
}

void pack_event(Packer& pk, const turbokv::KvEvent& e, const std::string& medium, bool map) {
  using K = turbokv::KvEvent::Kind;
  const char* tag = e.kind == K::kBlockStored    ? "BlockStored"
                    : e.kind == K::kBlockRemoved ? "BlockRemoved"
                                                 : "AllBlocksCleared";
  const uint32_t n_fields = e.kind == K::kBlockStored ? 7 : e.kind == K::kBlockRemoved ? 2 : 0;
  if (map)
    pk.pack_map(1 + n_fields);
  else
    pk.pack_array(1 + n_fields);
  key(pk, map, "type");
  pack_str(pk, tag);
  if (e.kind == K::kAllBlocksCleared) return;
  key(pk, map, "block_hashes");
  pack_hashes(pk, e.block_hashes);
  if (e.kind == K::kBlockStored) {
    key(pk, map, "parent_block_hash");
    if (e.parent_block_hash)
      pk.pack_uint64(*e.parent_block_hash);
    else
      pk.pack_nil();
    key(pk, map, "token_ids");
    pk.pack_array(static_cast<uint32_t>(e.token_ids.size()));
    for (int32_t t : e.token_ids) pk.pack_int32(t);
    key(pk, map, "block_size");
    pk.pack_int32(e.block_size);
    key(pk, map, "lora_id");
    pk.pack_nil();
  }
  key(pk, map, "medium");
  pack_str(pk, medium);
  if (e.kind == K::kBlockStored) {
    key(pk, map, "lora_name");
    pk.pack_nil();
  }
}

}  // namespace

std::string encode_kv_event_batch(double ts, const std::vector<turbokv::KvEvent>& events,
                                  const std::string& medium, bool map_events, int dp_rank) {
  msgpack::sbuffer buf;
  Packer pk(&buf);
  pk.pack_array(3);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const turbokv::KvEvent& e : events) pack_event(pk, e, medium, map_events);
  pk.pack_int32(dp_rank);
  return std::string(buf.data(), buf.size());
}

}  // namespace tkv::server
