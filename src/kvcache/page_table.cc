// PageTable implementation (see page_table.h).
#include "kvcache/page_table.h"

#include "base/check.h"

namespace tkv::kv {

PageTable::PageTable(int64_t n_pages, int page_size, int max_seqs)
    : page_size_(page_size),
      refcount_(static_cast<size_t>(n_pages), 0),
      seqs_(static_cast<size_t>(max_seqs)) {
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
  if (--rc == 0) free_.push_back(page);
}

void PageTable::free_seq(int seq) {
  TKV_CHECK(valid_seq(seq));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  for (int32_t p : s.pages) unref(p);
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
  if (partial && free_.empty()) {
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
    const int32_t np = free_.back();
    free_.pop_back();
    refcount_[static_cast<size_t>(np)] = 1;
    d.pages.push_back(np);
    *copy_src_page = s.pages[static_cast<size_t>(full)];
    *copy_dst_page = np;
  }
  return dst;
}

Status PageTable::reserve(int seq, int64_t n_new) {
  TKV_CHECK(valid_seq(seq));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const int64_t need = (s.n_tokens + n_new + page_size_ - 1) / page_size_;
  const int64_t add = need - static_cast<int64_t>(s.pages.size());
  if (add > static_cast<int64_t>(free_.size()))
    return make_error(StatusCode::kResourceExhausted,
                      "[kvcache] out of KV pages: sequence needs {} more pages of {} tokens, {} "
                      "free (context full)",
                      add, page_size_, free_.size());
  // A shared (forked) last page must not be written: the fork copied it, so only
  // pages past n_tokens are new here.
  for (int64_t i = 0; i < add; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
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

}  // namespace tkv::kv
