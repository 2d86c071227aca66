// A KV page pool in anonymous mmap memory: the kernel hands out zero pages on
// first touch, so a cache sized for a long context costs RSS only for the
// pages its sequences actually write (no eager memset, unlike new T[n]()).
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tkv::kv {

class LazyPool {
 public:
  LazyPool() = default;
  // Maps `bytes` of zero-filled, untouched memory; ok() is false on failure.
  explicit LazyPool(size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~LazyPool() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  LazyPool(LazyPool&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  LazyPool& operator=(LazyPool&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  LazyPool(const LazyPool&) = delete;
  LazyPool& operator=(const LazyPool&) = delete;

  bool ok() const { return data_ != nullptr; }
  uint8_t* get() const { return data_; }  // [size()]
  size_t size() const { return bytes_; }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tkv::kv
