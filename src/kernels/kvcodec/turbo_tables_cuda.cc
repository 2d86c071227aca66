// Uploads quant/turbo_tables.h's host tables into one device buffer (once, under
// std::call_once). Built only with TKV_CUDA (src/kernels/CMakeLists.txt).
#include "kernels/kvcodec/turbo_tables_cuda.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "quant/turbo_tables.h"

namespace tkv::kernels {
namespace {

constexpr int kDims[4] = {64, 128, 256, 512};
constexpr int kBits[6] = {1, 2, 3, 4, 5, 8};

struct Tables {
  const float* signs[4] = {};
  const float* centroids[6] = {};
  const float* boundaries[6] = {};
};

const Tables& tables() {
  static Tables t;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<float> host;
    size_t sign_off[4], cent_off[6], bound_off[6];
    for (int i = 0; i < 4; ++i) {
      sign_off[i] = host.size();
      host.insert(host.end(), quant::turbo_signs(kDims[i]),
                  quant::turbo_signs(kDims[i]) + kDims[i]);
    }
    for (int i = 0; i < 6; ++i) {
      const int n = 1 << kBits[i];
      cent_off[i] = host.size();
      host.insert(host.end(), quant::turbo_centroids(kBits[i]),
                  quant::turbo_centroids(kBits[i]) + n);
      bound_off[i] = host.size();
      host.insert(host.end(), quant::turbo_boundaries(kBits[i]),
                  quant::turbo_boundaries(kBits[i]) + n - 1);
      host.push_back(0.0f);  // keeps every table 16-byte friendly; never read
    }
    float* dev = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&dev), host.size() * sizeof(float)) != cudaSuccess)
      return;
    if (cudaMemcpy(dev, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) !=
        cudaSuccess) {
      cudaFree(dev);
      return;
    }
    for (int i = 0; i < 4; ++i) t.signs[i] = dev + sign_off[i];
    for (int i = 0; i < 6; ++i)
      t.centroids[i] = dev + cent_off[i], t.boundaries[i] = dev + bound_off[i];
  });
  return t;
}

int bits_index(int v_bits) {
  for (int i = 0; i < 6; ++i) {
    if (kBits[i] == v_bits) return i;
  }
  return -1;
}

}  // namespace

const float* turbo_signs_cuda(int head_dim) {
  for (int i = 0; i < 4; ++i) {
    if (kDims[i] == head_dim) return tables().signs[i];
  }
  return nullptr;
}
const float* turbo_centroids_cuda(int v_bits) {
  const int i = bits_index(v_bits);
  return i < 0 ? nullptr : tables().centroids[i];
}
const float* turbo_boundaries_cuda(int v_bits) {
  const int i = bits_index(v_bits);
  return i < 0 ? nullptr : tables().boundaries[i];
}

}  // namespace tkv::kernels
