// Host bookkeeping of a paged KV cache: a pool of fixed-size token pages, a
// free list, per-sequence page lists and the prefix index (content key -> full
// page). Device data lives elsewhere; this class only hands out page ids.
// Invariant: every pool page is either free, referenced by sequences (refcount
// = number of page-list slots holding it), or indexed with refcount 0 (cached,
// in LRU order, reclaimed by reserve when the free list is empty). A page is
// written only while its one reference is private: refcount 1 and not indexed.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvcache/page_lru.h"
#include "kvcache/prefix_event.h"

namespace tkv::kv {

// A page the caller must copy (every layer's data) before writing: src -> dst.
struct PageCopy {
  int32_t src = -1, dst = -1;
};

class PageTable {
 public:
  PageTable(int64_t n_pages, int page_size, int max_seqs);

  int page_size() const { return page_size_; }
  int64_t n_pages() const { return static_cast<int64_t>(refcount_.size()); }
  int64_t n_free_pages() const { return static_cast<int64_t>(free_.size()); }
  // Free pages plus cached pages nobody references (evictable).
  int64_t n_available_pages() const { return n_free_pages() + lru_.size(); }
  int64_t n_indexed_pages() const { return static_cast<int64_t>(index_.size()); }
  int64_t evictions() const { return evictions_; }

  Result<int> create_seq();
  void free_seq(int seq);
  // New sequence sharing src's full pages (refcounted); the partial last page is
  // copied by the caller via copy_hook, because both sequences will write to it.
  Result<int> fork_seq(int src, int64_t* copy_src_page, int64_t* copy_dst_page);
  bool valid_seq(int seq) const;
  int64_t seq_len(int seq) const { return seqs_[static_cast<size_t>(seq)].n_tokens; }
  const std::vector<int32_t>& pages(int seq) const { return seqs_[static_cast<size_t>(seq)].pages; }
  // Makes room for n_new more tokens (allocates pages, evicting cached ones when
  // the free list runs out); error if the pool is full. When the partial last
  // page is not writable (shared after a trim), it is replaced by a fresh page
  // and *cow says what to copy; cow may be null only when no copy can arise.
  Status reserve(int seq, int64_t n_new, PageCopy* cow = nullptr);
  void commit(int seq, int64_t n_new);
  // Drops tokens past n_tokens, releasing whole pages no longer needed.
  void trim(int seq, int64_t n_tokens);
  // Releases pages that hold only tokens before `keep_from` (sliding window):
  // the logical page slot keeps id -1 so indexing stays position-based.
  void release_before(int seq, int64_t keep_from);
  int refcount(int32_t page) const { return refcount_[static_cast<size_t>(page)]; }
  bool writable(int32_t page) const { return refcount(page) == 1 && !indexed(page); }

  // Prefix index.
  bool indexed(int32_t page) const { return indexed_[static_cast<size_t>(page)] != 0; }
  int32_t find_cached(uint64_t key) const;  // -1 when no page has this key
  // Indexes a referenced full page under key; false (nothing changed) when the
  // page or the key is already in the index.
  bool index_page(int32_t page, uint64_t key);
  // Appends the cached page to seq, whose length must be a whole number of
  // pages (so the page is full and never written): refcount++, seq_len += page_size.
  void map_cached(int seq, int32_t page);
  // Empties the index; unreferenced cached pages go back to the free list.
  void clear_index();
  // When set, each eviction appends its key to log (a kRemoved event, merged
  // into the last one when that is a kRemoved too). Not owned; null = off.
  void set_event_log(std::vector<PrefixEvent>* log) { log_ = log; }

 private:
  struct Seq {
    bool live = false;
    int64_t n_tokens = 0;
    std::vector<int32_t> pages;  // logical page -> pool page (-1 = released)
  };
  void unref(int32_t page);
  int32_t take_page();  // a free page, else the least recently used cached one
  int page_size_;
  std::vector<int32_t> free_;
  std::vector<int> refcount_;
  std::vector<Seq> seqs_;
  std::unordered_map<uint64_t, int32_t> index_;  // key -> page
  std::vector<uint64_t> key_;                    // [n_pages] key of an indexed page
  std::vector<uint8_t> indexed_;                 // [n_pages]
  PageLru lru_;
  int64_t evictions_ = 0;
  std::vector<PrefixEvent>* log_ = nullptr;
};

}  // namespace tkv::kv
