// Weight upload: mapping -> pinned chunk (memcpy on the host) -> device (cudaMemcpyAsync);
// chunk i + 1 is filled while chunk i's DMA runs, each chunk reused once its event fired.
#include "device/cuda_upload.h"

#include <cstring>

#include "device/cuda_check.h"

namespace tkv::device {

CudaBuffer& CudaBuffer::operator=(CudaBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = nullptr;
  }
  return *this;
}

CudaBuffer::~CudaBuffer() {
  if (ptr_) cudaFree(ptr_);
}

Result<CudaBuffer> CudaBuffer::allocate(size_t bytes) {
  CudaBuffer b;
  if (bytes > 0) {
    const cudaError_t e = cudaMalloc(&b.ptr_, bytes);
    if (e != cudaSuccess)
      return make_error(StatusCode::kResourceExhausted, "[device] cudaMalloc of {} bytes: {}",
                        bytes, cudaGetErrorString(e));
  }
  b.bytes_ = bytes;
  return b;
}

PinnedStaging::~PinnedStaging() {
  for (int i = 0; i < 2; ++i) {
    if (done_[i]) cudaEventSynchronize(done_[i]), cudaEventDestroy(done_[i]);
    if (buf_[i]) cudaFreeHost(buf_[i]);
  }
}

Status PinnedStaging::init() {
  for (int i = 0; i < 2; ++i) {
    if (buf_[i]) continue;
    TKV_RETURN_IF_ERROR(cuda_status(cudaMallocHost(&buf_[i], chunk_), "[device] cudaMallocHost"));
    TKV_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming),
                                    "[device] cudaEventCreate"));
  }
  return Status();
}

Status PinnedStaging::upload(const void* src, size_t n, void* dst, cudaStream_t stream) {
  TKV_RETURN_IF_ERROR(init());
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t off = 0, i = 0; off < n; off += chunk_, ++i) {
    const int k = static_cast<int>(i % 2);
    const size_t len = n - off < chunk_ ? n - off : chunk_;
    TKV_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(done_[k]), "[device] staging wait"));
    std::memcpy(buf_[k], s + off, len);
    TKV_RETURN_IF_ERROR(cuda_status(
        cudaMemcpyAsync(d + off, buf_[k], len, cudaMemcpyHostToDevice, stream), "[device] upload"));
    TKV_RETURN_IF_ERROR(cuda_status(cudaEventRecord(done_[k], stream), "[device] staging event"));
  }
  for (int k = 0; k < 2; ++k)
    TKV_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(done_[k]), "[device] upload wait"));
  return Status();
}

Result<CudaBuffer> upload_to_device(const void* src, size_t n, PinnedStaging& staging,
                                    cudaStream_t stream) {
  TKV_ASSIGN_OR_RETURN(CudaBuffer buf, CudaBuffer::allocate(n));
  TKV_RETURN_IF_ERROR(staging.upload(src, n, buf.data(), stream));
  return buf;
}

}  // namespace tkv::device
