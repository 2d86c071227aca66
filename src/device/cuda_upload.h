// Device memory for weights: a move-only cudaMalloc'd buffer and the upload of host bytes
// (an mmapped GGUF tensor, say) through two pinned staging chunks, so the copy from the
// mapping overlaps the DMA of the previous chunk. Only in CUDA builds (includes CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace tkv::device {

class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  CudaBuffer& operator=(CudaBuffer&& o) noexcept;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  ~CudaBuffer();

  // cudaMalloc (256-byte aligned); "[device] ..." on failure.
  static Result<CudaBuffer> allocate(size_t bytes);
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Pinned host staging for uploads: two chunks of chunk_bytes, reused across uploads.
class PinnedStaging {
 public:
  explicit PinnedStaging(size_t chunk_bytes = size_t(32) << 20) : chunk_(chunk_bytes) {}
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();

  // Copies n bytes from src (host, any memory) to dst (device) on stream; returns when the
  // copy is complete, so src may be unmapped.
  Status upload(const void* src, size_t n, void* dst, cudaStream_t stream = nullptr);

 private:
  Status init();
  size_t chunk_;
  void* buf_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
};

// Allocates and fills a device copy of n host bytes (one GGUF tensor's data).
Result<CudaBuffer> upload_to_device(const void* src, size_t n, PinnedStaging& staging,
                                    cudaStream_t stream = nullptr);

}  // namespace tkv::device
