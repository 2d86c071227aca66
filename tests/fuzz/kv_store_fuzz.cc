// libFuzzer target for the KV snapshot reader (src/kvcache/kv_store.h): any byte
// string must decode as a checked snapshot or fail with a "[kv-store] fuzz: ..."
// Status; never crash, hang or read out of bounds. A decoded snapshot that fits
// the fixed small bf16 cache below is imported into it and exported again, and
// the pages must come back unchanged. Input: one control byte, then the file.
// Control bit 0: recompute the checksums first (so mutations reach the checks
// behind them). Seeds: tests/fuzz/corpus/kv_store_fuzz (make_kv_store_seeds.py).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kvcache/kv_cache.h"
#include "kvcache/kv_store.h"

namespace {

tkv::kv::KvCache& fuzz_cache() {
  static std::unique_ptr<tkv::kv::KvCache> c = [] {
    tkv::kv::KvShape shape;
    shape.n_layers = 2;
    shape.n_kv_heads = 2;
    shape.head_dim = 64;
    shape.layer_window = {0, 0};
    tkv::kv::CacheOptions o;
    o.scheme = tkv::kv::parse_kv_quant("bf16").value();
    o.page_size = 4;
    o.max_tokens = 64;
    o.max_seqs = 2;
    o.max_chunk_tokens = 64;
    o.budget_bytes = size_t{64} << 20;
    auto r = tkv::kv::create_cache(shape, o);
    if (!r.ok()) std::abort();
    return std::move(r).value();
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<uint8_t> file(data + 1, data + size);
  if (data[0] & 1) tkv::kv::reseal_snapshot(&file);
  auto r = tkv::kv::decode_snapshot(file.data(), file.size(), "fuzz");
  if (!r.ok()) {
    if (r.status().message().rfind("[kv-store] fuzz", 0) != 0) std::abort();
    return 0;
  }
  const tkv::kv::Snapshot& snap = r.value();
  tkv::kv::KvCache& cache = fuzz_cache();
  auto mine = cache.snapshot_header();
  if (!mine.ok()) std::abort();
  mine.value().model_id = snap.header.model_id;  // the one field the cache cannot know
  mine.value().key_center = snap.header.key_center;
  if (!tkv::kv::check_snapshot_compatible(snap.header, mine.value(), "fuzz").ok()) return 0;
  auto seq = cache.create_seq();
  if (!seq.ok()) std::abort();
  const int64_t n = snap.header.n_tokens();
  if (cache.import_seq(seq.value(), snap, n).ok()) {
    std::vector<std::vector<uint8_t>> pages;
    if (!cache.export_seq(seq.value(), n, &pages).ok()) std::abort();
    size_t bytes = 0;
    for (size_t i = 0; i < pages.size(); ++i) {
      if (static_cast<int64_t>(pages[i].size()) != snap.page_offset[i + 1] - snap.page_offset[i] ||
          std::memcmp(pages[i].data(), snap.data.data() + snap.page_offset[i], pages[i].size()) !=
              0)
        std::abort();
      bytes += pages[i].size();
    }
    if (bytes != snap.data.size()) std::abort();
  }
  cache.free_seq(seq.value());
  return 0;
}
