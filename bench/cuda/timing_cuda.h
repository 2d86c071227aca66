// Timing of the CUDA benchmarks (tkv_cuda_bench, tkv_read_bw): CUDA events around each
// call, median, after an L2-evicting read; the copy-bandwidth reference. Header-only
// (TKV_CUDA_CHECK aborts on error).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/cuda/fill_cuda.h"
#include "device/cuda_check.h"

namespace tkv::bench {

// Median µs of fn over iters timed calls (CUDA events around each call). Before each
// call a kernel reads 256 MB (evicting the 50 MB L2 with clean lines: a cold cache, as
// a decode step after the other layers) and keeps the GPU busy while the host enqueues
// the call, so the host's launch latency is hidden: the figure is GPU time. flush =
// false: the GPU idles before each call, and the interval includes the host's launch
// latency (reported as the "idle-GPU" figure; it favours the engine with the faster launch).
template <typename F>
double median_us(F&& fn, int iters, bool flush = true, int warm = 3) {
  static uint8_t* scratch = nullptr;
  constexpr int64_t kScratch = int64_t(256) << 20;
  if (flush && !scratch) {
    TKV_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch), kScratch + 16));
    TKV_CUDA_CHECK(fill_random_bytes(scratch, kScratch, 99));
  }
  for (int i = 0; i < warm; ++i) fn();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  TKV_CUDA_CHECK(cudaEventCreate(&a));
  TKV_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    if (flush)
      TKV_CUDA_CHECK(
          flush_l2_by_reads(scratch, kScratch, reinterpret_cast<uint32_t*>(scratch + kScratch)));
    TKV_CUDA_CHECK(cudaEventRecord(a));
    fn();
    TKV_CUDA_CHECK(cudaEventRecord(b));
    TKV_CUDA_CHECK(cudaEventSynchronize(b));
    TKV_CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  TKV_CUDA_CHECK(cudaEventDestroy(a));
  TKV_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return 1e3 * ms[iters / 2];
}

inline void* dmalloc(int64_t bytes) {
  void* p = nullptr;
  TKV_CUDA_CHECK(cudaMalloc(&p, std::max<int64_t>(bytes, 16)));
  return p;
}

// Device-to-device copy bandwidth of a 2 GiB cudaMemcpy, counting bytes read + written.
inline double copy_gbs() {
  const int64_t n = int64_t(1) << 31;
  void* a = dmalloc(n);
  void* b = dmalloc(n);
  TKV_CUDA_CHECK(fill_random_bytes(static_cast<uint8_t*>(a), n, 1));
  const double us =
      median_us([&] { TKV_CUDA_CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 20);
  TKV_CUDA_CHECK(cudaFree(a));
  TKV_CUDA_CHECK(cudaFree(b));
  return 2.0 * n / (us * 1e-6) / 1e9;
}

}  // namespace tkv::bench
