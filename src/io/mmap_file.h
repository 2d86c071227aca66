// Read-only memory mapping of a whole file (mmap PROT_READ, MAP_PRIVATE).
// Owns the mapping; an empty file maps to {nullptr, 0}. Used by the GGUF
// and safetensors readers so weights are paged in lazily, never copied.
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

 private:
  MmapFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tkv::io
