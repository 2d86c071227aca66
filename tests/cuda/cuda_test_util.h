// Helpers of the CUDA tests: skip without a GPU (with the reason), a device buffer
// with upload/download, and the host-side paged cache builder shared by the encode
// and attention tests (random page order, head-major pages: rows = kernels::paged_row).
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "device/cuda_check.h"
#include "device/device.h"
#include "kernels/attention_cuda/paged_kv.h"
#include "quant/ggml_types.h"
#include "quant/kv_scheme.h"

#define TKV_SKIP_WITHOUT_GPU()                                                      \
  do {                                                                              \
    if (::tkv::device::cuda_device_count() == 0)                                    \
      GTEST_SKIP() << "needs a CUDA GPU: " << ::tkv::device::cuda_device_summary(); \
  } while (0)

namespace tkv::testing {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n = 0) { resize(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  void resize(size_t n) {
    if (ptr_) TKV_CUDA_CHECK(cudaFree(ptr_));
    ptr_ = nullptr;
    n_ = n;
    if (n) TKV_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
  }
  void upload(const std::vector<T>& h) {
    if (h.size() != n_) resize(h.size());
    if (n_) TKV_CUDA_CHECK(cudaMemcpy(ptr_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) TKV_CUDA_CHECK(cudaMemcpy(h.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void fill_bytes(int byte) {
    if (n_) TKV_CUDA_CHECK(cudaMemset(ptr_, byte, n_ * sizeof(T)));
  }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

// The weight types the CUDA GEMV and GEMM take.
inline constexpr ggml::Type kCudaWeightTypes[] = {
    ggml::Type::kQ4_0, ggml::Type::kQ4_1, ggml::Type::kQ5_0, ggml::Type::kQ8_0, ggml::Type::kQ4_K,
    ggml::Type::kQ5_K, ggml::Type::kQ6_K, ggml::Type::kF16,  ggml::Type::kBF16, ggml::Type::kF32};

// GGUF weights [n_out, n_in] of type t as random bytes with every fp16 scale field set to a
// finite value of random sign and magnitude 2^-8..2^-5; float types get values in (-1, 1).
std::vector<uint8_t> random_ggml_weights(ggml::Type t, int64_t n_in, int64_t n_out,
                                         std::mt19937& rng);

// The formats the CUDA kernels take: turbo (k_signed: int8 keys when k_bits is 8,
// else uint8) and bf16.
inline quant::KvScheme turbo_format(int k_bits, int v_bits, int head_dim, bool k_signed) {
  return {quant::KvKind::kTurbo, k_bits, v_bits, head_dim, k_bits == 8 && !k_signed};
}
inline quant::KvScheme bf16_format(int head_dim) {
  return {quant::KvKind::kBf16, 16, 16, head_dim};
}
// Short name: "bf16", "k8v3", "k8uv3", ... with "/d<head_dim>".
std::string format_name(const quant::KvScheme& f);

// Host copy of a paged cache: planes over n_pages * page_size * n_kv_heads rows.
struct HostPagedCache {
  quant::KvScheme format;
  int n_kv_heads = 0, page_size = 16, n_pages = 0;
  std::vector<uint8_t> k_data, v_data;
  std::vector<uint16_t> k_scale, k_zero, v_scale;
  std::vector<int32_t> page_indptr, page_indices, seq_lens;

  int64_t n_rows() const { return (int64_t)n_pages * page_size * n_kv_heads; }
  // Cache row of slot (page * page_size + offset), kv head h.
  int64_t slot_row(int64_t slot, int h) const {
    return kernels::paged_row(slot / page_size, n_kv_heads, h, page_size, (int)(slot % page_size));
  }
  // Cache row of token t of sequence s, kv head h.
  int64_t row(int s, int t, int h) const {
    const int page = page_indices[page_indptr[s] + t / page_size];
    return kernels::paged_row(page, n_kv_heads, h, page_size, t % page_size);
  }
};

// Page table for seq_lens with pages in a random order; planes sized, zero-filled.
HostPagedCache make_paged_cache(const quant::KvScheme& f, int n_kv_heads, int page_size,
                                const std::vector<int32_t>& seq_lens, std::mt19937& rng);

// Random K/V (Gaussian from n01 and rng, keys with per-channel offsets as real keys have) for every
// row of h, encoded into its planes by the reference codec; k_hat/v_hat get the dequantized rows
// [n_rows, head_dim]. Slots past each sequence's end (lens) then hold NaN, as unwritten
// device memory may: kernels must never read them.
void fill_paged_cache(HostPagedCache& h, const std::vector<int32_t>& lens, std::mt19937& rng,
                      std::normal_distribution<float>& n01, std::vector<float>* k_hat,
                      std::vector<float>* v_hat);

// h's page table as a block table [n_seqs, max pages + extra] (PagedKv::page_stride),
// entries past a sequence's pages set to pad.
std::vector<int32_t> block_table(const HostPagedCache& h, int extra, int32_t pad);

// Device copy of a HostPagedCache; view() points a PagedKv at it.
struct DevicePagedCache {
  DeviceBuffer<uint8_t> k_data, v_data;
  DeviceBuffer<uint16_t> k_scale, k_zero, v_scale;
  DeviceBuffer<int32_t> page_indptr, page_indices, seq_lens;
  void upload(const HostPagedCache& h);
  kernels::PagedKv view(const HostPagedCache& h) const;
};

}  // namespace tkv::testing
