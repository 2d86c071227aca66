// Least-recently-used order of the cached pages nobody references (prefix
// sharing): an intrusive doubly linked list over page ids, O(1) push, remove and
// pop. The front is evicted first.
#pragma once
#include <cstdint>
#include <vector>

#include "base/check.h"

namespace tkv::kv {

class PageLru {
 public:
  explicit PageLru(int64_t n_pages)
      : prev_(static_cast<size_t>(n_pages), -1),
        next_(static_cast<size_t>(n_pages), -1),
        in_(static_cast<size_t>(n_pages), 0) {}

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(int32_t p) const { return in_[idx(p)] != 0; }
  int32_t front() const { return head_; }  // -1 when empty

  void push_back(int32_t p) {
    TKV_CHECK(!contains(p));
    prev_[idx(p)] = tail_;
    next_[idx(p)] = -1;
    (tail_ >= 0 ? next_[idx(tail_)] : head_) = p;
    tail_ = p;
    in_[idx(p)] = 1;
    ++size_;
  }
  void remove(int32_t p) {
    TKV_CHECK(contains(p));
    const int32_t a = prev_[idx(p)], b = next_[idx(p)];
    (a >= 0 ? next_[idx(a)] : head_) = b;
    (b >= 0 ? prev_[idx(b)] : tail_) = a;
    in_[idx(p)] = 0;
    --size_;
  }
  int32_t pop_front() {
    const int32_t p = head_;
    TKV_CHECK(p >= 0);
    remove(p);
    return p;
  }

 private:
  static size_t idx(int32_t p) { return static_cast<size_t>(p); }
  std::vector<int32_t> prev_, next_;
  std::vector<uint8_t> in_;
  int32_t head_ = -1, tail_ = -1;
  int64_t size_ = 0;
};

}  // namespace tkv::kv
