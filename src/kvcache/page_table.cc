// PageTable implementation (see page_table.h).
#include "kvcache/page_table.h"

#include "base/check.h"

namespace tkv::kv {

PageTable::PageTable(int64_t n_pages, int page_size, int max_seqs)
    : page_size_(page_size),
      refcount_(static_cast<size_t>(n_pages), 0),
      seqs_(static_cast<size_t>(max_seqs)),
      key_(static_cast<size_t>(n_pages), 0),
      indexed_(static_cast<size_t>(n_pages), 0),
      lru_(n_pages) {
  free_.reserve(static_cast<size_t>(n_pages));
  for (int64_t p = n_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

Result<int> PageTable::create_seq() {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].live) {
      seqs_[i] = Seq{true, 0, {}};
      return static_cast<int>(i);
    }
  }
  return make_error(StatusCode::kResourceExhausted, "[kvcache] all {} sequence slots are in use",
                    seqs_.size());
}

bool PageTable::valid_seq(int seq) const {
  return seq >= 0 && static_cast<size_t>(seq) < seqs_.size() &&
         seqs_[static_cast<size_t>(seq)].live;
}

void PageTable::unref(int32_t page) {
  if (page < 0) return;
  int& rc = refcount_[static_cast<size_t>(page)];
  TKV_CHECK(rc > 0);
  if (--rc > 0) return;
  // An indexed page keeps its content for later prefix hits until evicted.
  if (indexed(page))
    lru_.push_back(page);
  else
    free_.push_back(page);
}

int32_t PageTable::take_page() {
  if (!free_.empty()) {
    const int32_t p = free_.back();
    free_.pop_back();
    return p;
  }
  const int32_t p = lru_.pop_front();
  const uint64_t key = key_[static_cast<size_t>(p)];
  index_.erase(key);
  indexed_[static_cast<size_t>(p)] = 0;
  ++evictions_;
  if (log_ != nullptr) {
    if (log_->empty() || log_->back().kind != PrefixEvent::Kind::kRemoved)
      log_->push_back(PrefixEvent{PrefixEvent::Kind::kRemoved, {}, 0, {}});
    log_->back().keys.push_back(key);
  }
  return p;
}

void PageTable::free_seq(int seq) {
  TKV_CHECK(valid_seq(seq));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  // Last page first: its cached pages then enter the LRU deepest-first, so a
  // chain is evicted from its end and its remaining head stays reachable.
  for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it) unref(*it);
  s = Seq{};
}

Result<int> PageTable::fork_seq(int src, int64_t* copy_src_page, int64_t* copy_dst_page) {
  TKV_CHECK(valid_seq(src));
  *copy_src_page = *copy_dst_page = -1;
  TKV_ASSIGN_OR_RETURN(int dst, create_seq());
  const Seq& s = seqs_[static_cast<size_t>(src)];
  Seq& d = seqs_[static_cast<size_t>(dst)];
  const int64_t full = s.n_tokens / page_size_;
  const bool partial = s.n_tokens % page_size_ != 0;
  if (partial && n_available_pages() == 0) {
    d = Seq{};
    return make_error(StatusCode::kResourceExhausted, "[kvcache] no free page to fork sequence {}",
                      src);
  }
  d.n_tokens = s.n_tokens;
  for (int64_t i = 0; i < full; ++i) {
    const int32_t p = s.pages[static_cast<size_t>(i)];
    if (p >= 0) ++refcount_[static_cast<size_t>(p)];
    d.pages.push_back(p);
  }
  if (partial) {
    const int32_t np = take_page();
    refcount_[static_cast<size_t>(np)] = 1;
    d.pages.push_back(np);
    *copy_src_page = s.pages[static_cast<size_t>(full)];
    *copy_dst_page = np;
  }
  return dst;
}

Status PageTable::reserve(int seq, int64_t n_new, PageCopy* cow) {
  TKV_CHECK(valid_seq(seq));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const int64_t need = (s.n_tokens + n_new + page_size_ - 1) / page_size_;
  const int64_t add = need - static_cast<int64_t>(s.pages.size());
  // After a trim into a shared or indexed page, the next write lands in it: copy first.
  const int64_t last = s.n_tokens / page_size_;
  const bool copy = n_new > 0 && s.n_tokens % page_size_ != 0 &&
                    s.pages[static_cast<size_t>(last)] >= 0 &&
                    !writable(s.pages[static_cast<size_t>(last)]);
  if (add + (copy ? 1 : 0) > n_available_pages())
    return make_error(StatusCode::kResourceExhausted,
                      "[kvcache] out of KV pages: sequence needs {} more pages of {} tokens, {} "
                      "free (context full)",
                      add + (copy ? 1 : 0), page_size_, n_available_pages());
  if (copy) {
    TKV_CHECK(cow != nullptr);
    int32_t& slot = s.pages[static_cast<size_t>(last)];
    const int32_t np = take_page();
    refcount_[static_cast<size_t>(np)] = 1;
    *cow = {slot, np};
    // The copy is made by the caller before any write; the old page is intact
    // until a reserve reuses it, and unref keeps it referenced or cached.
    unref(slot);
    slot = np;
  }
  for (int64_t i = 0; i < add; ++i) {
    const int32_t p = take_page();
    refcount_[static_cast<size_t>(p)] = 1;
    s.pages.push_back(p);
  }
  return Status();
}

void PageTable::commit(int seq, int64_t n_new) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  TKV_CHECK(s.n_tokens + n_new <= static_cast<int64_t>(s.pages.size()) * page_size_);
  s.n_tokens += n_new;
}

void PageTable::trim(int seq, int64_t n_tokens) {
  TKV_CHECK(valid_seq(seq));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  if (n_tokens >= s.n_tokens) return;
  s.n_tokens = n_tokens < 0 ? 0 : n_tokens;
  const size_t keep = static_cast<size_t>((s.n_tokens + page_size_ - 1) / page_size_);
  while (s.pages.size() > keep) {
    unref(s.pages.back());
    s.pages.pop_back();
  }
}

void PageTable::release_before(int seq, int64_t keep_from) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const int64_t n_dead = keep_from / page_size_;
  for (int64_t i = 0; i < n_dead && i < static_cast<int64_t>(s.pages.size()); ++i) {
    int32_t& p = s.pages[static_cast<size_t>(i)];
    unref(p);
    p = -1;
  }
}

int32_t PageTable::find_cached(uint64_t key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? -1 : it->second;
}

bool PageTable::index_page(int32_t page, uint64_t key) {
  TKV_CHECK(page >= 0 && page < n_pages() && refcount(page) > 0);
  if (indexed(page) || index_.count(key) != 0) return false;
  index_.emplace(key, page);
  key_[static_cast<size_t>(page)] = key;
  indexed_[static_cast<size_t>(page)] = 1;
  return true;
}

void PageTable::map_cached(int seq, int32_t page) {
  TKV_CHECK(valid_seq(seq) && page >= 0 && page < n_pages() && indexed(page));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  TKV_CHECK(s.n_tokens % page_size_ == 0 &&
            static_cast<int64_t>(s.pages.size()) == s.n_tokens / page_size_);
  if (refcount_[static_cast<size_t>(page)]++ == 0) lru_.remove(page);
  s.pages.push_back(page);
  s.n_tokens += page_size_;
}

void PageTable::clear_index() {
  while (!lru_.empty()) free_.push_back(lru_.pop_front());
  for (auto& kv : index_) indexed_[static_cast<size_t>(kv.second)] = 0;
  index_.clear();
}

}  // namespace tkv::kv
