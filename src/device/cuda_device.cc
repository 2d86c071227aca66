// CUDA device queries through the runtime API (plain C++, linked to cudart).
// cudaGetDeviceCount fails without a driver or GPU; that counts as 0 devices.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "device/device.h"

namespace tkv::device {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string cuda_device_summary() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return fmt::format("no CUDA device: {}", cudaGetErrorString(e));
  if (n == 0) return "no CUDA device: cudaGetDeviceCount returned 0";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return "no CUDA device: cudaGetDeviceProperties failed";
  return fmt::format("{}, {} SMs, {:.1f} GiB, sm_{}{}", p.name, p.multiProcessorCount,
                     (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major, p.minor);
}

}  // namespace tkv::device
