// The backends an op can run on, and the one place in the source that asks
// whether CUDA is built (DESIGN.md, "Layers"): every op dispatches on Backend,
// never on TKV_WITH_CUDA itself.
#pragma once

#include "device/device.h"

namespace tkv::ops {

enum class Backend { kCpu, kCuda };

#if defined(TKV_WITH_CUDA)
inline constexpr bool kCudaBuilt = true;
#else
inline constexpr bool kCudaBuilt = false;
#endif

inline const char* backend_name(Backend b) {
  return b == Backend::kCuda ? "cuda" : "cpu";
}

// Built into this binary and, for CUDA, a device present.
inline bool backend_available(Backend b) {
  if (b == Backend::kCpu) return true;
  return kCudaBuilt && device::cuda_device_count() > 0;
}

}  // namespace tkv::ops
