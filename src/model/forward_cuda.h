// CudaForward: the decoder forward on one CUDA device (device_forward.h). Internal to
// forward_cuda*.cc (it includes CUDA headers). Weights stay in their GGUF formats and
// go through gemv_cuda (<= 16 tokens a launch, so a longer batch runs in chunks); the
// small ops are kernels/nn_cuda; K/V are encoded into device pools with the host
// cache's page format and page ids; attention is the one-query decode kernel for
// one-token slices and the prefill kernel for longer ones (forward_cuda_attn.cc).
#pragma once
#include <cuda_runtime_api.h>

#include <map>
#include <vector>

#include "device/cuda_upload.h"
#include "kernels/attention_cuda/attention_cuda.h"
#include "kernels/attention_cuda/paged_kv.h"
#include "kernels/matmul_cuda/matmul_cuda.h"
#include "model/device_forward.h"
#include "model/model.h"

namespace tkv::model {

struct DevMatrix {
  device::CudaBuffer buf;      // [n_out, n_in] in `type` blocks, as in the GGUF
  const void* view = nullptr;  // instead of buf: rows of a fused matrix
  ggml::Type type = ggml::Type::kF32;
  int64_t n_in = 0, n_out = 0;
  const void* data() const { return view ? view : buf.data(); }
};

struct DevLayer {
  DevMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  // Q|K|V and gate|up as one matrix each where their types match (one GEMV launch, x
  // quantized once); wq/wk/wv and w_gate/w_up are then views of its rows (n_out 0: none).
  DevMatrix wqkv, w_gu;
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
  void copy_page(int32_t src, int32_t dst) override;  // forward_cuda_setup.cc

 private:
  Status upload_matrix(const kernels::WeightView& w, DevMatrix* m);
  // The parts as one matrix (rows concatenated) when type and n_in match, else each alone.
  Status upload_fused(const std::vector<const kernels::WeightView*>& ws,
                      const std::vector<DevMatrix*>& parts, DevMatrix* fused);
  Result<const float*> upload_vector(const std::vector<float>& v);  // null for empty v
  Status ensure_workspace(int64_t n_tokens);
  Status build_tables(const Batch& b, const Workspace& ws, const kv::KvCache& cache);
  // The step's kernels after the uploads: embedding scale, the layers, the logits rows.
  Status step_kernels(int64_t n);
  Status layer_forward(int il, int64_t n);
  Status attention(int il, int64_t n);
  kernels::DecodeCudaParams decode_params(int il, int64_t n) const;
  // Host rows of the wanted logits (ws.logits_row), uploaded into rows_; sets n_rows_.
  Status logits_rows(const Batch& b, Workspace& ws);
  Status logits_kernels();
  Status fetch_logits(Workspace& ws);
  // forward_cuda_graph.cc: a pure decode step replayed from a CUDA graph of its kernels,
  // captured again when the step's shape key or a scratch buffer changed.
  Status run_graph(int64_t n);
  Status prepare_capture(int64_t n);
  std::vector<const void*> graph_buffers() const;
  // y[t] = W x[t] for n tokens: the decode GEMV in launches of <= kGemvMaxTokens, or
  // from kGemmMinTokens on the bf16 tensor-core GEMM (gemm_cuda.h).
  Status gemv(const DevMatrix& m, const float* x, float* y, int64_t n);
  // A fused matrix's rows into y0 (n0 rows), y1 (n1) and y2 (the rest; null when none).
  Status gemv_split(const DevMatrix& m, const float* x, int64_t n, float* y0, int64_t n0, float* y1,
                    int64_t n1, float* y2);
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
  const float* k_signs_ = nullptr;  // rotated keys (KvScheme::k_rotated): the FWHT's signs
  int64_t n_pages_ = 0;             // pages per pool (the host cache's)
  Status copy_error_;               // a failed copy_page, returned by the next run()

  // Device scratch for up to cap_ tokens: activations [cap_, dim] fp32.
  int64_t cap_ = 0;
  device::CudaBuffer x_, h_, q_, k_, v_, attn_, ff_gate_, ff_up_;
  device::CudaBuffer pos_, slots_, seq_lens_, pages_;  // int32 tables of the step
  device::CudaBuffer attn_ws_, rows_, logits_in_, logits_;
  // bf16 q and out of the tensor-core decode attention (head_dim 128; decode_params).
  device::CudaBuffer q_bf16_, out_bf16_;
  bool tc_attn_ = true;  // TKV_CUDA_ATTN=general: the fp32 kernel everywhere
  // TKV_CUDA_GEMV=block: the block-pipelined decode GEMV for every matrix (the A/B of the
  // benchmark); auto: the warp kernel where it takes the matrix
  kernels::GemvCudaParams::Variant gemv_variant_ = kernels::GemvCudaParams::Variant::kAuto;
  bool pdl_on_ = true;      // TKV_CUDA_PDL=0: GEMVs launched plainly (GemvCudaParams::pdl)
  void* cublas_ = nullptr;  // gemm_cuda's handle, made on the first GEMM
  device::CudaBuffer gemm_scratch_;
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
  int64_t n_rows_ = 0;                // logits rows of the step

  // Decode-step graphs, one executable per step size (tokens); its key is what the
  // captured launches depend on besides the device buffers' contents.
  struct StepGraph {
    cudaGraphExec_t exec = nullptr;
    int max_seq_len = -1, page_stride = -1;
    int64_t n_rows = -1;
    std::vector<const void*> buffers;
  };
  // From this many tokens a matrix runs as one bf16 GEMM (dequantize + cuBLAS) instead of
  // GEMV launches of 16 tokens: at 32 tokens on the 8B shapes two GEMV launches take
  // ~150 us for ffn_up Q4_K, the dequantization and GEMM ~105 us (docs/bench/cuda.md).
  static constexpr int64_t kGemmMinTokens = 32;
  // Decode steps of at most this many tokens (one per sequence) run as graphs.
  static constexpr int64_t kGraphMaxTokens = 256;
  std::map<int64_t, StepGraph> graphs_;
  bool graphs_on_ = true;    // TKV_CUDA_GRAPHS=0 turns them off (the A/B of the benchmark)
  bool graph_step_ = false;  // this step runs as a graph (build_tables decides)
};

}  // namespace tkv::model
