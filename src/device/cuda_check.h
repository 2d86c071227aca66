// TKV_CUDA_CHECK(expr): abort with file:line and the CUDA error string when a
// runtime call fails (tests, benchmarks, invariants). Library entry points that
// can fail from outside return Status through tkv::device::cuda_status instead.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "base/status.h"

#define TKV_CUDA_CHECK(expr)                                                        \
  do {                                                                              \
    const cudaError_t tkv_cuda_err_ = (expr);                                       \
    if (tkv_cuda_err_ != cudaSuccess) {                                             \
      std::fprintf(stderr, "%s:%d: CUDA error %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(tkv_cuda_err_));                              \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

namespace tkv::device {

// OK, or "<what>: <error string>"; what starts with the component, "[x] ...".
inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  return make_error(StatusCode::kInternal, "{}: {}", what, cudaGetErrorString(e));
}

}  // namespace tkv::device
