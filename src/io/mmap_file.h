// Read-only memory mapping of a whole file (mmap PROT_READ, MAP_PRIVATE).
// Owns the mapping; an empty file maps to {nullptr, 0}. Used by the GGUF
// and safetensors readers so weights are paged in lazily, never copied.
//
// A mapped file that another process truncates makes the next read of a page
// past the new end raise SIGBUS (MAP_PRIVATE does not prevent it: unmodified
// private pages still come from the page cache). Each mapping is registered
// with a SIGBUS handler: inside guarded_read() the fault becomes a Status;
// anywhere else (e.g. a matmul in the forward pass) the process exits with a
// message naming the file instead of dying with an unexplained signal.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace tkv::io {

class MmapFile {
 public:
  // Fails with "[mmap] <path>: <strerror>" if the file cannot be opened or mapped.
  static Result<std::unique_ptr<MmapFile>> open(const std::string& path);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }  // [size()]
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Runs fn(arg), which reads this mapping, turning a SIGBUS (the file shrank)
  // into an error. fn must hold no objects with destructors across the read:
  // the fault returns here with siglongjmp.
  Status guarded_read(void (*fn)(void*), void* arg) const;

 private:
  MmapFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  int slot_ = -1;  // index in the SIGBUS handler's table, -1 if not registered
};

}  // namespace tkv::io
