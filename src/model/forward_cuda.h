// CudaForward: the decoder forward on one CUDA device (device_forward.h). Internal to
// forward_cuda*.cc (it includes CUDA headers). Weights stay in their GGUF formats and
// go through gemv_cuda (<= 16 tokens a launch, so a longer batch runs in chunks); the
// small ops are kernels/nn_cuda; K/V are encoded into device pools with the host
// cache's page format and page ids; attention is the one-query decode kernel for
// one-token slices and the prefill kernel for longer ones (forward_cuda_attn.cc).
#pragma once
#include <cuda_runtime_api.h>

#include <vector>

#include "device/cuda_upload.h"
#include "kernels/attention_cuda/paged_kv.h"
#include "kernels/matmul_cuda/matmul_cuda.h"
#include "model/device_forward.h"
#include "model/model.h"

namespace tkv::model {

struct DevMatrix {
  device::CudaBuffer buf;  // [n_out, n_in] in `type` blocks, as in the GGUF
  ggml::Type type = ggml::Type::kF32;
  int64_t n_in = 0, n_out = 0;
};

struct DevLayer {
  DevMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  // fp32 vectors (null when the architecture has none)
  const float *attn_norm = nullptr, *ffn_norm = nullptr, *post_attn_norm = nullptr,
              *post_ffn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *k_center = nullptr;
  // This layer's KV pool planes ([n_pages, n_kv_heads, page_size, bytes] each)
  device::CudaBuffer k_data, v_data, k_scale, k_zero, v_scale;
};

class CudaForward final : public DeviceForward {
 public:
  CudaForward(const ModelConfig& c, const Weights& w, bool key_center)
      : cfg_(c), w_(w), key_center_(key_center) {}
  ~CudaForward() override;
  // forward_cuda_setup.cc: checks what CUDA supports, uploads, allocates the pools.
  Status init(const kv::KvCache& cache);
  // forward_cuda.cc
  Status run(const Batch& b, Workspace& ws, const kv::KvCache& cache) override;

 private:
  Status upload_matrix(const kernels::WeightView& w, DevMatrix* m);
  Result<const float*> upload_vector(const std::vector<float>& v);  // null for empty v
  Status ensure_workspace(int64_t n_tokens);
  Status build_tables(const Batch& b, const Workspace& ws, const kv::KvCache& cache);
  Status layer_forward(int il, int64_t n);
  Status attention(int il, int64_t n);
  Status output_logits(const Batch& b, Workspace& ws);
  // y[t] = W x[t] for n tokens, in launches of <= kGemvMaxTokens.
  Status gemv(const DevMatrix& m, const float* x, float* y, int64_t n);
  kernels::PagedKv paged(int il) const;

  ModelConfig cfg_;
  const Weights& w_;
  bool key_center_ = true;
  cudaStream_t stream_ = nullptr;
  int sm_count_ = 132;
  device::PinnedStaging staging_;
  std::vector<device::CudaBuffer> vectors_;  // owns the DevLayer fp32 vectors
  std::vector<DevLayer> layers_;
  DevMatrix output_;
  const float* output_norm_ = nullptr;
  kernels::KvPageFormat kv_format_;

  // Device scratch for up to cap_ tokens: activations [cap_, dim] fp32.
  int64_t cap_ = 0;
  device::CudaBuffer x_, h_, q_, k_, v_, attn_, ff_gate_, ff_up_;
  device::CudaBuffer pos_, slots_, seq_lens_, pages_;  // int32 tables of the step
  device::CudaBuffer attn_ws_, rows_, logits_in_, logits_;
  int page_stride_ = 0, max_seq_len_ = 0;  // block-table row length; longest decode row
  // Prefill slices of the step: [first row, tokens, seq_len] x n_prefill_, then their
  // block-table rows; decode rows (one-token slices) counted in n_decode_.
  device::CudaBuffer pf_tables_;
  std::vector<int32_t> host_pf_;
  bool prefill_ok_ = false;  // the prefill kernel takes this format and head count
  int n_decode_ = 0, n_prefill_ = 0, max_q_len_ = 0;
  float attn_scale_ = 1.0f;
  std::vector<int32_t> host_tables_;  // staging of slots, seq_lens, pages (decode rows)
  std::vector<float> host_x_;         // embedding rows
};

}  // namespace tkv::model
