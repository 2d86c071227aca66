// inspect_snapshot (include/turbokv/engine.h): a snapshot's header through the
// public API, for `turbokv kv inspect` (tools see no kvcache types).
#include "kvcache/kv_store.h"
#include "turbokv/engine.h"

namespace turbokv {

Result<SnapshotInfo> inspect_snapshot(const std::string& path) {
  TKV_ASSIGN_OR_RETURN(const std::vector<uint8_t> b, tkv::kv::read_whole_file(path));
  size_t header_bytes = 0;
  TKV_ASSIGN_OR_RETURN(const tkv::kv::SnapshotHeader h,
                       tkv::kv::decode_snapshot_header(b.data(), b.size(), path, &header_bytes));
  SnapshotInfo i;
  i.version = h.version;
  i.scheme = h.scheme;
  i.kind = tkv::kv::snapshot_kind_name(h.kind);
  i.k_bits = h.k_bits;
  i.v_bits = h.v_bits;
  i.model_id = h.model_id;
  i.n_layers = h.n_layers;
  i.n_kv_heads = h.n_kv_heads;
  i.head_dim = h.head_dim;
  i.page_size = h.page_size;
  i.key_center = h.key_center;
  i.quant_start = h.quant_start;
  i.swa_bf16 = h.swa_bf16;
  i.n_tokens = h.n_tokens();
  i.tokens = h.tokens;
  i.file_bytes = b.size();
  i.header_bytes = header_bytes;
  return i;
}

}  // namespace turbokv
