// Small helpers shared by the CUDA forward's files (forward_cuda.cc, forward_cuda_attn.cc):
// CUDA errors as Status, grow-only device buffers, typed views of a buffer.
#pragma once
#include <cstddef>
#include <cstdint>

#include "device/cuda_check.h"

namespace tkv::model::cuda_fwd {
inline Status ck(cudaError_t e, const char* what) {
  return device::cuda_status(e, what);
}
inline Status ensure(device::CudaBuffer& b, size_t bytes) {
  if (b.bytes() >= bytes) return Status();
  b = device::CudaBuffer();  // free first: the new one may need the room
  TKV_ASSIGN_OR_RETURN(b, device::CudaBuffer::allocate(bytes));
  return Status();
}
inline float* F(const device::CudaBuffer& b) {
  return static_cast<float*>(b.data());
}
inline int32_t* I(const device::CudaBuffer& b) {
  return static_cast<int32_t*>(b.data());
}
}  // namespace tkv::model::cuda_fwd
