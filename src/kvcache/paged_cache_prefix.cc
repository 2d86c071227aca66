// Prefix sharing of PagedCache: full pages are indexed by the hash chain of
// their tokens (prefix_key.h) in their store's PageTable; a new sequence maps
// the longest cached run instead of recomputing it. Only layouts where every
// position lives in exactly one store that keeps it are supported: no
// sliding-window layers (their pages behind the window are released), and a
// --kv-quant-start boundary on a page boundary (else a page would straddle two
// stores). Elsewhere the calls are no-ops.
#include <cstdint>

#include "base/check.h"
#include "kvcache/paged_cache_impl.h"
#include "kvcache/prefix_key.h"

namespace tkv::kv::paged {

bool PagedCache::prefix_supported() const {
  if (lay_.groups.size() != 1) return false;
  for (const Store& st : stores_)
    if (st.spec.window > 0 || st.spec.begin % opts_.page_size != 0) return false;
  return true;
}

Store& PagedCache::block_store(int64_t b, int64_t* local_page) {
  const int64_t pos = b * opts_.page_size;
  for (Store& st : stores_) {
    if (pos >= st.spec.begin && pos < st.spec.end) {
      *local_page = (pos - st.spec.begin) / opts_.page_size;
      return st;
    }
  }
  TKV_CHECK(false && "no store covers the block");
  __builtin_unreachable();
}

int64_t PagedCache::attach_prefix(int seq, const int32_t* tokens, int64_t n) {
  if (!prefix_on_) return 0;
  TKV_CHECK(stores_.front().pt->valid_seq(seq));
  if (n <= 1 || seq_len(seq) != 0) return 0;
  const int ps = opts_.page_size;
  const int64_t max_blocks = (n - 1) / ps;  // leave at least one token to compute
  ++prefix_stats_.lookups;
  prefix_stats_.looked_up_tokens += n;
  uint64_t parent = 0;
  int64_t b = 0;
  for (; b < max_blocks; ++b) {
    const uint64_t key = prefix_block_key(opts_.prefix_namespace, parent, tokens + b * ps, ps);
    int64_t local_page = 0;
    Store& st = block_store(b, &local_page);
    const int32_t page = st.pt->find_cached(key);
    if (page < 0) break;
    st.pt->map_cached(seq, page);  // appends at local_page: stores fill in position order
    TKV_CHECK(st.pt->pages(seq).size() == static_cast<size_t>(local_page + 1));
    parent = key;
  }
  seq_len_[static_cast<size_t>(seq)] = b * ps;
  prefix_stats_.hit_tokens += b * ps;
  return b * ps;
}

int64_t PagedCache::cached_prefix(const int32_t* tokens, int64_t n) const {
  if (!prefix_on_ || n <= 1) return 0;
  const int ps = opts_.page_size;
  const int64_t max_blocks = (n - 1) / ps;
  uint64_t parent = 0;
  int64_t b = 0;
  for (; b < max_blocks; ++b) {
    const uint64_t key = prefix_block_key(opts_.prefix_namespace, parent, tokens + b * ps, ps);
    const int64_t pos = b * ps;
    const Store* st = nullptr;
    for (const Store& x : stores_)
      if (pos >= x.spec.begin && pos < x.spec.end) st = &x;
    if (st == nullptr || st->pt->find_cached(key) < 0) break;
    parent = key;
  }
  return b * ps;
}

void PagedCache::publish_prefix(int seq, const int32_t* tokens, int64_t n) {
  if (!prefix_on_) return;
  TKV_CHECK(stores_.front().pt->valid_seq(seq));
  const int ps = opts_.page_size;
  const int64_t n_blocks = std::min(n, seq_len(seq)) / ps;
  uint64_t parent = 0;
  size_t run = SIZE_MAX;  // the kStored event this run of newly indexed blocks extends
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint64_t key = prefix_block_key(opts_.prefix_namespace, parent, tokens + b * ps, ps);
    int64_t local_page = 0;
    Store& st = block_store(b, &local_page);
    const int32_t page = st.pt->pages(seq)[static_cast<size_t>(local_page)];
    TKV_CHECK(page >= 0);
    // false when already indexed: this page, or another page that holds the same
    // prefix (computed by another sequence), which stays the one found.
    const bool fresh = st.pt->index_page(page, key);
    if (record_events_ && !fresh) run = SIZE_MAX;
    if (record_events_ && fresh) {
      if (run == SIZE_MAX) {
        run = events_.size();
        events_.push_back(PrefixEvent{PrefixEvent::Kind::kStored, {}, parent, {}});
      }
      events_[run].keys.push_back(key);
      events_[run].tokens.insert(events_[run].tokens.end(), tokens + b * ps, tokens + (b + 1) * ps);
    }
    parent = key;
  }
}

void PagedCache::clear_prefix_cache() {
  for (Store& st : stores_) st.pt->clear_index();
  if (record_events_) events_.push_back(PrefixEvent{PrefixEvent::Kind::kCleared, {}, 0, {}});
}

void PagedCache::record_prefix_events(bool on) {
  record_events_ = on && prefix_on_;
  for (Store& st : stores_) st.pt->set_event_log(record_events_ ? &events_ : nullptr);
  if (!record_events_) events_.clear();
}

void PagedCache::take_prefix_events(std::vector<PrefixEvent>* out) {
  for (PrefixEvent& e : events_) out->push_back(std::move(e));
  events_.clear();
}

PrefixStats PagedCache::prefix_stats() const {
  PrefixStats s = prefix_stats_;
  for (const Store& st : stores_) {
    s.cached_pages += st.pt->n_indexed_pages();
    s.evictions += st.pt->evictions();
  }
  return s;
}

int64_t PagedCache::available_pages() const {
  // The store that grows with context: the scheme store of the first group.
  const int sid = lay_.groups.front().stores.back();
  return stores_[static_cast<size_t>(sid)].pt->n_available_pages();
}

}  // namespace tkv::kv::paged
