// Host bookkeeping of a paged KV cache: a pool of fixed-size token pages, a
// free list, and per-sequence page lists. Device data lives elsewhere; this
// class only hands out page ids. Invariant: every pool page is either on the
// free list or owned by exactly one sequence (refcount for forked prefixes).
#pragma once
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tkv::kv {

class PageTable {
 public:
  PageTable(int64_t n_pages, int page_size, int max_seqs);

  int page_size() const { return page_size_; }
  int64_t n_pages() const { return static_cast<int64_t>(refcount_.size()); }
  int64_t n_free_pages() const { return static_cast<int64_t>(free_.size()); }

  Result<int> create_seq();
  void free_seq(int seq);
  // New sequence sharing src's full pages (refcounted); the partial last page is
  // copied by the caller via copy_hook, because both sequences will write to it.
  Result<int> fork_seq(int src, int64_t* copy_src_page, int64_t* copy_dst_page);
  bool valid_seq(int seq) const;
  int64_t seq_len(int seq) const { return seqs_[static_cast<size_t>(seq)].n_tokens; }
  const std::vector<int32_t>& pages(int seq) const { return seqs_[static_cast<size_t>(seq)].pages; }
  // Makes room for n_new more tokens (allocates pages); error if the pool is full.
  Status reserve(int seq, int64_t n_new);
  void commit(int seq, int64_t n_new);
  // Drops tokens past n_tokens, returning whole pages no longer needed.
  void trim(int seq, int64_t n_tokens);
  // Releases pages that hold only tokens before `keep_from` (sliding window):
  // the logical page slot keeps id -1 so indexing stays position-based.
  void release_before(int seq, int64_t keep_from);
  int refcount(int32_t page) const { return refcount_[static_cast<size_t>(page)]; }

 private:
  struct Seq {
    bool live = false;
    int64_t n_tokens = 0;
    std::vector<int32_t> pages;  // logical page -> pool page (-1 = released)
  };
  void unref(int32_t page);
  int page_size_;
  std::vector<int32_t> free_;
  std::vector<int> refcount_;
  std::vector<Seq> seqs_;
};

}  // namespace tkv::kv
