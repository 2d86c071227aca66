// PagedCache, the one KvCache implementation (internal to src/kvcache; callers
// use create_paged_cache). Split over paged_cache.cc (stores, write, view) and
// paged_cache_prefix.cc (prefix sharing). Layout: docs/kv-cache.md.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/attention/attention_quant.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_layout.h"
#include "kvcache/lazy_pool.h"
#include "kvcache/page_table.h"

namespace tkv::kv::paged {

struct Store {
  StoreSpec spec;
  int64_t row_bytes = 0, page_bytes = 0;
  std::unique_ptr<PageTable> pt;
  std::vector<LazyPool> pools;  // per layer of the group
  int64_t local(int64_t len) const {
    return std::clamp<int64_t>(len - spec.begin, 0, spec.end - spec.begin);
  }
  void copy_page(int32_t src, int32_t dst);  // every layer's data of one page
};

class PagedCache final : public KvCache {
 public:
  PagedCache(const KvShape& shape, const CacheOptions& opts, const CacheLayout& lay);

  // Maps every pool; sizes were checked for overflow by plan_cache_layout.
  Status allocate();

  Result<int> create_seq() override;
  void free_seq(int seq) override;
  Result<int> fork_seq(int src) override;
  int64_t seq_len(int seq) const override { return seq_len_[static_cast<size_t>(seq)]; }
  void trim_seq(int seq, int64_t n) override;
  void set_page_copy_hook(PageCopyHook hook) override { copy_hook_ = std::move(hook); }
  Status reserve(int seq, int64_t n_new) override;
  void commit(int seq, int64_t n_new) override;
  void write(int layer, int seq, int64_t pos0, int64_t n, const float* k, const float* v) override;
  kernels::KvView view(int layer, int seq, int64_t n_tokens) const override;
  std::vector<LayerStore> layer_stores(int layer) const override;

  int64_t attach_prefix(int seq, const int32_t* tokens, int64_t n) override;
  int64_t cached_prefix(const int32_t* tokens, int64_t n) const override;
  void publish_prefix(int seq, const int32_t* tokens, int64_t n) override;
  void clear_prefix_cache() override;
  PrefixStats prefix_stats() const override;
  void record_prefix_events(bool on) override;
  void take_prefix_events(std::vector<PrefixEvent>* out) override;
  int64_t available_pages() const override;

  const KvShape& shape() const override { return shape_; }
  std::string scheme_name() const override { return lay_.name; }
  size_t bytes_per_token() const override { return lay_.memory.bytes_per_token; }
  size_t allocated_bytes() const override { return allocated_; }
  int64_t capacity_tokens() const override { return lay_.capacity_tokens; }
  // paged_cache_store.cc
  Result<SnapshotHeader> snapshot_header() const override;
  Status export_seq(int seq, int64_t n_tokens,
                    std::vector<std::vector<uint8_t>>* pages) const override;
  Status import_seq(int seq, const Snapshot& snap, int64_t n_tokens) override;

 private:
  void write_store(Store& st, int slot, int seq, int64_t pos0, int64_t n, const float* k,
                   const float* v);
  bool prefix_supported() const;
  // Store s's page src copied to dst, on the host and through copy_hook_.
  void copy_page(size_t s, int32_t src, int32_t dst);
  // The store holding block b (positions [b, b + 1) * page_size) and the block's
  // page index in it; prefix sharing only runs where exactly one store does.
  Store& block_store(int64_t b, int64_t* local_page);

  KvShape shape_;
  CacheOptions opts_;
  CacheLayout lay_;
  std::vector<Store> stores_;
  std::vector<int64_t> seq_len_;
  size_t allocated_ = 0;
  PageCopyHook copy_hook_;
  bool prefix_on_ = false;    // set by allocate(): namespace given and layout supported
  PrefixStats prefix_stats_;  // lookups / tokens; page counts come from the stores
  bool record_events_ = false;
  std::vector<PrefixEvent> events_;  // since take_prefix_events; the stores append evictions
};

}  // namespace tkv::kv::paged
